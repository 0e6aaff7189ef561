#!/bin/sh
# bench/journal/ops.sh BIN LABEL [MOUNT FLAGS...] (as root, TMPDIR set): in one
# session through a fresh mount of BIN, cp -r GOROOT/src/net twice into it,
# checkpoint, read the first copy, sed -i every file of the second (a rename
# over each), rm -rf the first; print per FUSE op "count/mean latency" from
# .rubino/metrics (docs/BENCHMARKS.md, "Journal cost"). For example:
#   bench/journal/ops.sh ./rubinofs write --journal-sync=write
#   bench/journal/ops.sh ./rubinofs off --journal=false
set -e
BIN=$1; LABEL=$2; shift 2
T=$(mktemp -d "$TMPDIR/perop.XXXXXX")
mkdir -p "$T/ws" "$T/mnt"
SRC="$(go env GOROOT)/src/net"
$BIN mount --daemon --state-dir "$T/state" "$@" "$T/ws" "$T/mnt" >/dev/null
$BIN run --session s --mount "$T/mnt" -- sh -c "cd '$T/mnt' && cp -r '$SRC' tree && cp -r '$SRC' tree2 && $BIN checkpoint >/dev/null 2>&1; cat \$(find tree -type f) >/dev/null; find tree2 -type f | while read f; do sed -i 's/^package /package /' \$f; done; rm -rf tree" 
cat "$T/mnt/.rubino/metrics" > "$T/metrics"
$BIN unmount "$T/mnt" >/dev/null 2>&1 || fusermount3 -u "$T/mnt"
awk -v L="$LABEL" '
/^rubinofs_fuse_op_duration_seconds_sum/ { match($0,/op="[a-z]+"/); op=substr($0,RSTART+4,RLENGTH-5); s[op]=$2 }
/^rubinofs_fuse_op_duration_seconds_count/ { match($0,/op="[a-z]+"/); op=substr($0,RSTART+4,RLENGTH-5); c[op]=$2 }
END { printf "%-14s", L; n=split("create mkdir unlink rename rmdir",ops," "); for (i=1;i<=n;i++) { o=ops[i]; if (c[o]>0) printf " %s=%d/%.0fus", o, c[o], s[o]/c[o]*1e6 } ; printf "\n" }' "$T/metrics"
rm -rf "$T"
