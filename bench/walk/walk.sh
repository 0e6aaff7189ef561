#!/bin/sh
# bench/walk/walk.sh [-b BIN] [-c] [-O] [-k] [-H PKG] (as root, from anywhere in the
# repository): the walk of one unlink through the daemon, function by
# function, on the request goroutine. See bench/walk/README.md.
#   -b BIN   use this rubinofs binary (built with -gcflags=all=-N -l, not
#            stripped) instead of building one from the tree
#   -c       cold: the traced rm is the session's first change (its journal
#            log is opened on the way); by default the session removed
#            another file it read first, and the walk is the steady state
#   -O       build as shipped (optimised, inlined): calls the compiler
#            inlined have no entry of their own and are not seen
#   -k       keep the temporary directory (events.json, gdb.log, the build)
#   -H PKG   the FUSE adapter's package (directory), default fusefs
set -eu
BIN= KEEP= HOME_PKG=fusefs COLD= GCFLAGS='all=-N -l'
while getopts b:cOkH: o; do
	case $o in
	b) BIN=$(realpath "$OPTARG") ;;
	c) COLD=1 ;;
	O) GCFLAGS= ;;
	k) KEEP=1 ;;
	H) HOME_PKG=$OPTARG ;;
	*) echo "usage: $0 [-b BIN] [-c] [-O] [-k] [-H PKG]" >&2; exit 2 ;;
	esac
done
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
MODULE=$(sed -n 's/^module //p' "$ROOT/go.mod")
[ "$(id -u)" = 0 ] || { echo "walk: run as root (mount and ptrace)" >&2; exit 2; }
command -v gdb >/dev/null || { echo "walk: needs gdb" >&2; exit 2; }

T=$(mktemp -d "${TMPDIR:-/tmp}/walk.XXXXXX")
DPID= RPID= GPID=
cleanup() {
	set +e
	[ -n "$GPID" ] && kill "$GPID" 2>/dev/null && wait "$GPID"
	# A session still waiting for the go line gets "stop" and removes nothing
	# (a fifo opened read-write never blocks).
	[ -n "$RPID" ] && { exec 3<>"$T/go" && echo stop >&3 && exec 3>&-; }
	if grep -q " $T/mnt " /proc/mounts; then
		timeout 20 "$BIN" unmount "$T/mnt" >/dev/null 2>&1 || umount -l "$T/mnt"
	fi
	# The daemon exits once unmounted; one gdb left stopped or broken is ours
	# to kill (by its pid, from the mount's own answer).
	if [ -n "$DPID" ] && kill -0 "$DPID" 2>/dev/null; then
		n=0
		while [ $n -lt 50 ] && kill -0 "$DPID" 2>/dev/null; do sleep 0.1; n=$((n + 1)); done
		kill -9 "$DPID" 2>/dev/null
	fi
	[ -n "$RPID" ] && wait "$RPID"
	if [ -n "$KEEP" ]; then echo "kept $T" >&2; else rm -rf "$T"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

t0=$(date +%s)
if [ -z "$BIN" ]; then
	BIN=$T/rubinofs
	(cd "$ROOT" && go build -gcflags="$GCFLAGS" -o "$BIN" ./cmd/rubinofs)
fi
t1=$(date +%s)

# The probes: every function of the module (and of package main, the
# command), and go-fuse's opcode handlers as request markers.
go tool nm "$BIN" | awk -v m="$MODULE/" '($2 == "T" || $2 == "t") && (index($3, m) == 1 || index($3, "main.") == 1) { print $1, $3 }' >"$T/funcs"
go tool nm "$BIN" | awk '($2 == "T" || $2 == "t") && $3 ~ /go-fuse\/v2\/fuse\.do[A-Z][A-Za-z]*$/ { print $1, $3 }' >"$T/markers"
[ -s "$T/funcs" ] && [ -s "$T/markers" ] || { echo "walk: no symbols in $BIN (stripped?)" >&2; exit 1; }

mkdir -p "$T/ws" "$T/mnt" "$T/xdg"
echo "the file the walk removes" >"$T/ws/victim"
echo "the file removed before, unless -c" >"$T/ws/warm"
out=$(cd / && XDG_CONFIG_HOME=$T/xdg/config XDG_STATE_HOME=$T/xdg/state \
	"$BIN" mount --daemon --state-dir "$T/state" "$T/ws" "$T/mnt")
# "mounted BACK at MNT (pid N, log PATH)"
DPID=$(echo "$out" | sed -n 's/.*(pid \([0-9]*\),.*/\1/p')
[ -n "$DPID" ] || { echo "walk: no daemon pid in: $out" >&2; exit 1; }

# One session reads the files (so their unlink is allowed), removes the
# warm-up file (unless -c), says so, waits for the probes, removes the
# victim, and tells gdb (SIGUSR1, which gdb keeps from
# the daemon) that the rm returned.
mkfifo "$T/ready" "$T/go"
(cd / && "$BIN" run --session walk --mount "$T/mnt" -- sh -c '
	if cat "$1/mnt/victim" "$1/mnt/warm" >/dev/null && { [ -n "$3" ] || rm "$1/mnt/warm"; }; then
		echo ready >"$1/ready"
	else
		echo fail >"$1/ready"; exit 1
	fi
	read x <"$1/go"
	[ "$x" = go ] || exit 1
	rm "$1/mnt/victim"; echo $? >"$1/rm.status"
	kill -USR1 "$2"' sh "$T" "$DPID" "$COLD" ||
	{ exec 3<>"$T/ready"; echo fail >&3; }) &  # never blocks: unblocks the read below if run failed early
RPID=$!
read x <"$T/ready"
[ "$x" = ready ] || { echo "walk: the session could not read (or remove) its files" >&2; exit 1; }
t2=$(date +%s)

WALK_FUNCS=$T/funcs WALK_MARKERS=$T/markers WALK_GO=$T/go WALK_OUT=$T/events.json \
	timeout 600 gdb -batch -nx -iex 'set auto-load off' -p "$DPID" -x "$HERE/collect.py" >"$T/gdb.log" 2>&1 &
GPID=$!
wait "$GPID" || { echo "walk: gdb failed:" >&2; tail -20 "$T/gdb.log" >&2; GPID=; exit 1; }
GPID=
wait "$RPID" || true
RPID=
t3=$(date +%s)
[ "$(cat "$T/rm.status")" = 0 ] || { echo "walk: rm failed (status $(cat "$T/rm.status"))" >&2; exit 1; }
[ ! -e "$T/ws/victim" ] || { echo "walk: the file is still in the workspace" >&2; exit 1; }

python3 "$HERE/report.py" "$T/events.json" "$HOME_PKG" Unlink
echo "time         build $((t1 - t0)) s, mount and read $((t2 - t1)) s, gdb $((t3 - t2)) s"
