# Contract: Offload. mise (the environment step's tool manager, pinned and
# checked by image/fetch-mise) and the box packer on PATH as
# /usr/local/bin/cocoonbox-agent. Idempotent: install -C and the link test
# write only what differs.
root=$1
mise=$("$REPO/image/fetch-mise") || { echo "40-offload.sh: error: no mise" >&2; exit 1; }
install -C -m 0755 -o 0 -g 0 "$mise" "$root/usr/local/bin/mise"
[ "$(readlink "$root/usr/local/bin/cocoonbox-agent" 2>/dev/null)" = /usr/local/lib/cocoonbox/cocoonbox-agent ] ||
	ln -sfn /usr/local/lib/cocoonbox/cocoonbox-agent "$root/usr/local/bin/cocoonbox-agent"
