# shellcheck shell=bash
# Contract: Guest (image) ↔ agent, "Desktop user" and "Agent user".
# user (uid 1000) is the desktop user; cbagent is the agent's system user,
# with no login shell and in none of user's groups.
root=$1
if ! chroot "$root" getent passwd user >/dev/null; then
	useradd --root "$root" --uid 1000 --user-group --create-home --shell /bin/bash \
		--comment "cocoonbox desktop user" user
fi
if ! chroot "$root" getent passwd cbagent >/dev/null; then
	useradd --root "$root" --system --user-group --no-create-home \
		--home-dir /var/lib/cocoonbox --shell /usr/sbin/nologin --comment "cocoonbox agent" cbagent
fi
# Passwordless sudo for user, keeping the proxy variables; a broken file
# would lock every admin out of sudo, so visudo checks it first.
f=$root/etc/sudoers.d/90-cocoonbox-user
chmod 0440 "$f"
chown 0:0 "$f"
chroot "$root" visudo -c -q -f /etc/sudoers.d/90-cocoonbox-user
# ... and the whole policy as sudo will read it (sudoers plus sudoers.d).
chroot "$root" visudo -c -q
