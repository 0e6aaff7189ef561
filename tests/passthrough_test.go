package tests

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// ptHolder is a process that holds descriptors of the mount open across
// the test's steps, in the session of the agent that started it. It reads
// one command a line from its command fifo and answers one line on its
// reply fifo, so the test is ordered by events:
//
//	open NAME FLAGS   open(2) with FLAGS "r", "w" or "rw" under NAME
//	pread NAME        read the whole file from offset 0 (up to 64 KiB)
//	mmap NAME         read the whole file through a shared read-only mapping
//	mstore NAME DATA  store DATA at offset 0 through a shared writable
//	                  mapping, then msync(MS_SYNC) (a cached handle's pages
//	                  reach the daemon as WRITEs); the mapping is kept until
//	                  close NAME (Python's mmap holds a dup of the
//	                  descriptor: closing it would send FLUSH)
//	pwrite NAME DATA  write DATA at offset 0
//	splice NAME DATA  write DATA at offset 0 with splice(2) from a pipe
//	close NAME        close(2)
//
// Every answer is "ok DATA" or "err ERRNO-NAME".
const ptHolder = `
import os, sys, mmap, errno
path, cmdp, outp = sys.argv[1:4]
cin = open(cmdp)
out = open(outp, "w", buffering=1)
fds, maps = {}, {}
flags = {"r": os.O_RDONLY, "w": os.O_WRONLY, "rw": os.O_RDWR}
for line in cin:
    words = line.split()
    op, name, rest = words[0], words[1], words[2:]
    try:
        if op == "open":
            fds[name] = os.open(path, flags[rest[0]])
            res = ""
        elif op == "pread":
            res = os.pread(fds[name], 65536, 0).decode()
        elif op == "mmap":
            size = os.fstat(fds[name]).st_size
            with mmap.mmap(fds[name], size, mmap.MAP_SHARED, mmap.PROT_READ) as mm:
                res = mm[:].decode()
        elif op == "mstore":
            mm = mmap.mmap(fds[name], len(rest[0]), mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            mm[0:len(rest[0])] = rest[0].encode()
            mm.flush()
            maps.setdefault(name, []).append(mm)
            res = ""
        elif op == "pwrite":
            os.pwrite(fds[name], rest[0].encode(), 0)
            res = ""
        elif op == "splice":
            r, w = os.pipe()
            os.write(w, rest[0].encode())
            try:
                os.splice(r, fds[name], len(rest[0]), offset_dst=0)
            finally:
                os.close(r); os.close(w)
            res = ""
        elif op == "close":
            for mm in maps.pop(name, []):
                mm.close()
            os.close(fds.pop(name))
            res = ""
        out.write("ok " + res + "\n")
    except OSError as e:
        out.write("err " + errno.errorcode[e.errno] + "\n")
    except KeyError:
        out.write("err EBADF\n")
`

// holder drives a ptHolder.
type holder struct {
	t   *testing.T
	who string
	cmd *os.File
	out *bufio.Reader
}

// startHolder starts a ptHolder on rel in agent a's session.
func startHolder(t *testing.T, m *mount, a *agent, rel string) *holder {
	t.Helper()
	return startHolderAs(t, m, a, a.name, rel)
}

