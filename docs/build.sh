#!/usr/bin/env bash
# Builds the collection's HTML docs into build/docs/html (called by `make docs`); the collection must be on
# ANSIBLE_COLLECTIONS_PATH (the Makefile points it at build/collections).
set -euo pipefail
here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here/../build/docs}"
mkdir -p "$out/rst"
chmod 0755 "$out" && chmod og-w "$out/rst"  # antsibull-docs wants its output only writable by its owner
antsibull-docs --config-file "$here/antsibull-docs.cfg" collection --cleanup everything --use-current \
  --dest-dir "$out/rst" symphony.cluster
cp "$here/index.rst" "$out/rst/index.rst"
sphinx-build -q -b html "$out/rst" "$out/html" -c "$here" -W --keep-going
echo "docs: $out/html/index.html"
