#!/bin/bash
# The journal-bounds benchmark (docs/BENCHMARKS.md#journal-bounds): a
# journal of N changes (bench/journal/bounds) served by a mount; reads its
# changes K at once, then checkpoints, and prints the time and the
# daemon's peak RSS (VmHWM). Root, /dev/fuse. Run from the tree to measure:
#   bench/journal/bounds.sh [N] [K]
set -euo pipefail
N=${1:-200000}; K=${2:-3}
D=$(mktemp -d /tmp/journal-bounds.XXXXXX)
BIN=$D/rubinofs
go build -o "$BIN" ./cmd/rubinofs
go run ./bench/journal/bounds -n "$N" -ws "$D/ws" -state "$D/state"
git -C "$D/ws" init -q
mkdir -p "$D/mnt"
out=$("$BIN" mount --daemon --state-dir "$D/state" "$D/ws" "$D/mnt")
PID=$(echo "$out" | grep -o '(pid [0-9]*' | grep -o '[0-9]*')
trap '"$BIN" unmount "$D/mnt" >/dev/null 2>&1 || umount -l "$D/mnt"; rm -rf "$D"' EXIT
echo "log: $(stat -c %s "$D/state/journal/sessions/big.jsonl") bytes; daemon $PID: $(grep VmHWM /proc/$PID/status)"
s=$(date +%s.%N)
for i in $(seq "$K"); do (wc -l < "$D/mnt/.rubino/sessions/big/changes" > "$D/changes.$i") & done
wait
e=$(date +%s.%N)
echo "changes x$K: $(cat "$D"/changes.* | tr '\n' ' ')lines, $(echo "$e - $s" | bc) s; $(grep VmHWM /proc/$PID/status)"
s=$(date +%s.%N)
"$BIN" checkpoints --mount "$D/mnt" --session big | tail -1
e=$(date +%s.%N)
echo "checkpoints: $(echo "$e - $s" | bc) s; $(grep VmHWM /proc/$PID/status)"
