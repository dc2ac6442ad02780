# Contract: Offload. What the box side needs from npm, pinned by sha256
# (image/npm-fetch). (cocoonbox-agent is on PATH by image/manifest.) Idempotent: install -C and
# the version checks write only what differs. A stage step (image/stage
# runs it on the staged tree, $1, at build time): what it fetches is part
# of the package, the box never fetches it.
#
# - mise, the environment step's tool manager: a native executable inside
#   @jdxcode/mise-linux-x64 (the @jdxcode/mise wrapper only runs npm to
#   fetch it), at /usr/local/bin/mise.
# - npm, for mise's npm: tools (npm is the one tool registry boxes reach
#   here): npm's own package bundles its dependencies and runs on Debian's
#   nodejs (18); Debian's npm package (300 node-* packages) defeats
#   debootstrap's dependency resolution.
root=$1
say() { printf '40-offload.sh: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
fetch() { "$REPO/image/npm-fetch" "$@" || die "could not fetch $1@$2"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

tgz=$(fetch @jdxcode/mise-linux-x64 2026.9.15 b51f2463bc4fcdc3b0959b1454792f64be3612e73d856cbca4a062e39e070e74)
tar -xzf "$tgz" -C "$tmp" package/bin/mise
install -d -m 0755 "$root/usr/local/bin"
install -C -m 0755 -o 0 -g 0 "$tmp/package/bin/mise" "$root/usr/local/bin/mise"

NPM_VERSION=10.9.9
tgz=$(fetch npm $NPM_VERSION c80bd097147cce32e31010b791bab8c71a26a5e10668210ec9d2e7f4c7cea2a1)
lib=$root/usr/local/lib/npm
if [ "$(cat "$lib/.cocoonbox-version" 2>/dev/null)" != "$NPM_VERSION" ]; then
	rm -rf "$lib.new"
	mkdir -p "$lib.new"
	tar -xzf "$tgz" -C "$lib.new" --strip-components=1 --no-same-owner
	echo "$NPM_VERSION" >"$lib.new/.cocoonbox-version"
	rm -rf "$lib" && mv "$lib.new" "$lib"
fi
for b in npm npx; do
	[ "$(readlink "$root/usr/local/bin/$b" 2>/dev/null)" = "/usr/local/lib/npm/bin/$b-cli.js" ] ||
		ln -sfn "/usr/local/lib/npm/bin/$b-cli.js" "$root/usr/local/bin/$b"
done

