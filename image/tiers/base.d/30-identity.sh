# Box identity and the journal across wakes (issue 3).
# The journal catalog (cocoonbox-identity.catalog, from base.rootfs) goes
# into journald's catalog database, so `journalctl -x` explains our entries.
# --update-catalog rebuilds the database from the same files each time:
# a second run writes the same bytes.
root=$1
journalctl --root="$root" --update-catalog
# Contract: Journal. Persistent, one directory per machine id; journald
# creates /var/log/journal itself (Storage=persistent), made here too so a
# box's first boot writes there from the start.
install -d -m 2755 -o 0 -g "$(chroot "$root" getent group systemd-journal | cut -d: -f3)" "$root/var/log/journal"
