package tests

// The load test: worker processes run mixed operations
// through one real mount for a bounded number of steps, under -race (the
// daemon runs in this test process, package daemon), while a `git
// status`-like scanner walks and stats the tree. Afterwards the backing
// directory, and the mount's view of it, must equal the replay of the
// workers' logs of acknowledged operations, and the daemon must hold no
// descriptor into the workspace that it did not hold before the run.
//
// Every worker is a process of its own (this test binary re-executed with
// -test.run=^TestStressWorker$), so each is a separate caller pid for the
// FUSE daemon and, except worker 0 (the default session), a guard session
// of its own. Workers own their names: a worker mutates only its directory
// wN/ and the names shared/wN-* it moves into the shared directory, so the
// final state is a pure function of each worker's acknowledged operations
// and the logs can be replayed in any interleaving. In the shared
// directory workers contend: they list it, even workers read the others'
// files, odd workers try blind mutations of them that the guard must
// refuse (EACCES, the file intact).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"
)

// stressEnv carries a worker's stressSpec (JSON) to the re-executed test
// binary; TestStressWorker does nothing without it.
const stressEnv = "RUBINOFS_STRESS_WORKER"

// stressSpec is one worker process's parameters.
type stressSpec struct {
	Role    string // "worker" or "scanner"
	ID      int
	Mount   string // absolute mountpoint
	Log     string // the log of acknowledged operations, outside the mount
	Ops     int    // operations to run
	Seed    uint64
	Seeds   int  // seed files wN/seedK present before the mount
	Session bool // register a guard session of its own (else: default)
	// ReadOthers reads the other workers' files in shared/ (registers
	// reads of them); Probe tries blind mutations of them instead, which
	// must be refused: a worker never does both, so its session never read
	// what it probes.
	ReadOthers, Probe bool
}

// stressRecord is one line of a worker's log: an acknowledged operation
// (the syscalls returned success), or "denied" (an expected refusal), or
// "done" (the last line of a worker that finished). Paths are
// workspace-relative. Hash is the xxh3 of the file's whole content after
// the operation as the worker expects it, so the replay is checked
// against the worker's own model step by step.
type stressRecord struct {
	Op   string `json:"op"` // mkdir rmdir create overwrite append pwrite truncate rename unlink denied done
	Path string `json:"path,omitempty"`
	To   string `json:"to,omitempty"`
	Off  int64  `json:"off,omitempty"`
	Size int64  `json:"size,omitempty"`
	Data []byte `json:"data,omitempty"`
	Hash string `json:"xxh3,omitempty"`
	N    int    `json:"n,omitempty"` // done: operations run; scanner: rounds
}

func stressHash(b []byte) string { return fmt.Sprintf("%016x", xxh3.Hash(b)) }

// stressSeed is the content of seed file k of worker i.
func stressSeed(i, k int) string {
	return strings.Repeat(fmt.Sprintf("seed %d of w%d\n", k, i), 1+k*7)
}

// stressCommon is shared/common: a file nobody owns, read by the readers
// and probed by the probers.
const stressCommon = "common to every worker\n"

// syncBuffer is a bytes.Buffer safe for a process's output copier and a
// reader at the same time.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// stressProc is one started worker or scanner process.
type stressProc struct {
	spec stressSpec
	cmd  *exec.Cmd
	out  *syncBuffer
	err  error // of Wait, valid once done is closed
	done chan struct{}
}

