#!/bin/bash
# The deep-tree half of the journal-bounds benchmark
# (docs/BENCHMARKS.md#journal-bounds): in a session on a fresh mount, a
# python3 loop makes LEVELS nested directories of 200-byte names
# (os.mkdir(NAME); os.chdir(NAME); bash's cd, once the path passes
# PATH_MAX, finds its directory by reading every directory above it, which
# makes the loop cubic in the depth natively and through the mount), then
# prints the session log's size and the daemon's peak RSS
# (VmHWM), and times `rubinofs checkpoints` and a read of the changes
# file. Root, /dev/fuse. Run from the tree to measure:
#   bench/journal/deep.sh [LEVELS]
set -euo pipefail
LEVELS=${1:-1000}
D=$(mktemp -d /tmp/journal-deep.XXXXXX)
BIN=$D/rubinofs
go build -o "$BIN" ./cmd/rubinofs
mkdir -p "$D/ws" "$D/mnt" && git -C "$D/ws" init -q
out=$("$BIN" mount --daemon --state-dir "$D/state" "$D/ws" "$D/mnt")
PID=$(echo "$out" | grep -o '(pid [0-9]*' | grep -o '[0-9]*')
trap 'cd /; "$BIN" unmount "$D/mnt" >/dev/null 2>&1 || umount -l "$D/mnt"; rm -rf "$D"' EXIT
s=$(date +%s.%N)
(cd "$D/mnt" && "$BIN" run --session deep -- python3 -c '
import os, sys
n = "d" * 196
for i in range(1000, 1000 + int(sys.argv[1])):
    os.mkdir(f"{i}{n}"); os.chdir(f"{i}{n}")' "$LEVELS")
e=$(date +%s.%N)
L=$(stat -c %s "$D/state/journal/sessions/deep.jsonl")
echo "$LEVELS levels: $(echo "$e - $s" | bc) s; log $L bytes, $((L / LEVELS)) per level; $(grep VmHWM /proc/$PID/status)"
s=$(date +%s.%N); "$BIN" checkpoints --mount "$D/mnt" --session deep | tail -1; e=$(date +%s.%N)
echo "checkpoints: $(echo "$e - $s" | bc) s; $(grep VmHWM /proc/$PID/status)"
s=$(date +%s.%N); wc -c < "$D/mnt/.rubino/sessions/deep/changes"; e=$(date +%s.%N)
echo "changes: $(echo "$e - $s" | bc) s; $(grep VmHWM /proc/$PID/status)"