// startHolderAs is startHolder for one of several holders of a's session,
// told apart by tag.
func startHolderAs(t *testing.T, m *mount, a *agent, tag, rel string) *holder {
	t.Helper()
	script := m.tmp + "/holder.py"
	if err := os.WriteFile(script, []byte(ptHolder), 0o644); err != nil {
		t.Fatal(err)
	}
	cmdp, outp := m.tmp+"/cmd-"+tag, m.tmp+"/out-"+tag
	for _, p := range []string{cmdp, outp} {
		if err := exec.Command("mkfifo", p).Run(); err != nil {
			t.Fatal(err)
		}
	}
	a.ok(fmt.Sprintf("python3 %s %s %s %s &", shq(script), shq(rel), shq(cmdp), shq(outp)))
	cmd, err := os.OpenFile(cmdp, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Open(outp)
	if err != nil {
		t.Fatal(err)
	}
	h := &holder{t: t, who: tag, cmd: cmd, out: bufio.NewReader(out)}
	t.Cleanup(func() { cmd.Close(); out.Close() })
	return h
}

// do sends one command and returns the answer line.
func (h *holder) do(format string, args ...any) string {
	h.t.Helper()
	line := fmt.Sprintf(format, args...)
	if _, err := fmt.Fprintln(h.cmd, line); err != nil {
		h.t.Fatalf("holder %s: %s: %v", h.who, line, err)
	}
	got, err := h.out.ReadString('\n')
	if err != nil {
		h.t.Fatalf("holder %s: %s: %v", h.who, line, err)
	}
	return strings.TrimSuffix(got, "\n")
}

// want sends one command and fails the test unless the answer is want.
func (h *holder) want(want, format string, args ...any) {
	h.t.Helper()
	if got := h.do(format, args...); got != want {
		h.t.Fatalf("holder %s: %s: got %q, want %q", h.who, fmt.Sprintf(format, args...), got, want)
	}
}

// TestPassthroughMixedWriters holds a guarded file open for reading (a
// passthrough handle when nothing else is open; read(2) and a shared
// mapping) in one session while writers of other sessions open it for
// writing, both ways round, with O_WRONLY and O_RDWR writers. No open fails
// with EIO (the kernel's answer to an open whose io mode conflicts with
// the inode's, fs/fuse/iomode.c); an allowed write is seen at once by the
// reader, through read(2) and the mapping; a refused write (a session that
// never read the file) fails with EACCES, reaches neither the backing file
// nor any reader, and so does that session's read-write open while a
// passthrough handle holds the file. docs/DESIGN.md#passthrough-io-modes,
// docs/DESIGN.md#refused-writes, docs/DESIGN.md#passthrough-mmap-credit
func TestPassthroughMixedWriters(t *testing.T) {
	for _, order := range []string{"readerFirst", "writerFirst"} {
		for _, wflags := range []string{"w", "rw"} {
			t.Run(order+"/"+wflags, func(t *testing.T) {
				m := newMount(t, map[string]string{"f": "v1"}, nil)
				ra, wa, xa := m.startAgent("reader"), m.startAgent("writer"), m.startAgent("stranger")
				wa.ok("cat f >/dev/null") // the writer's session has read f
				r := startHolder(t, m, ra, "f")
				w := startHolder(t, m, wa, "f")
				x := startHolder(t, m, xa, "f")
				if order == "readerFirst" {
					r.want("ok ", "open a r")
					r.want("ok v1", "pread a")
					w.want("ok ", "open a %s", wflags)
				} else {
					w.want("ok ", "open a %s", wflags)
					r.want("ok ", "open a r")
					r.want("ok v1", "pread a")
				}
				r.want("ok v1", "mmap a")
				w.want("ok ", "pwrite a v2")
				r.want("ok v2", "pread a")
				r.want("ok v2", "mmap a")
				// A second reader opens while both are held.
				r.want("ok ", "open b r")
				r.want("ok v2", "pread b")
				// The stranger never read f: its writes are refused,
				// through a write-only and a read-write handle, while
				// the readers hold the file.
				x.want("ok ", "open a w")
				x.want("err EACCES", "pwrite a XX")
				x.want("err EACCES", "splice a XX")
				if order == "readerFirst" || wflags == "w" {
					// The reader's handle (or the write-only writer's)
					// is a passthrough one: a read-write handle would
					// map the backing file unseen, so the open of a
					// file the stranger never read is refused
					// (docs/DESIGN.md#passthrough-mmap-credit).
					x.want("err EACCES", "open b rw")
				} else {
					x.want("ok ", "open b rw")
					x.want("err EACCES", "pwrite b XX")
					x.want("err EACCES", "splice b XX")
				}
				r.want("ok v2", "pread a")
				r.want("ok v2", "mmap a")
				r.want("ok v2", "pread b")
				if got := m.readBacking("f"); got != "v2" {
					t.Fatalf("backing %q, want v2", got)
				}
				// The writer keeps its right: its session's own change.
				w.want("ok ", "pwrite a v3")
				r.want("ok v3", "pread a")
				w.want("ok ", "splice a v5")
				r.want("ok v5", "pread a")
				r.want("ok v5", "mmap a")
				w.want("ok ", "pwrite a v3")
				for _, h := range []*holder{r, w, x} {
					h.want("ok ", "close a")
					h.do("close b")
				}
				// Every handle is closed: a new reader and writer of any
				// mode open as before.
				r.want("ok ", "open c r")
				r.want("ok v3", "pread c")
				w.want("ok ", "open c rw")
				w.want("ok ", "pwrite c v4")
				r.want("ok v4", "pread c")
			})
		}
	}
}

// TestPassthroughReadsSkipDaemon: a session reads many guarded files with
// cat; their read-only handles are passthrough handles, so no READ of them
// reaches the daemon (the .rubino/metrics op counts), and the reads are
// registered all the same: the session may overwrite a file it read, and
// another session, which read none, is refused.
func TestPassthroughReadsSkipDaemon(t *testing.T) {
	const n = 200
	files := map[string]string{}
	for i := range n {
		files[fmt.Sprintf("d/f%03d", i)] = strings.Repeat(fmt.Sprintf("line %d\n", i), 100)
	}
	m := newMount(t, files, nil)
	a, b := m.startAgent("a"), m.startAgent("b")
	before := scrapeMetrics(t, m)
	a.ok("cat d/* >/dev/null")
	after := scrapeMetrics(t, m)
	delta := func(op string) float64 {
		x, _ := metricValue(after, "rubinofs_fuse_ops_total", "op", op)
		y, _ := metricValue(before, "rubinofs_fuse_ops_total", "op", op)
		return x - y
	}
	t.Logf("cat of %d files: OPEN %v, READ %v, FLUSH %v, RELEASE %v",
		n, delta("open"), delta("read"), delta("flush"), delta("release"))
	if d := delta("open"); d < n {
		t.Errorf("OPEN moved by %v, want >= %d", d, n)
	}
	// The scrapes of .rubino/metrics themselves read through the daemon:
	// a handful of READs, never one per file.
	if d := delta("read"); d >= n/10 {
		t.Errorf("READ moved by %v for %d files: guarded reads reach the daemon", d, n)
	}
	a.ok("printf new > d/f001")
	b.refused("printf new > d/f002")
	if got := m.readBacking("d/f002"); got != files["d/f002"] {
		t.Fatalf("refused overwrite changed d/f002: %q", got)
	}
	if got := m.readBacking("d/f001"); got != "new" {
		t.Fatalf("allowed overwrite: d/f001 is %q", got)
	}
}

// TestPassthroughPhantomReaderFirst is TestPhantomReads with the reader
// first: the test holds a guarded file open for reading (a passthrough
// handle) and mapped before a session opens it for writing (the writer's
// handle is then a passthrough one too, with direct I/O): write-only
// without having read it ("unread"), or read-write after reading it, the
// right then lost when another session rewrites the file ("stale"; a
// read-write open of an unread file is refused at open while the reader
// holds it, TestMmapStorePassthroughRefused). The writer keeps attempting
// 4 KiB writes while the reader reads through read(2) and the mapping.
// Every write is refused with EACCES, no open fails, and no read returns
// a byte that is not on disk or fails with EIO.
// docs/DESIGN.md#passthrough-io-modes, docs/DESIGN.md#refused-writes
func TestPassthroughPhantomReaderFirst(t *testing.T) {
	v1 := []byte(strings.Repeat("0123456789abcdef", 1024)) // 16 KiB: four pages
	for _, mode := range []string{"unread", "stale"} {
		t.Run(mode, func(t *testing.T) {
			m := newMount(t, map[string]string{"f": string(v1)}, nil)
			w := m.startAgent("writer")
			if mode == "stale" {
				w.ok("cat f >/dev/null") // its read-write open is allowed
			}
			r, err := os.Open(m.path("f"))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			mapped, err := syscall.Mmap(int(r.Fd()), 0, len(v1), syscall.PROT_READ, syscall.MAP_SHARED)
			if err != nil {
				t.Fatal(err)
			}
			defer syscall.Munmap(mapped)
			step, goahead, stop, result := startPhantomWriter(t, m, w, mode)
			readStep := func(want string) {
				t.Helper()
				if got, err := os.ReadFile(step); err != nil || string(got) != want {
					t.Fatalf("writer step %q, %v; want %q", got, err, want)
				}
			}
			want := v1
			if mode == "stale" {
				readStep("wrote")
				// Another session rewrites the whole file (same size):
				// the writer's handle loses its right.
				want = []byte(strings.Repeat("ABCDEFGHIJKLMNOP", 1024))
				src := m.tmp + "/v3"
				if err := os.WriteFile(src, want, 0o644); err != nil {
					t.Fatal(err)
				}
				m.startAgent("rewriter").ok("cat f >/dev/null && cat " + shq(src) + " > f")
				if err := os.WriteFile(goahead, []byte("go\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			readStep("looping")
			phantomRace(t, m, r, mapped, want, stop, result)
		})
	}
}

// ptStorm opens one file over and over in every mode (read-only, with a
// mapping; write-only; read-write), reads or writes through it and closes
// it, and prints how many opens, reads and writes failed with EIO.
const ptStorm = `
import os, sys, mmap, errno
path, rounds, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
eio = 0
for i in range(rounds):
    mode = (i + seed) % 3
    try:
        fd = os.open(path, [os.O_RDONLY, os.O_WRONLY, os.O_RDWR][mode])
        try:
            if mode == 0:
                os.pread(fd, 100, 0)
                with mmap.mmap(fd, 4, mmap.MAP_SHARED, mmap.PROT_READ) as mm:
                    mm[:]
            else:
                try:
                    os.pwrite(fd, b"data", 0)
                except PermissionError:
                    pass
        finally:
            os.close(fd)
    except OSError as e:
        if e.errno == errno.EIO:
            eio += 1
        elif not isinstance(e, PermissionError):
            raise
print("eio=%d" % eio)
`

// TestPassthroughOpenStorm: processes of two sessions open one guarded
// file concurrently in every mode, over and over; handles come and go in
// every order, so opens race with the releases of handles of the other
// modes. No open, read, mapping or write ever fails with EIO (a conflict
// of io modes on the inode). docs/DESIGN.md#passthrough-io-modes
func TestPassthroughOpenStorm(t *testing.T) {
	m := newMount(t, map[string]string{"f": "data"}, nil)
	script := m.tmp + "/storm.py"
	if err := os.WriteFile(script, []byte(ptStorm), 0o644); err != nil {
		t.Fatal(err)
	}
	a, b := m.startAgent("a"), m.startAgent("b")
	a.ok("cat f >/dev/null") // a may write, b is refused
	for i, ag := range []*agent{a, b, a, b} {
		ag.ok(fmt.Sprintf("python3 %s f 300 %d > %s/storm%d.out 2>&1 &", shq(script), i, shq(m.tmp), i))
	}
	a.ok("wait")
	b.ok("wait")
	for i := range 4 {
		out, err := os.ReadFile(fmt.Sprintf("%s/storm%d.out", m.tmp, i))
		if err != nil || strings.TrimSpace(string(out)) != "eio=0" {
			t.Errorf("storm %d: %q, %v", i, out, err)
		}
	}
}