// TestStress is the load test. It asserts: no worker met an unexpected
// errno (every EACCES it met was an expected refusal of a blind mutation);
// every read of a worker's own file, listing of its own directories and
// stat of its files matched its model while the others ran; no data race
// and no deadlock (a generous deadline dumps every goroutine and fails);
// the backing directory and the mount's view equal the replay of the logs
// exactly (names, types, sizes, contents, nothing extra); the guard
// counted exactly the refusals the workers expected; and the daemon holds
// the same descriptors into the workspace, the mountpoint and /dev/fuse
// after the run as before it (and, by newMount, none after unmounting).
func TestStress(t *testing.T) {
	const (
		workers = 6
		seeds   = 4
	)
	ops := 300
	if testing.Short() {
		ops = 80
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("RUBINOFS_STRESS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("RUBINOFS_STRESS_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("seed %d (RUBINOFS_STRESS_SEED=%d repeats each worker's choices; the interleaving differs)", seed, seed)

	files := map[string]string{"shared/common": stressCommon}
	for i := 0; i < workers; i++ {
		for k := 0; k < seeds; k++ {
			files[fmt.Sprintf("w%d/seed%d", i, k)] = stressSeed(i, k)
		}
	}
	m := newMount(t, files, nil)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	logDir := filepath.Join(m.tmp, "logs")
	if err := os.Mkdir(logDir, 0o755); err != nil {
		t.Fatal(err)
	}

	// The daemon's descriptors into the workspace, the mountpoint and
	// /dev/fuse once mounted and idle: the /dev/fuse descriptor(s) of the
	// mount itself, and nothing in the workspace (the loopback keeps no
	// descriptor per inode, only per open file or directory handle).
	baseline := daemonFds(t, m.ws, m.mnt)

	start := func(s stressSpec) *stressProc {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		p := &stressProc{spec: s, out: &syncBuffer{}, done: make(chan struct{})}
		p.cmd = exec.Command(exe, "-test.run=^TestStressWorker$", "-test.count=1", "-test.timeout=10m")
		// The working directory stays outside the mount: a child of this
		// daemon must not chdir into it (golang/go#11155).
		p.cmd.Dir = m.tmp
		p.cmd.Env = append(os.Environ(), stressEnv+"="+string(b), stressBackingEnv+"="+m.ws)
		p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
		return p
	}
	var procs []*stressProc
	for i := 0; i < workers; i++ {
		procs = append(procs, start(stressSpec{
			Role: "worker", ID: i, Mount: m.mnt, Log: filepath.Join(logDir, fmt.Sprintf("w%d.jsonl", i)),
			Ops: ops, Seed: seed, Seeds: seeds, Session: i != 0, ReadOthers: i%2 == 0, Probe: i%2 == 1,
		}))
	}
	scanner := start(stressSpec{Role: "scanner", ID: workers, Mount: m.mnt, Log: filepath.Join(logDir, "scanner.jsonl")})
	scannerStop, err := scanner.cmd.StdinPipe() // EOF tells the scanner to stop
	if err != nil {
		t.Fatal(err)
	}
	procs = append(procs, scanner)

	began := time.Now()
	for _, p := range procs {
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func(p *stressProc) {
			p.err = p.cmd.Wait()
			close(p.done)
		}(p)
	}
	// Whatever happens below, no process outlives the test.
	t.Cleanup(func() {
		for _, p := range procs {
			select {
			case <-p.done:
			default:
				p.cmd.Process.Kill()
				<-p.done
			}
		}
	})

	// The deadline is a deadlock detector, not a timed assertion: the run
	// takes seconds; only a hang reaches it.
	const deadline = 4 * time.Minute
	timeout := time.NewTimer(deadline)
	defer timeout.Stop()
	wait := func(p *stressProc) {
		select {
		case <-p.done:
		case <-timeout.C:
			stressDeadlock(t, m, procs, deadline)
		}
	}
	for _, p := range procs[:workers] {
		wait(p)
	}
	workersDone := time.Since(began)
	scannerStop.Close()
	wait(scanner)
	failed := false
	for _, p := range procs {
		if p.err != nil {
			failed = true
			t.Errorf("%s %d: %v\n%s\nlast acknowledged operations:\n%s", p.spec.Role, p.spec.ID, p.err, p.out, stressTail(p.spec.Log, 12))
		}
	}
	if failed {
		t.Errorf("changes the watcher applied as external (not the daemon's own):\n%s", m.externalEvents())
		t.FailNow()
	}

	// Replay the logs into the model.
	model := newStressModel(t)
	for p, c := range files {
		model.dirs[path.Dir(p)] = true
		model.files[p] = []byte(c)
	}
	expectedDenials, totalOps := 0, 0
	for _, p := range procs[:workers] {
		n, denials := model.replay(p.spec.Log)
		expectedDenials += denials
		totalOps += n
	}
	scanRounds := 0
	for _, r := range readStressLog(t, scanner.spec.Log) {
		if r.Op == "done" {
			scanRounds = r.N
		}
	}
	if scanRounds == 0 {
		t.Errorf("the scanner finished no round while the workers ran")
	}

	// The backing directory, then the mount's view, equal the model.
	model.verify("backing", m.ws, "")
	model.verify("mount", m.mnt, ".rubino")

	counts := m.d.Guard.Counts()
	if counts.Denials != uint64(expectedDenials) {
		t.Errorf("the guard refused %d mutations; the workers expected %d refusals (any other refusal would have failed a worker): %v\n%s",
			counts.Denials, expectedDenials, m.denials(), stressDenialDiff(t, m, procs[:workers]))
	}

	// Descriptors: once every process has exited the kernel releases
	// their handles, RELEASE and RELEASEDIR reach the daemon
	// asynchronously, and its descriptors must come back to the baseline
	// exactly: one missing is a closed /dev/fuse, one extra a leaked file
	// or directory handle. Polled with a deadline, not slept.
	var now map[string]string
	for i := 0; ; i++ {
		now = daemonFds(t, m.ws, m.mnt)
		if len(diffFds(baseline, now)) == 0 && len(diffFds(now, baseline)) == 0 {
			break
		}
		if i == 2000 {
			t.Fatalf("daemon descriptors after the run: leaked %v, lost %v (baseline %v)",
				diffFds(baseline, now), diffFds(now, baseline), baseline)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, bounded above
	}

	var ws any = "off"
	if m.d.Watcher != nil {
		ws = m.d.Watcher.Stats()
	}
	t.Logf("%d workers x %d operations (%d logged, %d expected refusals) in %v, %d scanner rounds; daemon descriptors %d before and after; guard %+v; watcher %+v",
		workers, ops, totalOps, expectedDenials, workersDone.Round(time.Millisecond), scanRounds, len(baseline), counts, ws)
}

// stressDenialDiff lists the (session, path) pairs the guard refused a
// different number of times than the workers logged "denied".
func stressDenialDiff(t *testing.T, m *mount, workers []*stressProc) string {
	count := map[string]int{}
	for _, p := range workers {
		sess := "default"
		if p.spec.Session {
			sess = fmt.Sprintf("stress-w%d", p.spec.ID)
		}
		for _, r := range readStressLog(t, p.spec.Log) {
			if r.Op == "denied" {
				count[sess+" "+r.Path]--
			}
		}
	}
	ops := map[string][]string{}
	for _, d := range m.denials() {
		k := fmt.Sprintf("%v %v", d["session"], d["path"])
		count[k]++
		ops[k] = append(ops[k], fmt.Sprintf("%v@%v", d["op"], d["time"]))
	}
	var sb strings.Builder
	for _, k := range sorted(count, func(string) bool { return true }) {
		if count[k] != 0 {
			fmt.Fprintf(&sb, "  %s: guard minus logged = %d; guard ops %v\n", k, count[k], ops[k])
		}
	}
	return sb.String()
}

// stressTail renders the last n records of a log, contents as lengths.
func stressTail(name string, n int) string {
	b, _ := os.ReadFile(name)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	var out strings.Builder
	for _, l := range lines {
		var r stressRecord
		if json.Unmarshal([]byte(l), &r) != nil {
			continue
		}
		fmt.Fprintf(&out, "  %s %s", r.Op, r.Path)
		if r.To != "" {
			fmt.Fprintf(&out, " -> %s", r.To)
		}
		if r.Data != nil || r.Op == "truncate" || r.Op == "pwrite" {
			fmt.Fprintf(&out, " (off %d, %d bytes, size %d)", r.Off, len(r.Data), r.Size)
		}
		out.WriteString("\n")
	}
	return out.String()
}

// externalEvents renders the watcher batches the mount applied (changes it
// took as external), for a failure report.
func (m *mount) externalEvents() string {
	var out strings.Builder
	for i, evs := range m.mt.Applied() {
		if evs == nil {
			fmt.Fprintf(&out, "  batch %d: everything (overflow)\n", i)
		}
		for _, ev := range evs {
			fmt.Fprintf(&out, "  batch %d: %s %v\n", i, ev.Path, ev.Op)
		}
	}
	return out.String()
}

// stressDeadlock reports a hang: every goroutine of this process (the
// daemon and the test), the kernel stacks of the workers' threads (where
// they wait in the FUSE client), and the workers' own goroutine dumps
// (SIGQUIT); then it aborts the FUSE connection, so nothing stays blocked
// on the mount, and fails the test.
func stressDeadlock(t *testing.T, m *mount, procs []*stressProc, d time.Duration) {
	var b strings.Builder
	fmt.Fprintf(&b, "no progress after %v: deadlock?\n\n=== goroutines of the daemon and the test\n", d)
	pprof.Lookup("goroutine").WriteTo(&b, 2)
	for _, p := range procs {
		select {
		case <-p.done:
			continue
		default:
		}
		pid := p.cmd.Process.Pid
		fmt.Fprintf(&b, "\n=== %s %d (pid %d), kernel stacks\n", p.spec.Role, p.spec.ID, pid)
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		for _, task := range tasks {
			st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stack", pid, task.Name()))
			fmt.Fprintf(&b, "-- tid %s\n%s", task.Name(), st)
		}
		p.cmd.Process.Signal(syscall.SIGQUIT)
	}
	// The mount's connection is /sys/fs/fuse/connections/<minor of its
	// device> (fusectl; best effort: it may not be mounted).
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(mi), "\n") {
			f := strings.Fields(line)
			if len(f) > 4 && f[4] == m.mnt {
				if _, minor, ok := strings.Cut(f[2], ":"); ok {
					err := os.WriteFile("/sys/fs/fuse/connections/"+minor+"/abort", []byte("1\n"), 0o200)
					fmt.Fprintf(&b, "\n=== aborting FUSE connection %s: %v\n", minor, err)
				}
			}
		}
	}
	for _, p := range procs {
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Kill()
		}
		select {
		case <-p.done:
			fmt.Fprintf(&b, "\n=== output of %s %d\n%s", p.spec.Role, p.spec.ID, p.out)
		case <-time.After(10 * time.Second):
			fmt.Fprintf(&b, "\n=== %s %d does not exit\n", p.spec.Role, p.spec.ID)
		}
	}
	t.Fatal(b.String())
}

