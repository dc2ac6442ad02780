# Shared by image/build and image/provision: messages, host-tool checks and
# reading a tier's package list. Sourced, never run.

say() { printf '%s: %s\n' "${0##*/}" "$*" >&2; }
die() { say "error: $*"; exit "${EXIT_CODE:-1}"; }

# need TOOL PACKAGE: a missing host tool is named with the Debian package
# that provides it, so the fix is one apt-get away.
need() {
	command -v "$1" >/dev/null 2>&1 ||
		die "host tool '$1' is missing: install the Debian package '$2' (apt-get install $2)"
}

# tiers: the tiers that exist, from image/tiers/*.packages.
tiers() {
	local f
	for f in "$IMAGE_DIR"/tiers/*.packages; do
		f=${f##*/}
		printf '%s\n' "${f%.packages}"
	done
}

# check_tier TIER: refuses a tier that has no package list.
check_tier() {
	[ -f "$IMAGE_DIR/tiers/$1.packages" ] ||
		EXIT_CODE=2 die "TIER='$1' is not a tier: allowed values are $(tiers | paste -sd '|')"
}

# tier_chain TIER: the tiers a tier is built from, base first. Every tier but
# base starts from base; a tier is a package list plus provision steps.
tier_chain() {
	if [ "$1" = base ]; then echo base; else printf 'base\n%s\n' "$1"; fi
}

# packages TIER: the tier's package names, comments and blank lines dropped.
packages() {
	sed -e 's/#.*//' -e 's/[[:space:]]//g' "$IMAGE_DIR/tiers/$1.packages" | grep -v '^$'
}

# diverts TIER: the files of cocoonbox-guest that TIER's package replaces
# (image/debian/TIER.diverts). Its preinst diverts each (dpkg-divert keeps
# the base file at PATH.cocoonbox-guest) and its postrm gives it back;
# image/provision lays a root out the same way.
diverts() {
	[ ! -f "$IMAGE_DIR/debian/$1.diverts" ] ||
		sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$IMAGE_DIR/debian/$1.diverts"
}
