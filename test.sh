#!/usr/bin/env bash
# The test command: vet, then every test (unit and real-mount) under -race.
# Real-mount tests need /dev/fuse and root (or fusermount3); they skip with a
# message otherwise, unless RUBINOFS_REQUIRE_FUSE=1 (CI) makes that a failure.
set -euo pipefail
cd "$(dirname "$0")"
export PATH="/usr/local/go/bin:$PATH"
go vet ./...
go test -race -count=1 -timeout 20m -p 2 ./... "$@"
