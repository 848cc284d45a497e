#!/usr/bin/env bash
# Installs Azurite (Microsoft's Azure Storage emulator, the Azure Blob server of the store tests)
# from the npm registry into a cache outside the clone, once per pinned version:
#   ${XDG_CACHE_HOME:-$HOME/.cache}/etcd-supervisor/azurite/<version>/node_modules/.bin/azurite-blob
# Prints the path of the executable.
set -euo pipefail
version=3.37.0
out="${XDG_CACHE_HOME:-$HOME/.cache}/etcd-supervisor/azurite/$version"
bin="$out/node_modules/.bin/azurite-blob"
if [ ! -x "$bin" ]; then
  echo "installing azurite $version into $out (once; about half a minute)" >&2
  # Into a temporary prefix first: a concurrent caller never runs a half-installed package.
  mkdir -p "$(dirname "$out")"
  tmp=$(mktemp -d "$out.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  npm install --prefix "$tmp" --no-audit --no-fund --loglevel=error "azurite@$version" >&2
  rm -rf "$out" && mv "$tmp" "$out"
fi
echo "$bin"
