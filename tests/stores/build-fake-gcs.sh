#!/usr/bin/env bash
# Builds fake-gcs-server (a GCS-compatible server for the store tests) from its Go module into a
# cache outside the clone, once per pinned version:
#   ${XDG_CACHE_HOME:-$HOME/.cache}/etcd-supervisor/fake-gcs-server/<version>/fake-gcs-server
# Prints the path of the binary.
set -euo pipefail
version=v1.56.1
exec "$(dirname "$0")/../envtest/go-install-cached.sh" fake-gcs-server github.com/fsouza/fake-gcs-server "$version"
