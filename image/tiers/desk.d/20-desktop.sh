# shellcheck shell=bash
# Contract: Desktop user, Desktop session save.
# The desk tier's settings that are not plain files (those are in
# image/tiers/desk.rootfs). Idempotent: a second run changes nothing.
root=$1

# dconf: compile the defaults in /etc/dconf/db/local.d (Mousepad's
# session-restore='always') into /etc/dconf/db/local; dconf update rewrites
# it only when a keyfile is newer than the database.
chroot "$root" dconf update

# xkbcomp writes compiled keymaps here; ProtectSystem=strict in
# cocoonbox-xorg.service leaves only this (and the others it names) writable.
install -d -m 0755 "$root/var/lib/xkb"
