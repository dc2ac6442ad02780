# shellcheck shell=bash
# Contract: Packages. /etc/cocoonbox/packages.baseline is the image's
# `apt-mark showmanual`: the packages the image itself marked manual, which
# the recording hook leaves out of the user's list. Idempotent: the file is
# replaced only when its content would change.
# (Runs after the tier's packages are in the root: the layer installs them.
# A later step that apt-installs more would have to run this again.)
# purge: /etc/cocoonbox/packages.baseline
root=$1
dest=$root/etc/cocoonbox/packages.baseline
install -d -m 0755 "$root/etc/cocoonbox"
# The new content is made and compared outside ROOT: a temp file in
# /etc/cocoonbox, even one removed again, would change the directory's mtime
# on every run.
new=$(mktemp)
trap 'rm -f "$new" "${tmp:-}"' EXIT
chroot "$root" apt-mark showmanual >"$new"
[ -s "$new" ] || { echo "50-packages-baseline: apt-mark showmanual printed nothing in $root" >&2; exit 1; }
if ! cmp -s "$new" "$dest"; then
	tmp=$(mktemp "$dest.XXXXXX")
	cat "$new" >"$tmp"
	chmod 0644 "$tmp"
	mv -f "$tmp" "$dest"
fi
rm -f "$new"
trap - EXIT
