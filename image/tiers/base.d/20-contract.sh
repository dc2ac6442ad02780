# shellcheck shell=bash
# Contract: Guest (image) ↔ agent, the parts of the image contract that need
# an owner other than root, a mode git cannot carry, or a value computed at
# provision. The plain files (polkit rule, logind drop-in, policies, ...)
# come from base.rootfs/, units/ and polkit/. Idempotent: each write below
# happens only when the content, owner or mode differs, so a second run
# changes nothing (not even an mtime).
# purge: /etc/cocoonbox/desk.env
# purge: /var/lib/systemd/linger/user
root=$1
say() { printf '20-contract.sh: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

id_of() { # id_of passwd|group NAME: the number NAME has inside ROOT
	chroot "$root" getent "$1" "$2" | cut -d: -f3
}
uid_user=$(id_of passwd user)
gid_user=$(id_of group user)
uid_cbagent=$(id_of passwd cbagent)
gid_cbagent=$(id_of group cbagent)
[ -n "$uid_user" ] && [ -n "$uid_cbagent" ] || die "users user and cbagent must exist (10-users.sh)"

# ensure_dir PATH MODE UID GID: the directory, with that owner and mode.
ensure_dir() {
	install -d "$root$1"
	[ "$(stat -c '%u:%g' "$root$1")" = "$3:$4" ] || chown "$3:$4" "$root$1"
	[ "$(stat -c '%a' "$root$1")" = "$2" ] || chmod "$2" "$root$1"
}
# ensure_file PATH MODE UID GID: owner and mode of an existing file.
ensure_file() {
	[ "$(stat -c '%u:%g' "$root$1")" = "$3:$4" ] || chown "$3:$4" "$root$1"
	[ "$(stat -c '%a' "$root$1")" = "$2" ] || chmod "$2" "$root$1"
}
# put PATH MODE UID GID < CONTENT: writes the file only when its content
# differs (temp file in the same directory, then rename), then owner, mode.
# The content is compared from outside ROOT first, so an unchanged file
# leaves even its directory's mtime alone.
put() {
	local new tmp
	new=$(mktemp)
	cat >"$new"
	if ! { [ -f "$root$1" ] && cmp -s "$new" "$root$1"; }; then
		tmp=$(mktemp "$root$(dirname "$1")/.cocoonbox.XXXXXX")
		cat "$new" >"$tmp"
		chown "$3:$4" "$tmp"
		chmod "$2" "$tmp"
		mv -f "$tmp" "$root$1"
	fi
	rm -f "$new"
	ensure_file "$1" "$2" "$3" "$4"
}

# polkitd reads its rules as user polkitd; the package makes the rules
# directory polkitd:root 0700, which provision's copy of polkit/rules.d
# resets to root 0755. Put the package's owner and mode back.
uid_polkitd=$(id_of passwd polkitd)
[ -n "$uid_polkitd" ] || die "user polkitd is missing: is the package polkitd installed?"
ensure_dir /etc/polkit-1/rules.d 700 "$uid_polkitd" 0

# Loop: /etc/cocoonbox/agent.env (root:cbagent 0640). The default holds the
# contract's keys with placeholder values; an image builder's own file (or
# one edited since) is kept, but must carry every key the contract lists.
ensure_dir /etc/cocoonbox 755 0 0
env=/etc/cocoonbox/agent.env
if [ ! -e "$root$env" ]; then
	put "$env" 640 0 "$gid_cbagent" <"$root/usr/share/cocoonbox/agent.env"
fi
ensure_file "$env" 640 0 "$gid_cbagent"
for key in GW_BASE_URL GW_API_KEY MODEL_MAIN MODEL_COMPUTER AGENT_LISTEN; do
	grep -q "^$key=." "$root$env" ||
		die "$env lacks the key $key (every agent.env needs GW_BASE_URL GW_API_KEY MODEL_MAIN MODEL_COMPUTER AGENT_LISTEN)"
done

# Loop: the agent's state directory, cbagent 0700 (also cbagent's home).
ensure_dir /var/lib/cocoonbox 700 "$uid_cbagent" "$gid_cbagent"

# Desk runtime: /etc/cocoonbox/desk.env (root 0644) holds GW_BASE_URL,
# copied from agent.env at provision, for shuttle (world-readable: it is
# the proxy's address, no secret).
gw=$(grep '^GW_BASE_URL=' "$root$env" | tail -n 1)
put /etc/cocoonbox/desk.env 644 0 0 <<EOT
# Written by image/provision from /etc/cocoonbox/agent.env (Contract: Desk runtime).
$gw
EOT

# Workspace: /workspace, owned by user (tmpfiles keeps it so at each boot).
ensure_dir /workspace 755 "$uid_user" "$gid_user"

# Desktop restart: user lingers, so user@1000 (the user manager: shuttle,
# the toolhost, Chrome) runs from boot and is not stopped when the desktop
# session ends. What `loginctl enable-linger user` does: an empty file.
ensure_dir /var/lib/systemd/linger 755 0 0
[ -f "$root/var/lib/systemd/linger/user" ] || : >"$root/var/lib/systemd/linger/user"
ensure_file /var/lib/systemd/linger/user 644 0 0
