#!/bin/bash
# What rubinofs's shared, uncached mode costs over GlusterFS for a small
# agent-like workload (docs/multihost.md#glusterfs): a shallow git clone
# of this repository, a read of every tracked file, an edit (read, then
# rewrite with one more line, in the shell) of 20 Go files, and `git status`, one session, over one
# client. Targets: a local directory (ext4 here), rubinofs over it
# (defaults), the plain GlusterFS client, and rubinofs over that client
# (shared and uncached by itself; GLUSTER_FLAGS below). Each step is timed; the
# table gives the median of RUNS runs (default 3) in seconds.
#
# Usage (as root, glusterfs-server and glusterfs-client installed):
#   RUNS=3 bench/multihost/gluster_agent.sh
# It makes a one-brick volume with the options docs/multihost.md requires
# in a temporary directory, starts glusterd only when none answers, and
# removes the mounts, the volume and the directory on every exit.
set -euo pipefail
runs=${RUNS:-3}
src=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
host=$(hostname)
vol=rbagent$$
tmp=$(mktemp -d /tmp/rubinofs-gluster-agent-XXXXXX)
bin=$tmp/rubinofs
glusterd_pid=
mounted=()
volume=

cleanup() {
	set +e
	for m in "${mounted[@]}"; do umount "$m" 2>/dev/null || umount -l "$m"; done
	if [ -n "$volume" ]; then
		gluster volume stop "$vol" force --mode=script >/dev/null
		gluster volume delete "$vol" --mode=script >/dev/null
	fi
	[ -n "$glusterd_pid" ] && kill "$glusterd_pid"
	rm -rf "$tmp"
}
trap cleanup EXIT

(cd "$src" && go build -o "$bin" ./cmd/rubinofs)
if ! gluster volume list --mode=script >/dev/null 2>&1; then
	glusterd -p "$tmp/glusterd.pid"
	glusterd_pid=$(cat "$tmp/glusterd.pid")
	for _ in $(seq 100); do gluster volume list --mode=script >/dev/null 2>&1 && break; sleep 0.1; done
fi
mkdir -p "$tmp/brick" "$tmp/client" "$tmp/local"
gluster volume create "$vol" "$host:$tmp/brick" force --mode=script >/dev/null
volume=1
for kv in performance.strict-o-direct=on performance.quick-read=off performance.stat-prefetch=off; do
	gluster volume set "$vol" "${kv%%=*}" "${kv#*=}" --mode=script >/dev/null
done
gluster volume start "$vol" --mode=script >/dev/null
mount -t glusterfs "$host:/$vol" "$tmp/client"
mounted+=("$tmp/client")
git clone -q --bare "$src" "$tmp/origin.git"

# The workload, in directory $1; prints the seconds of each step.
cat >"$tmp/agent.sh" <<EOF
set -e
cd "\$1"
t0=\$(date +%s.%N)
git clone -q --depth 1 file://$tmp/origin.git repo
cd repo
t1=\$(date +%s.%N)
git ls-files -z | xargs -0 cat >/dev/null
t2=\$(date +%s.%N)
for f in \$(git ls-files '*.go' | head -20); do
	s=\$(<"\$f")
	printf '%s\n// edited\n' "\$s" >"\$f"
done
t3=\$(date +%s.%N)
git status --short >/dev/null
t4=\$(date +%s.%N)
echo "\$t0 \$t1 \$t2 \$t3 \$t4" | awk '{printf "%.2f %.2f %.2f %.2f %.2f\n", \$2-\$1, \$3-\$2, \$4-\$3, \$5-\$4, \$5-\$1}'
EOF

# rubinofs_over BACK MNT [FLAGS...]: a rubinofs mount with its defaults
# and FLAGS.
rubinofs_over() {
	mkdir -p "$1" "$2"
	"$bin" mount --daemon --state-dir "$2.state" "${@:3}" "$1" "$2" >/dev/null
	mounted=("$2" "${mounted[@]}")
}
mkdir -p "$tmp/client/plain" "$tmp/local/plain"
rubinofs_over "$tmp/local/ws" "$tmp/mnt-local"
# GLUSTER_FLAGS: extra flags of the mount over GlusterFS (none: the
# defaults, the poller; --watch=off: none). Shared and uncached either way.
# shellcheck disable=SC2086
rubinofs_over "$tmp/client/ws" "$tmp/mnt-gluster" ${GLUSTER_FLAGS:-}
echo "rubinofs over GlusterFS: $(tr -d ' \n' <"$tmp/mnt-gluster/.rubino/status" | grep -o '"shared":"[a-z]*"\|"uncached":[a-z]*' | tr '\n' ' ')"

# target NAME DIR [MOUNT]: RUNS runs of the workload in a fresh DIR/wN,
# under a session of MOUNT when given; prints the medians.
target() {
	local name=$1 dir=$2 mnt=${3:-} out=$tmp/times
	: >"$out"
	for i in $(seq "$runs"); do
		mkdir "$dir/w$i"
		if [ -n "$mnt" ]; then
			"$bin" run --mount "$mnt" -- bash "$tmp/agent.sh" "$dir/w$i" >>"$out"
		else
			bash "$tmp/agent.sh" "$dir/w$i" >>"$out"
		fi
	done
	local med=()
	for c in 1 2 3 4 5; do
		med+=("$(cut -d' ' -f$c "$out" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')")
	done
	echo "| $name | ${med[*]} | $(cut -d' ' -f5 "$out" | tr '\n' ' ')|"
}
echo "medians of $runs runs, seconds; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| target | clone read edit status total | totals |"
echo "|---|---|---|"
target "local directory" "$tmp/local/plain"
target "rubinofs over it" "$tmp/mnt-local" "$tmp/mnt-local"
target "GlusterFS client" "$tmp/client/plain"
target "rubinofs over the GlusterFS client (${GLUSTER_FLAGS:-defaults})" "$tmp/mnt-gluster" "$tmp/mnt-gluster"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