// stressModel is the expected workspace: directories and file contents by
// workspace-relative path ("." is the root).
type stressModel struct {
	t     *testing.T
	dirs  map[string]bool
	files map[string][]byte
}

func newStressModel(t *testing.T) *stressModel {
	return &stressModel{t: t, dirs: map[string]bool{".": true}, files: map[string][]byte{}}
}

func readStressLog(t *testing.T, name string) []stressRecord {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []stressRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		var r stressRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %q: %v", name, sc.Text(), err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

// replay applies one worker's log and returns the operations it ran and
// the refusals it expected. Every record must make sense against the
// model (a create of a new name, a rename of an existing one, ...) and
// leave the content the worker expected.
func (m *stressModel) replay(log string) (ops, denials int) {
	t := m.t
	t.Helper()
	recs := readStressLog(t, log)
	if len(recs) == 0 || recs[len(recs)-1].Op != "done" {
		t.Fatalf("%s: the log does not end with done", log)
	}
	bad := func(r stressRecord, why string) {
		t.Fatalf("%s: %+v: %s", log, r, why)
	}
	for _, r := range recs {
		content, isFile := m.files[r.Path]
		switch r.Op {
		case "done":
			ops = r.N
			continue
		case "denied":
			denials++
			continue
		case "mkdir":
			if m.dirs[r.Path] || isFile || !m.dirs[path.Dir(r.Path)] {
				bad(r, "mkdir of an existing name or in a missing directory")
			}
			m.dirs[r.Path] = true
			continue
		case "rmdir":
			if !m.dirs[r.Path] || len(m.under(r.Path)) > 0 {
				bad(r, "rmdir of a missing or non-empty directory")
			}
			delete(m.dirs, r.Path)
			continue
		case "rename":
			if m.dirs[r.Path] {
				if m.dirs[r.To] || m.files[r.To] != nil || !m.dirs[path.Dir(r.To)] {
					bad(r, "directory rename onto an existing name")
				}
				for _, p := range m.under(r.Path) {
					np := r.To + strings.TrimPrefix(p, r.Path)
					if m.dirs[p] {
						delete(m.dirs, p)
						m.dirs[np] = true
					} else {
						m.files[np] = m.files[p]
						delete(m.files, p)
					}
				}
				delete(m.dirs, r.Path)
				m.dirs[r.To] = true
				continue
			}
			if !isFile || m.dirs[r.To] || !m.dirs[path.Dir(r.To)] {
				bad(r, "rename of a missing file or onto a directory")
			}
			delete(m.files, r.Path)
			m.files[r.To] = content
			if r.Hash != "" && stressHash(content) != r.Hash {
				bad(r, "content differs from the worker's")
			}
			continue
		case "create":
			if isFile || m.dirs[r.Path] || !m.dirs[path.Dir(r.Path)] {
				bad(r, "create of an existing name or in a missing directory")
			}
			content = append([]byte(nil), r.Data...)
		case "overwrite":
			if !isFile {
				bad(r, "overwrite of a missing file")
			}
			content = append([]byte(nil), r.Data...)
		case "append":
			if !isFile {
				bad(r, "append to a missing file")
			}
			content = append(content, r.Data...)
		case "pwrite":
			if !isFile {
				bad(r, "write to a missing file")
			}
			// An empty write changes nothing, not even past the end
			// (pwrite(2) of 0 bytes; Go's WriteAt makes no call at all).
			if len(r.Data) == 0 {
				break
			}
			if end := r.Off + int64(len(r.Data)); end > int64(len(content)) {
				content = append(content, make([]byte, end-int64(len(content)))...)
			}
			copy(content[r.Off:], r.Data)
		case "truncate":
			if !isFile {
				bad(r, "truncate of a missing file")
			}
			if r.Size <= int64(len(content)) {
				content = content[:r.Size]
			} else {
				content = append(content, make([]byte, r.Size-int64(len(content)))...)
			}
		case "unlink":
			if !isFile {
				bad(r, "unlink of a missing file")
			}
			delete(m.files, r.Path)
			continue
		default:
			bad(r, "unknown op")
		}
		m.files[r.Path] = content
		if stressHash(content) != r.Hash {
			bad(r, fmt.Sprintf("replayed content (%d bytes) differs from the worker's", len(content)))
		}
	}
	return ops, denials
}

// under lists the model's paths strictly below dir.
func (m *stressModel) under(dir string) []string {
	var out []string
	for p := range m.dirs {
		if strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	for p := range m.files {
		if strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	return out
}

// verify walks root and compares it with the model: every directory and
// regular file present, nothing else, contents byte for byte. skip is a
// top-level name left out (the control tree, in the mount's view).
func (m *stressModel) verify(view, root, skip string) {
	t := m.t
	t.Helper()
	seenDirs, seenFiles := map[string]bool{}, map[string]bool{}
	var problems []string
	err := filepath.WalkDir(root, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == skip {
			return iofs.SkipDir
		}
		switch {
		case d.IsDir():
			seenDirs[rel] = true
			if !m.dirs[rel] {
				problems = append(problems, "unexpected directory "+rel)
			}
		case d.Type().IsRegular():
			seenFiles[rel] = true
			want, ok := m.files[rel]
			if !ok {
				problems = append(problems, "unexpected file "+rel)
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			got, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if info.Size() != int64(len(want)) || !bytes.Equal(got, want) {
				problems = append(problems, fmt.Sprintf("%s: size %d, content %s (%d bytes), want %s (%d bytes)",
					rel, info.Size(), stressHash(got), len(got), stressHash(want), len(want)))
			}
		default:
			problems = append(problems, fmt.Sprintf("unexpected %v %s", d.Type(), rel))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s view: %v", view, err)
	}
	for p := range m.dirs {
		if !seenDirs[p] {
			problems = append(problems, "missing directory "+p)
		}
	}
	for p := range m.files {
		if !seenFiles[p] {
			problems = append(problems, "missing file "+p)
		}
	}
	sort.Strings(problems)
	if len(problems) > 0 {
		t.Fatalf("%s view differs from the replayed logs (%d files, %d directories):\n%s",
			view, len(m.files), len(m.dirs), strings.Join(problems, "\n"))
	}
}

// TestStressWorker is the body of one TestStress (or TestStressInodeReuse)
// worker process; run directly (no RUBINOFS_STRESS_WORKER) it does
// nothing. A worker that succeeds exits 0 at once: TestMain's check for
// leftover mounts belongs to the parent run (in a worker it would count
// a mount of a concurrently tested package and fail the worker).
func TestStressWorker(t *testing.T) {
	raw := os.Getenv(stressEnv)
	if raw == "" {
		return
	}
	var s stressSpec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatalf("%s: %v", stressEnv, err)
	}
	stressWork(t, s)
	if !t.Failed() {
		os.Exit(0)
	}
}

// stressWork runs one worker process's role and writes its log.
func stressWork(t *testing.T, s stressSpec) {
	lf, err := os.Create(s.Log)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	bw := bufio.NewWriter(lf)
	defer bw.Flush()
	enc := json.NewEncoder(bw)
	switch s.Role {
	case "reuse":
		stressReuse(t, s)
		return
	case "scanner":
		rounds := stressScan(t, s)
		enc.Encode(stressRecord{Op: "done", N: rounds})
		return
	}
	w := &stressWorker{
		t: t, s: s, rnd: rand.New(rand.NewPCG(s.Seed, uint64(s.ID))), enc: enc,
		files: map[string][]byte{}, fresh: map[string]bool{}, dirs: map[string]bool{},
		own: fmt.Sprintf("w%d", s.ID), prefix: fmt.Sprintf("shared/w%d-", s.ID),
	}
	for k := 0; k < s.Seeds; k++ {
		w.files[fmt.Sprintf("%s/seed%d", w.own, k)] = []byte(stressSeed(s.ID, k))
	}
	w.session = "default"
	if s.Session {
		w.session = w.register()
	}
	w.run()
	enc.Encode(stressRecord{Op: "done", N: s.Ops})
}

// stressScan is the `git status`-like reader: until its stdin closes it
// walks the mount, lstats every entry and reads .rubino/status, tolerating
// only names that vanish under it (ENOENT). It returns the rounds done.
func stressScan(t *testing.T, s stressSpec) int {
	var stop atomic.Bool
	go func() {
		io.Copy(io.Discard, os.Stdin)
		stop.Store(true)
	}()
	rounds := 0
	for !stop.Load() || rounds == 0 {
		err := filepath.WalkDir(s.Mount, func(p string, d iofs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, iofs.ErrNotExist) {
					return nil // a directory removed or renamed under the walk
				}
				return err
			}
			if p == filepath.Join(s.Mount, ".rubino") {
				return iofs.SkipDir
			}
			var st unix.Stat_t
			if err := unix.Lstat(p, &st); err != nil && err != unix.ENOENT {
				return fmt.Errorf("lstat %s: %w", p, err)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("scanner round %d: %v", rounds, err)
		}
		b, err := os.ReadFile(filepath.Join(s.Mount, ".rubino/status"))
		if err != nil {
			t.Fatalf("scanner: .rubino/status: %v", err)
		}
		var doc map[string]any
		if err := json.Unmarshal(b, &doc); err != nil || doc["mode"] != "enforce" {
			t.Fatalf("scanner: .rubino/status %q: %v", b, err)
		}
		rounds++
	}
	return rounds
}

// stressWorker is one worker's state: its model of the names it owns.
type stressWorker struct {
	t       *testing.T
	s       stressSpec
	rnd     *rand.Rand
	enc     *json.Encoder
	session string
	own     string // its directory, "wN"
	prefix  string // its names in the shared directory, "shared/wN-"
	step    int
	next    int // name counter: a name is never used twice

	files map[string][]byte // own files (workspace-relative) and their content
	fresh map[string]bool   // own files its session read or wrote
	dirs  map[string]bool   // own subdirectories (not w.own itself)
}

func (w *stressWorker) abs(rel string) string { return filepath.Join(w.s.Mount, rel) }

// fail stops the worker on an unexpected result of op on rel.
func (w *stressWorker) fail(op, rel string, err error) {
	w.t.Helper()
	var errno syscall.Errno
	name := ""
	if errors.As(err, &errno) {
		name = " (" + unix.ErrnoName(errno) + ")"
	}
	w.t.Fatalf("worker %d (session %s), step %d: %s %s: %v%s", w.s.ID, w.session, w.step, op, rel, err, name)
}

func (w *stressWorker) log(r stressRecord) {
	if err := w.enc.Encode(r); err != nil {
		w.t.Fatalf("log: %v", err)
	}
}

// logFile logs a file operation with the content the worker now expects.
func (w *stressWorker) logFile(r stressRecord) {
	p := r.Path
	if r.To != "" {
		p = r.To
	}
	r.Hash = stressHash(w.files[p])
	w.log(r)
}

// register makes this process the root of a new guard session.
func (w *stressWorker) register() string {
	p := w.abs(".rubino/sessions/clone")
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		w.fail("open", p, err)
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "pid=%d name=stress-w%d\n", os.Getpid(), w.s.ID); err != nil {
		w.fail("register", p, err)
	}
	buf := make([]byte, 256)
	n, err := f.ReadAt(buf, 0)
	if err != nil && err != io.EOF {
		w.fail("read", p, err)
	}
	name := strings.TrimSpace(string(buf[:n]))
	if name != fmt.Sprintf("stress-w%d", w.s.ID) {
		w.t.Fatalf("registered session %q", name)
	}
	if got, err := os.Readlink(w.abs(".rubino/self")); err != nil || got != "sessions/"+name {
		w.t.Fatalf(".rubino/self = %q, %v", got, err)
	}
	return name
}

// data returns new content: mostly a few lines, sometimes empty, sometimes
// tens of KiB (several pages, more than one FUSE write on some kernels).
func (w *stressWorker) data() []byte {
	var n int
	switch r := w.rnd.IntN(100); {
	case r < 3:
		return nil
	case r < 12:
		n = 8<<10 + w.rnd.IntN(40<<10)
	default:
		n = 1 + w.rnd.IntN(300)
	}
	b := make([]byte, 0, n+32)
	b = fmt.Appendf(b, "w%d step %d\n", w.s.ID, w.step)
	for len(b) < n {
		b = append(b, byte('a'+w.rnd.IntN(26)))
		if w.rnd.IntN(60) == 0 {
			b = append(b, '\n')
		}
	}
	return b
}

func (w *stressWorker) newName(prefix string) string {
	w.next++
	return fmt.Sprintf("%s%d", prefix, w.next)
}

// sorted returns the keys of m that keep says, sorted (for reproducible
// choices).
func sorted[V any](m map[string]V, keep func(string) bool) []string {
	var out []string
	for k := range m {
		if keep(k) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func (w *stressWorker) pick(list []string) string { return list[w.rnd.IntN(len(list))] }

func (w *stressWorker) isShared(rel string) bool { return strings.HasPrefix(rel, "shared/") }

// localFiles and sharedFiles are the worker's files in its own tree and
// in shared/.
func (w *stressWorker) localFiles() []string {
	return sorted(w.files, func(p string) bool { return !w.isShared(p) })
}

func (w *stressWorker) sharedFiles() []string { return sorted(w.files, w.isShared) }

// ownDirs is w.own and its subdirectories.
func (w *stressWorker) ownDirs() []string {
	return append([]string{w.own}, sorted(w.dirs, func(string) bool { return true })...)
}

// children lists the model's entries directly in dir: name -> is a directory.
func (w *stressWorker) children(dir string) map[string]bool {
	out := map[string]bool{}
	for p := range w.files {
		if path.Dir(p) == dir {
			out[path.Base(p)] = false
		}
	}
	for p := range w.dirs {
		if path.Dir(p) == dir {
			out[path.Base(p)] = true
		}
	}
	return out
}

// verify checks got (read through the mount) against the model of rel.
func (w *stressWorker) verify(how, rel string, got []byte) {
	w.t.Helper()
	want := w.files[rel]
	if bytes.Equal(got, want) {
		return
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	w.t.Fatalf("worker %d, step %d: %s %s: %d bytes, want %d; first difference at byte %d\n%s",
		w.s.ID, w.step, how, rel, len(got), len(want), i, w.mismatch(rel, got, want))
}

// stressBackingEnv names the backing workspace for a worker's failure
// diagnostics (stressWorker.mismatch); the parent sets it.
const stressBackingEnv = "RUBINOFS_STRESS_BACKING"

// mismatch describes a failed verify of rel for the report: the first
// bytes of got and want, the backing file's content and inode now, which
// file of the backing shared/ holds got, and a second read through the
// mount (a transient page-cache view reads right the second time).
func (w *stressWorker) mismatch(rel string, got, want []byte) string {
	head := func(b []byte) string { return fmt.Sprintf("%x", b[:min(32, len(b))]) }
	var sb strings.Builder
	fmt.Fprintf(&sb, "  got  first 32 bytes %s (all zero %v)\n", head(got), len(got) > 0 && len(bytes.Trim(got, "\x00")) == 0)
	fmt.Fprintf(&sb, "  want first 32 bytes %s\n", head(want))
	if len(got) == len(want) && len(got) > 0 {
		diff := 0
		for j := range got {
			if got[j] != want[j] {
				diff++
			}
		}
		fmt.Fprintf(&sb, "  %d bytes differ; got[1:] == want[1:]: %v\n", diff, bytes.Equal(got[1:], want[1:]))
	}
	if again, err := os.ReadFile(w.abs(rel)); err != nil {
		fmt.Fprintf(&sb, "  second read through the mount: %v\n", err)
	} else {
		fmt.Fprintf(&sb, "  second read through the mount: %d bytes, equals want %v, equals first read %v\n", len(again), bytes.Equal(again, want), bytes.Equal(again, got))
	}
	ws := os.Getenv(stressBackingEnv)
	if ws == "" {
		return sb.String()
	}
	bp := filepath.Join(ws, rel)
	var st unix.Stat_t
	if err := unix.Lstat(bp, &st); err != nil {
		fmt.Fprintf(&sb, "  backing %s: %v\n", bp, err)
	} else {
		b, err := os.ReadFile(bp)
		fmt.Fprintf(&sb, "  backing: inode %d, size %d, read %d bytes (%v), first 32 %s, equals want %v, equals got %v\n",
			st.Ino, st.Size, len(b), err, head(b), bytes.Equal(b, want), bytes.Equal(b, got))
	}
	var mst unix.Stat_t
	if err := unix.Lstat(w.abs(rel), &mst); err == nil {
		fmt.Fprintf(&sb, "  mount: inode %d, size %d\n", mst.Ino, mst.Size)
	}
	ents, _ := os.ReadDir(filepath.Join(ws, "shared"))
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(ws, "shared", e.Name()))
		if err == nil && bytes.Equal(b, got) {
			fmt.Fprintf(&sb, "  got equals the backing shared/%s\n", e.Name())
		}
	}
	return sb.String()
}

// read reads an own file and checks it; the session has read it now.
func (w *stressWorker) read(rel string) {
	w.t.Helper()
	b, err := os.ReadFile(w.abs(rel))
	if err != nil {
		w.fail("read", rel, err)
	}
	w.verify("read", rel, b)
	w.fresh[rel] = true
}

// ensureRead obeys the guard before a mutation of rel: an own file the
// session never read is read first, and half the time a blind overwrite
// is tried before, which must be refused with the file intact.
func (w *stressWorker) ensureRead(rel string) {
	w.t.Helper()
	if w.fresh[rel] {
		return
	}
	if w.rnd.IntN(2) == 0 {
		err := os.WriteFile(w.abs(rel), []byte("blind\n"), 0o644)
		if !errors.Is(err, syscall.EACCES) {
			w.fail("blind overwrite of an unread file (want EACCES)", rel, err)
		}
		w.log(stressRecord{Op: "denied", Path: rel})
	}
	w.read(rel) // also checks the refused write left it intact
}

// run runs the worker's operations.
func (w *stressWorker) run() {
	type op struct {
		name   string
		weight int
		run    func() bool // false: not applicable now
	}
	table := []op{
		{"create", 12, w.opCreate},
		{"overwrite", 10, w.opOverwrite},
		{"append", 10, w.opAppend},
		{"rdwr", 7, w.opRdwr},
		{"truncate", 5, w.opTruncate},
		{"atomic-save", 5, w.opAtomicSave},
		{"rename-own", 5, w.opRenameOwn},
		{"rename-to-shared", 5, w.opRenameToShared},
		{"rename-from-shared", 3, w.opRenameFromShared},
		{"unlink", 7, w.opUnlink},
		{"mkdir", 3, w.opMkdir},
		{"rmdir", 3, w.opRmdir},
		{"rename-dir", 1, w.opRenameDir},
		{"readdir-own", 8, w.opReaddirOwn},
		{"read-own", 8, w.opReadOwn},
		{"stat-own", 5, w.opStatOwn},
		{"exists", 1, w.opExists},
		{"readdir-shared", 4, w.opReaddirShared},
		{"others", 6, w.opOthers},
	}
	total := 0
	for _, o := range table {
		total += o.weight
	}
	for w.step = 0; w.step < w.s.Ops; w.step++ {
		r := w.rnd.IntN(total)
		for _, o := range table {
			if r -= o.weight; r < 0 {
				if !o.run() {
					w.opCreate()
				}
				break
			}
		}
	}
	// Every own file read once more at the end: what the worker leaves is
	// what it believes it left.
	for _, rel := range sorted(w.files, func(string) bool { return true }) {
		w.read(rel)
	}
}

func (w *stressWorker) opCreate() bool {
	if len(w.files) > 40 {
		return w.opUnlink()
	}
	dir := w.pick(w.ownDirs())
	rel := w.newName(dir + "/f")
	b := w.data()
	f, err := os.OpenFile(w.abs(rel), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		w.fail("create", rel, err)
	}
	if _, err := f.Write(b); err != nil {
		w.fail("write (new file)", rel, err)
	}
	if err := f.Close(); err != nil {
		w.fail("close", rel, err)
	}
	w.files[rel], w.fresh[rel] = b, true
	w.logFile(stressRecord{Op: "create", Path: rel, Data: b})
	return true
}

// opOverwrite reads a file and rewrites it (open O_TRUNC): `cat f; echo > f`.
func (w *stressWorker) opOverwrite() bool {
	files := w.localFiles()
	if len(files) == 0 {
		return false
	}
	rel := w.pick(files)
	w.ensureRead(rel)
	w.read(rel)
	b := w.data()
	if err := os.WriteFile(w.abs(rel), b, 0o644); err != nil {
		w.fail("overwrite", rel, err)
	}
	w.files[rel] = b
	w.logFile(stressRecord{Op: "overwrite", Path: rel, Data: b})
	return true
}

// opAppend appends (`>>`), reading first only half the time when the
// session's own last write already made the file fresh.
func (w *stressWorker) opAppend() bool {
	files := sorted(w.files, func(string) bool { return true })
	if len(files) == 0 {
		return false
	}
	rel := w.pick(files)
	w.ensureRead(rel)
	if w.rnd.IntN(2) == 0 {
		w.read(rel)
	}
	b := w.data()
	f, err := os.OpenFile(w.abs(rel), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		w.fail("open O_APPEND", rel, err)
	}
	if _, err := f.Write(b); err != nil {
		w.fail("append", rel, err)
	}
	if err := f.Close(); err != nil {
		w.fail("close", rel, err)
	}
	w.files[rel] = append(w.files[rel], b...)
	w.logFile(stressRecord{Op: "append", Path: rel, Data: b})
	return true
}

// opRdwr opens O_RDWR, reads through the handle, then writes at offsets
// (sometimes past the end) and sometimes ftruncates, all through the one
// handle, like an editor or a database would.
func (w *stressWorker) opRdwr() bool {
	files := w.localFiles()
	if len(files) == 0 {
		return false
	}
	rel := w.pick(files)
	w.ensureRead(rel)
	f, err := os.OpenFile(w.abs(rel), os.O_RDWR, 0)
	if err != nil {
		w.fail("open O_RDWR", rel, err)
	}
	got, err := io.ReadAll(f)
	if err != nil {
		w.fail("read (O_RDWR handle)", rel, err)
	}
	w.verify("read through an O_RDWR handle", rel, got)
	for i, n := 0, 1+w.rnd.IntN(3); i < n; i++ {
		cur := w.files[rel]
		b := w.data()
		if len(b) > 4096 {
			b = b[:4096]
		}
		off := int64(w.rnd.IntN(len(cur) + 1))
		if w.rnd.IntN(8) == 0 {
			off += int64(w.rnd.IntN(100)) // a hole
		}
		if _, err := f.WriteAt(b, off); err != nil {
			w.fail(fmt.Sprintf("pwrite %d (O_RDWR handle, write %d)", off, i), rel, err)
		}
		if len(b) > 0 { // an empty write extends nothing (see replay)
			if end := off + int64(len(b)); end > int64(len(cur)) {
				cur = append(cur, make([]byte, end-int64(len(cur)))...)
			}
			copy(cur[off:], b)
		}
		w.files[rel] = cur
		w.logFile(stressRecord{Op: "pwrite", Path: rel, Off: off, Data: b})
	}
	if w.rnd.IntN(3) == 0 {
		cur := w.files[rel]
		size := int64(w.rnd.IntN(len(cur) + 10))
		if err := f.Truncate(size); err != nil {
			w.fail(fmt.Sprintf("ftruncate %d", size), rel, err)
		}
		if size <= int64(len(cur)) {
			cur = cur[:size]
		} else {
			cur = append(cur, make([]byte, size-int64(len(cur)))...)
		}
		w.files[rel] = cur
		w.logFile(stressRecord{Op: "truncate", Path: rel, Size: size})
	}
	if err := f.Close(); err != nil {
		w.fail("close", rel, err)
	}
	return true
}

// opTruncate is truncate(2) by path after a read.
func (w *stressWorker) opTruncate() bool {
	files := sorted(w.files, func(string) bool { return true })
	if len(files) == 0 {
		return false
	}
	rel := w.pick(files)
	w.ensureRead(rel)
	cur := w.files[rel]
	size := int64(w.rnd.IntN(len(cur) + 50))
	if err := os.Truncate(w.abs(rel), size); err != nil {
		w.fail(fmt.Sprintf("truncate %d", size), rel, err)
	}
	if size <= int64(len(cur)) {
		cur = cur[:size]
	} else {
		cur = append(cur, make([]byte, size-int64(len(cur)))...)
	}
	w.files[rel] = cur
	w.logFile(stressRecord{Op: "truncate", Path: rel, Size: size})
	return true
}

// opAtomicSave writes a temporary file and renames it over a read file.
func (w *stressWorker) opAtomicSave() bool {
	files := w.localFiles()
	if len(files) == 0 {
		return false
	}
	rel := w.pick(files)
	w.ensureRead(rel)
	w.read(rel)
	tmp := w.newName(path.Dir(rel) + "/.tmp")
	b := w.data()
	if err := os.WriteFile(w.abs(tmp), b, 0o644); err != nil {
		w.fail("create", tmp, err)
	}
	w.files[tmp], w.fresh[tmp] = b, true
	w.logFile(stressRecord{Op: "create", Path: tmp, Data: b})
	if err := os.Rename(w.abs(tmp), w.abs(rel)); err != nil {
		w.fail("rename over "+rel, tmp, err)
	}
	w.files[rel] = b
	delete(w.files, tmp)
	delete(w.fresh, tmp)
	w.logFile(stressRecord{Op: "rename", Path: tmp, To: rel})
	return true
}

// move renames an own file to a new name to.
func (w *stressWorker) move(rel, to string) {
	if err := os.Rename(w.abs(rel), w.abs(to)); err != nil {
		w.fail("rename to "+to, rel, err)
	}
	w.files[to], w.fresh[to] = w.files[rel], w.fresh[rel]
	delete(w.files, rel)
	delete(w.fresh, rel)
	w.logFile(stressRecord{Op: "rename", Path: rel, To: to})
}

func (w *stressWorker) opRenameOwn() bool {
	files := w.localFiles()
	if len(files) == 0 {
		return false
	}
	w.move(w.pick(files), w.newName(w.pick(w.ownDirs())+"/f"))
	return true
}

func (w *stressWorker) opRenameToShared() bool {
	files := w.localFiles()
	if len(files) == 0 {
		return false
	}
	w.move(w.pick(files), w.newName(w.prefix+"f"))
	return true
}

func (w *stressWorker) opRenameFromShared() bool {
	files := w.sharedFiles()
	if len(files) == 0 {
		return false
	}
	w.move(w.pick(files), w.newName(w.pick(w.ownDirs())+"/f"))
	return true
}

func (w *stressWorker) opUnlink() bool {
	files := sorted(w.files, func(string) bool { return true })
	if len(files) == 0 {
		return false
	}
	rel := w.pick(files)
	w.ensureRead(rel)
	if err := os.Remove(w.abs(rel)); err != nil {
		w.fail("unlink", rel, err)
	}
	delete(w.files, rel)
	delete(w.fresh, rel)
	w.log(stressRecord{Op: "unlink", Path: rel})
	return true
}

func (w *stressWorker) opMkdir() bool {
	if len(w.dirs) >= 6 {
		return false
	}
	parent := w.pick(w.ownDirs())
	if strings.Count(parent, "/") >= 2 {
		parent = w.own
	}
	rel := w.newName(parent + "/d")
	if err := os.Mkdir(w.abs(rel), 0o755); err != nil {
		w.fail("mkdir", rel, err)
	}
	w.dirs[rel] = true
	w.log(stressRecord{Op: "mkdir", Path: rel})
	return true
}

// opRmdir removes an empty subdirectory, or tries a non-empty one (which
// must fail with ENOTEMPTY and change nothing).
func (w *stressWorker) opRmdir() bool {
	dirs := sorted(w.dirs, func(string) bool { return true })
	if len(dirs) == 0 {
		return false
	}
	rel := w.pick(dirs)
	err := syscall.Rmdir(w.abs(rel))
	if len(w.children(rel)) > 0 {
		if err != syscall.ENOTEMPTY {
			w.fail("rmdir of a non-empty directory (want ENOTEMPTY)", rel, err)
		}
		return true
	}
	if err != nil {
		w.fail("rmdir", rel, err)
	}
	delete(w.dirs, rel)
	w.log(stressRecord{Op: "rmdir", Path: rel})
	return true
}

// opRenameDir renames a subdirectory of w.own with everything in it.
func (w *stressWorker) opRenameDir() bool {
	dirs := sorted(w.dirs, func(p string) bool { return path.Dir(p) == w.own })
	if len(dirs) == 0 {
		return false
	}
	rel := w.pick(dirs)
	to := w.newName(w.own + "/d")
	if err := os.Rename(w.abs(rel), w.abs(to)); err != nil {
		w.fail("rename directory to "+to, rel, err)
	}
	move := func(p string) (string, bool) {
		if p == rel || strings.HasPrefix(p, rel+"/") {
			return to + strings.TrimPrefix(p, rel), true
		}
		return p, false
	}
	for _, p := range sorted(w.files, func(string) bool { return true }) {
		if np, ok := move(p); ok {
			w.files[np], w.fresh[np] = w.files[p], w.fresh[p]
			delete(w.files, p)
			delete(w.fresh, p)
		}
	}
	for _, p := range sorted(w.dirs, func(string) bool { return true }) {
		if np, ok := move(p); ok {
			delete(w.dirs, p)
			w.dirs[np] = true
		}
	}
	w.log(stressRecord{Op: "rename", Path: rel, To: to})
	return true
}

// opReaddirOwn lists an own directory: exactly the model's entries.
func (w *stressWorker) opReaddirOwn() bool {
	dir := w.pick(w.ownDirs())
	ents, err := os.ReadDir(w.abs(dir))
	if err != nil {
		w.fail("readdir", dir, err)
	}
	want := w.children(dir)
	got := map[string]bool{}
	for _, e := range ents {
		got[e.Name()] = e.IsDir()
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		w.t.Fatalf("worker %d, step %d: readdir %s = %v, want %v", w.s.ID, w.step, dir, got, want)
	}
	return true
}

func (w *stressWorker) opReadOwn() bool {
	files := sorted(w.files, func(string) bool { return true })
	if len(files) == 0 {
		return false
	}
	w.read(w.pick(files))
	return true
}

func (w *stressWorker) opStatOwn() bool {
	files := sorted(w.files, func(string) bool { return true })
	if len(files) == 0 {
		return false
	}
	rel := w.pick(files)
	st, err := os.Lstat(w.abs(rel))
	if err != nil {
		w.fail("lstat", rel, err)
	}
	if !st.Mode().IsRegular() || st.Size() != int64(len(w.files[rel])) {
		w.t.Fatalf("worker %d, step %d: lstat %s: %v, size %d, want a regular file of %d bytes",
			w.s.ID, w.step, rel, st.Mode(), st.Size(), len(w.files[rel]))
	}
	return true
}

// opExists creates an existing own name with O_EXCL: EEXIST.
func (w *stressWorker) opExists() bool {
	files := sorted(w.files, func(string) bool { return true })
	if len(files) == 0 {
		return false
	}
	rel := w.pick(files)
	f, err := os.OpenFile(w.abs(rel), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err == nil {
		f.Close()
	}
	if !errors.Is(err, syscall.EEXIST) {
		w.fail("create O_EXCL of an existing file (want EEXIST)", rel, err)
	}
	return true
}

// opReaddirShared lists shared/: the worker's own names there are exactly
// the model's (the others' come and go).
func (w *stressWorker) opReaddirShared() bool {
	ents, err := os.ReadDir(w.abs("shared"))
	if err != nil {
		w.fail("readdir", "shared", err)
	}
	var got []string
	for _, e := range ents {
		if strings.HasPrefix("shared/"+e.Name(), w.prefix) {
			got = append(got, "shared/"+e.Name())
		}
	}
	if want := w.sharedFiles(); fmt.Sprint(got) != fmt.Sprint(want) {
		w.t.Fatalf("worker %d, step %d: own names in shared/ = %v, want %v", w.s.ID, w.step, got, want)
	}
	return true
}

// others returns the other workers' names in shared/ (and shared/common).
func (w *stressWorker) others() []string {
	ents, err := os.ReadDir(w.abs("shared"))
	if err != nil {
		w.fail("readdir", "shared", err)
	}
	var out []string
	for _, e := range ents {
		if p := "shared/" + e.Name(); !strings.HasPrefix(p, w.prefix) {
			out = append(out, p)
		}
	}
	return out
}

// opOthers reads another worker's file (ReadOthers), or tries a blind
// mutation of it (Probe), which the guard must refuse: this session never
// read it. A file that vanished meanwhile (ENOENT) is fine.
func (w *stressWorker) opOthers() bool {
	others := w.others()
	if len(others) == 0 {
		return false
	}
	rel := w.pick(others)
	p := w.abs(rel)
	if w.s.ReadOthers {
		b, err := os.ReadFile(p)
		if err != nil && !errors.Is(err, syscall.ENOENT) {
			w.fail("read another worker's file", rel, err)
		}
		if rel == "shared/common" && string(b) != stressCommon {
			w.t.Fatalf("shared/common = %q\n%s", b, w.mismatch(rel, b, []byte(stressCommon)))
		}
		return true
	}
	if !w.s.Probe {
		return false
	}
	var err error
	var what string
	switch w.rnd.IntN(5) {
	case 0:
		what = "blind write (O_WRONLY) to another worker's file"
		var f *os.File
		if f, err = os.OpenFile(p, os.O_WRONLY, 0); err == nil {
			_, err = f.Write([]byte("X"))
			if cerr := f.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}
	case 1:
		what = "open O_TRUNC of another worker's file"
		var f *os.File
		if f, err = os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0); err == nil {
			f.Close()
		}
	case 2:
		what = "truncate of another worker's file"
		err = os.Truncate(p, 0)
	case 3:
		what = "unlink of another worker's file"
		// unlink(2) alone: os.Remove follows a failed unlink with rmdir and
		// returns rmdir's error unless it is ENOTDIR, so a refused unlink
		// (EACCES) of a name the owner renamed away meanwhile would come
		// back as rmdir's ENOENT, and the refusal would go unlogged.
		err = syscall.Unlink(p)
	case 4:
		mine := w.localFiles()
		if len(mine) == 0 {
			return false
		}
		src := w.pick(mine)
		w.ensureRead(src)
		what = "RENAME_EXCHANGE of " + src + " with another worker's file"
		err = unix.Renameat2(unix.AT_FDCWD, w.abs(src), unix.AT_FDCWD, p, unix.RENAME_EXCHANGE)
	}
	switch {
	case errors.Is(err, syscall.EACCES):
		w.log(stressRecord{Op: "denied", Path: rel})
	case errors.Is(err, syscall.ENOENT):
	default:
		w.fail(what+" (want EACCES)", rel, err)
	}
	return true
}

// TestStressInodeReuse is the minimal reproduction of what TestStress
// found: a file created while another file is being removed (unlinked, or
// replaced by a rename) can be given the removed file's inode number
// before fusefs has told the guard to forget that identity: Guard.Forget
// runs after the backing unlink or rename returned, under the old file's
// identity lock only, and Create takes no identity lock. Forget then
// deletes the new file's mutation record, so the creating handle looks
// overtaken by another session, asks the guard again, and its first write
// is refused as "unread": `echo x > new` fails with EACCES although the
// caller has just created the file. Six processes, each a session of its
// own and each in a directory of its own, create, write, atomically save
// and remove files (ext4 hands a freed inode number to the next file
// created); no write may be refused. The directories matter: the kernel
// serialises a create with an unlink or rename in the same directory (the
// parent's i_rwsem), so the race needs two directories. Nor may the
// watcher take any of it for an external change (which makes the
// creator's record stale as well).
func TestStressInodeReuse(t *testing.T) {
	m := newMount(t, nil, nil)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const procs = 6
	var cmds []*exec.Cmd
	var outs []*syncBuffer
	for i := 0; i < procs; i++ {
		b, _ := json.Marshal(stressSpec{Role: "reuse", ID: i, Mount: m.mnt, Ops: 150, Session: true,
			Log: filepath.Join(m.tmp, fmt.Sprintf("reuse%d.jsonl", i))})
		cmd := exec.Command(exe, "-test.run=^TestStressWorker$", "-test.count=1", "-test.timeout=5m")
		cmd.Dir, cmd.Env = m.tmp, append(os.Environ(), stressEnv+"="+string(b))
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("process %d: %v\n%s", i, err, outs[i])
		}
	}
	// Nothing outside touched the workspace: a change taken for an
	// external one (an own change of a new file that got a freed inode
	// number, ending while the freeing change's bracket was still open)
	// would have made its creator's record stale.
	m.drainWatcher("sentinel")
	m.assertNoExternal()
}

// stressReuse is one process of TestStressInodeReuse.
func stressReuse(t *testing.T, s stressSpec) {
	w := &stressWorker{t: t, s: s, session: "default"}
	if s.Session {
		w.session = w.register()
	}
	dir := fmt.Sprintf("p%d", s.ID)
	if err := os.Mkdir(w.abs(dir), 0o755); err != nil {
		w.fail("mkdir", dir, err)
	}
	write := func(rel string, flags int) {
		f, err := os.OpenFile(w.abs(rel), flags, 0o644)
		if err != nil {
			w.fail("open", rel, err)
		}
		if _, err := f.Write([]byte("x\n")); err != nil {
			w.fail("write to a file this process has just created", rel, err)
		}
		if err := f.Close(); err != nil {
			w.fail("close", rel, err)
		}
	}
	for w.step = 0; w.step < s.Ops; w.step++ {
		rel, tmp := fmt.Sprintf("%s/f%d", dir, w.step), fmt.Sprintf("%s/.f%d.tmp", dir, w.step)
		write(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
		write(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
		if err := os.Rename(w.abs(tmp), w.abs(rel)); err != nil {
			w.fail("rename over", rel, err)
		}
		if err := os.Remove(w.abs(rel)); err != nil {
			w.fail("unlink", rel, err)
		}
	}
}

// TestStressDirRenameKeepsHandles is the reproduction of the second thing
// TestStress showed: after a directory is renamed through the mount, the
// watcher takes every entry of the renamed directory for an external
// change (its scan of the new directory queues a create for each entry,
// and no own change was recorded under the new paths), so the daemon
// revokes the write right of handles open on those files: the next write
// through a handle that was open across `mv d d2` is refused (EACCES)
// although nothing but the handle's own session changed the file.
func TestStressDirRenameKeepsHandles(t *testing.T) {
	m := newMount(t, map[string]string{"d/f": "original\n"}, nil)
	if _, err := os.ReadFile(m.path("d/f")); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(m.path("d/f"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("first "), 0); err != nil {
		t.Fatalf("first write: %v", err)
	}
	mark := m.appliedMark()
	if err := os.Rename(m.path("d"), m.path("d2")); err != nil {
		t.Fatal(err)
	}
	// An external change after the rename is a barrier: once the watcher
	// has applied it, it has handled the rename's events too (in order).
	m.writeBacking("barrier", "x\n")
	m.waitApplied(mark, "barrier")
	if _, err := f.WriteAt([]byte("second"), 0); err != nil {
		t.Fatalf("a write through a handle held across a directory rename through the mount: %v\nchanges the watcher applied as external:\n%s",
			err, m.externalEvents())
	}
	// Neither the own write's event under the old path nor the scan of the
	// moved directory is an external change.
	for _, evs := range m.mt.Applied()[mark:] {
		for _, ev := range evs {
			if ev.Path != "barrier" {
				t.Errorf("the watcher applied an own change as external: %s %v", ev.Path, ev.Op)
			}
		}
	}

	// An external touch changes no byte: the handle keeps its right (the
	// hash is authoritative, README "The watcher"). The barrier first lets
	// the watcher decide on the own write's event alone (events of one
	// path within one batch window are judged together).
	mark = m.appliedMark()
	m.writeBacking("barrier2", "x\n")
	m.waitApplied(mark, "barrier2")
	mark = m.appliedMark()
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(m.backing("d2/f"), future, future); err != nil {
		t.Fatal(err)
	}
	m.waitApplied(mark, "d2/f")
	if _, err := f.WriteAt([]byte("third "), 0); err != nil {
		t.Fatalf("a write after an external touch: %v", err)
	}

	// A real external write inside the renamed directory is seen, and
	// takes the handle's right: the next write through it is refused and
	// leaves the external content intact.
	mark = m.appliedMark()
	m.writeBacking("d2/f", "external\n")
	m.waitApplied(mark, "d2/f")
	if _, err := f.WriteAt([]byte("fourth"), 0); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("a write after an external write into the renamed directory: %v, want EACCES", err)
	}
	if got := m.readBacking("d2/f"); got != "external\n" {
		t.Fatalf("d2/f = %q after a refused write", got)
	}
}

// TestStressDirRenameExternalBefore: an external write to a file made just
// before its directory is renamed through the mount is reported by the old
// watch under the old path; the watcher must apply it where the file is
// now, so a handle open on it loses its right to write. On a loaded
// machine the watcher may deliver the write's batch before the rename
// (its coalescing window ends first): it then names d/f, where the file
// was, and is applied there. Either batch is waited for; the refused
// write is what tells a change applied where the file no longer is (the
// bug: d/f applied after the rename finds no file, and the write passes).
func TestStressDirRenameExternalBefore(t *testing.T) {
	m := newMount(t, map[string]string{"d/f": "original\n"}, nil)
	if _, err := os.ReadFile(m.path("d/f")); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(m.path("d/f"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("first "), 0); err != nil {
		t.Fatalf("first write: %v", err)
	}
	mark := m.appliedMark()
	m.writeBacking("d/f", "external\n")
	if err := os.Rename(m.path("d"), m.path("d2")); err != nil {
		t.Fatal(err)
	}
	m.waitApplied(mark, "d2/f", "d/f")
	if _, err := f.WriteAt([]byte("second"), 0); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("a write after an external write made before the directory rename: %v, want EACCES\n%s", err, m.externalEvents())
	}
	if got := m.readBacking("d2/f"); got != "external\n" {
		t.Fatalf("d2/f = %q after a refused write", got)
	}
}
