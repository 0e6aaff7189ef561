#!/usr/bin/env bash
# The test command: vet, then every test (unit and real-mount) under -race.
# Real-mount tests need /dev/fuse and root (or fusermount3); they skip with a
# message otherwise, unless RUBINOFS_REQUIRE_FUSE=1 (CI) makes that a failure.
#
# The real-mount package (./tests) runs one test at a time and mostly waits
# on mounts, processes and the kernel, so it runs as RUBINOFS_TEST_SHARDS
# processes (default 2) side by side, each with its own share of the tests
# (-run), beside the unit packages. The tests are made for that: each process
# works in a directory of its own and judges only its own mounts and
# processes (tests/main_test.go). Arguments (./test.sh -run X, -v, ...) or
# RUBINOFS_TEST_SHARDS=1 run everything as one plain `go test`.
set -euo pipefail
cd "$(dirname "$0")"
export PATH="/usr/local/go/bin:$PATH"
go vet ./...
flags=(-race -count=1 -timeout 20m)
shards=${RUBINOFS_TEST_SHARDS:-2}
case "$shards" in '' | *[!0-9]* | 0) echo "RUBINOFS_TEST_SHARDS=$shards: want a number of processes, 1 or more" >&2; exit 2 ;; esac
if [ "$#" -gt 0 ] || [ "$shards" = 1 ]; then
  exec go test "${flags[@]}" -p 2 ./... "$@"
fi

# The seconds the longer real-mount tests take under -race on 2 cores; any
# other counts as 2. Only the balance of the shards depends on these: a
# stale or missing entry makes one shard finish later, never a test skip.
weights='
TestTortureStressNG 65
TestJournalRewindPathAfterFsstress 23
TestJournalRewindAfterFsstress 22
TestPosix 19
TestLinksOpenByAnotherNameNeverENOENT 16
TestJournalDeepTreeLinear 15
TestWatchOwnStress 12
TestOwnRecordsBoundedThroughMount 11
TestCLIStoppedDaemon 10
TestGlusterCrossHost 10
TestStressInodeReuse 10
TestPosixCompare 30
TestStress 9
TestUmaskModesMatchNative 8
TestRealRepository 8
TestBranchLsDiscard 8
TestCompactTranscriptLimits 8
TestDoneAfterDevFuseClosed 7
TestMultiMountCounterPoll 7
TestMultiMountPeerDefault 7
TestMultiMountCounterThree 7
TestMultiMountPeerNoWatch 7
TestOwnFileByPathWhileCreatingHandleOpen 7
TestFsstress 6
TestMultiMountCounterInotify 6
TestMultiMountCounterNoWatch 6
TestPassthroughMixedWriters 6
TestToolTreesPipVenv 5
TestTortureFio 5
'

logs=$(mktemp -d "${TMPDIR:-/tmp}/rubinofs-test-logs.XXXXXX")
trap 'rm -rf "$logs"' EXIT

# The real-mount tests, as go test lists them (this also builds the package).
if ! go test "${flags[@]}" -list . ./tests/ >"$logs/list" 2>&1; then
  cat "$logs/list"; exit 1
fi
# Longest first, each to the shard with the least so far: shard i's names,
# one line each, into $logs/shard.i.
grep -E '^Test[A-Za-z0-9_]*$' "$logs/list" |
  awk -v w="$weights" 'BEGIN { n = split(w, l, "\n"); for (i = 1; i <= n; i++) { split(l[i], f, " "); if (f[1] != "") sec[f[1]] = f[2] } }
    { print (($0 in sec) ? sec[$0] : 2), $0 }' |
  sort -k1,1nr -k2,2 |
  awk -v n="$shards" -v dir="$logs" '{ best = 0; for (i = 1; i < n; i++) if (load[i] < load[best]) best = i
    load[best] += $1; print $2 > (dir "/shard." best) }'

pids=() names=()
go test "${flags[@]}" -p 2 $(go list ./... | grep -v '/tests$') >"$logs/out.unit" 2>&1 &
pids+=($!) names+=(unit)
for ((i = 0; i < shards; i++)); do
  [ -s "$logs/shard.$i" ] || continue
  go test "${flags[@]}" -run "^($(paste -sd'|' "$logs/shard.$i"))\$" ./tests/ >"$logs/out.$i" 2>&1 &
  pids+=($!) names+=("$i")
done
echo "test.sh: unit packages and $((${#pids[@]} - 1)) shards of ./tests running; each one's output follows when it ends"
status=0
for k in "${!pids[@]}"; do
  wait "${pids[$k]}" || status=1
  cat "$logs/out.${names[$k]}"
done
exit $status
