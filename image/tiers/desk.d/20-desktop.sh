# shellcheck shell=bash
# Contract: Desktop user, Desktop session save.
# The desk tier's settings that are not plain files (those are in
# image/tiers/desk.rootfs). Idempotent: a second run changes nothing.
root=$1

# dconf: compile the defaults in /etc/dconf/db/local.d (Mousepad's
# session-restore='always') into /etc/dconf/db/local, only when the
# database is missing or older than a keyfile or the folder (a removed
# keyfile): dconf update itself rewrites it on every run.
db=$root/etc/dconf/db
if [ ! -e "$db/local" ] || [ -n "$(find "$db/local.d" -newer "$db/local" -print -quit)" ]; then
	chroot "$root" dconf update
fi

# xkbcomp writes compiled keymaps here; ProtectSystem=strict in
# cocoonbox-xorg.service leaves only this (and the others it names) writable.
install -d -m 0755 "$root/var/lib/xkb"
