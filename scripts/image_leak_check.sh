#!/usr/bin/env bash
# No secret reaches an image layer: plants one where a build could pick it up (a file in the
# build context, the CA bundle the builder's pip is handed, the connectors file and SMTP password
# of a sandbox home inside the tree), builds the image with scripts/image.sh, saves it
# (podman save), unpacks every layer and searches all of it. Exit 1 if the planted value is found.
#   bash scripts/image_leak_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
planted="PLANTED-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
work=$(mktemp -d)
cleanup() { rm -rf "$work" planted-secret.txt .runonce-leak-check; }
trap cleanup EXIT
echo "$planted" > planted-secret.txt                                     # the build context's root
mkdir -p .runonce-leak-check && echo "password = \"$planted\"" > .runonce-leak-check/connectors.toml
cp "$(python3 -c 'import ssl; print(ssl.get_default_verify_paths().cafile or "/etc/ssl/certs/ca-certificates.crt")')" \
  "$work/ca.pem"
echo "# $planted" >> "$work/ca.pem"                                     # what the builder's pip trusts
PIP_CERT="$work/ca.pem" bash scripts/image.sh --save "$work/image.tar"
mkdir "$work/layers"
tar -xf "$work/image.tar" -C "$work/layers"
found=0
for layer in "$work"/layers/*.tar "$work"/layers/*/layer.tar; do
  [ -f "$layer" ] || continue
  if tar -xOf "$layer" 2>/dev/null | grep -a -q "$planted"; then
    echo "leak check: $planted found in layer $(basename "$(dirname "$layer")")/$(basename "$layer")"
    found=1
  fi
done
grep -a -r -q "$planted" "$work/layers" --exclude='*.tar' && { echo "leak check: found in the image's metadata"; found=1; }
layers=$(find "$work/layers" -name '*.tar' | wc -l)
[ "$found" = 0 ] && echo "leak check: the planted secret is in none of the image's $layers layers nor its metadata"
exit "$found"
