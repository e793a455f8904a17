#!/bin/bash
# The runtime's boot-time configuration as a small ISO labelled SYMCFG (inserted as a second virtual medium):
# the controller's SSH public key and, optionally, its callback URL. Nothing of this is in the runtime image.
# Usage: config-medium.sh OUT.iso AUTHORIZED_KEYS_FILE [CALLBACK_URL]
set -euo pipefail
out=$1; keys=$2; callback=${3:-}
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
install -m 0644 "$keys" "$dir/authorized_keys"
[ -z "$callback" ] || echo "$callback" > "$dir/callback"
xorriso -as mkisofs -quiet -o "$out" -V SYMCFG -r "$dir"
