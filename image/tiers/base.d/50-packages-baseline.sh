# Contract: Packages. /etc/cocoonbox/packages.baseline is the image's
# `apt-mark showmanual`: the packages the image itself marked manual, which
# the recording hook leaves out of the user's list. Idempotent: the file is
# replaced only when its content would change.
# (Runs after the tier's packages are in the root: the layer installs them.
# A later step that apt-installs more would have to run this again.)
root=$1
dest=$root/etc/cocoonbox/packages.baseline
install -d -m 0755 "$root/etc/cocoonbox"
tmp=$(mktemp "$dest.XXXXXX")
trap 'rm -f "$tmp"' EXIT
chroot "$root" apt-mark showmanual >"$tmp"
[ -s "$tmp" ] || { echo "50-packages-baseline: apt-mark showmanual printed nothing in $root" >&2; exit 1; }
chmod 0644 "$tmp"
if cmp -s "$tmp" "$dest"; then
	rm -f "$tmp"
else
	mv -f "$tmp" "$dest"
fi
trap - EXIT
