# shellcheck shell=bash
# Contract: Guest (image) ↔ agent, "Desktop user" and "Agent user".
# user (uid 1000) is the desktop user; cbagent is the agent's system user,
# with no login shell and in none of user's groups.
# Made with adduser, Debian's tool for it (policy 9.2.2), only when missing;
# an image builder's own user 1000 of another name is refused, naming it.
root=$1
if ! chroot "$root" getent passwd user >/dev/null; then
	other=$(chroot "$root" getent passwd 1000 | cut -d: -f1 || true)
	[ -z "$other" ] || { echo "10-users.sh: uid 1000 is '$other', not 'user': the desktop user must be user (uid 1000)" >&2; exit 1; }
	chroot "$root" adduser --quiet --uid 1000 --disabled-password --shell /bin/bash \
		--gecos "cocoonbox desktop user" user
fi
if ! chroot "$root" getent passwd cbagent >/dev/null; then
	chroot "$root" adduser --quiet --system --group --no-create-home \
		--home /var/lib/cocoonbox --shell /usr/sbin/nologin --gecos "cocoonbox agent" cbagent
fi
# Passwordless sudo for user, keeping the proxy variables; a broken file
# would lock every admin out of sudo, so visudo checks it first.
f=$root/etc/sudoers.d/90-cocoonbox-user
chmod 0440 "$f"
chown 0:0 "$f"
chroot "$root" visudo -c -q -f /etc/sudoers.d/90-cocoonbox-user
# ... and the whole policy as sudo will read it (sudoers plus sudoers.d).
chroot "$root" visudo -c -q
