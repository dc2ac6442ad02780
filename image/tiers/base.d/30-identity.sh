# shellcheck shell=bash
# Box identity and the journal across wakes (issue 3).
# The journal catalog (cocoonbox-identity.catalog, from base.rootfs) goes
# into journald's catalog database, so `journalctl -x` explains our entries.
# --update-catalog rewrites the database (same bytes, new mtime) each time
# it runs, so it runs only when a catalog file is newer than the database:
# a second provision run changes nothing.
root=$1
db=$root/var/lib/systemd/catalog/database
if [ ! -e "$db" ] || [ -n "$(find "$root/usr/lib/systemd/catalog" -newer "$db" -print -quit)" ]; then
	journalctl --root="$root" --update-catalog
fi
# Contract: Journal. Persistent, one directory per machine id; journald
# creates /var/log/journal itself (Storage=persistent), made here too so a
# box's first boot writes there from the start.
install -d -m 2755 -o 0 -g "$(chroot "$root" getent group systemd-journal | cut -d: -f3)" "$root/var/log/journal"
# Contract: Box identity. Every hostname the box has resolves, not only the
# one cocoonbox-hostname wrote into /etc/hosts: nss-myhostname answers for
# the current hostname (and localhost) after /etc/hosts and before DNS,
# which sudo and others ask. Written only when missing (a second provision
# run changes nothing).
nss=$root/etc/nsswitch.conf
if ! grep -qE '^hosts:.*[[:space:]]myhostname([[:space:]]|$)' "$nss"; then
	grep -qE '^hosts:[[:space:]]+files([[:space:]]|$)' "$nss" ||
		{ echo "30-identity.sh: $nss has no 'hosts: files ...' line to add myhostname to" >&2; exit 1; }
	sed -i -E 's/^(hosts:[[:space:]]+files)([[:space:]]|$)/\1 myhostname\2/' "$nss"
fi
