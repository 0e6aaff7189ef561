// Command compact benchmarks context compaction (package compact) on agent
// transcripts of 1k, 10k and 100k messages whose tool results are real
// source files (the Go module cache by default), so token counts and the
// pre-pass see real code, not filler.
//
// Two scenarios per size, each on a fresh SQLite store in a temporary
// directory, with the default config (128,000-token window, compaction at
// 64,000 tokens, builtin summarizer):
//
//   - one-shot: the whole transcript is ingested (parsed, tokenized,
//     inserted, as the messages file does), then compacted once;
//   - rolling: an agent loop appends one turn at a time and, whenever the
//     session's status says needs_compaction, compacts (the automatic path)
//     and continues in the child.
//
// It prints Markdown tables and the machine it ran on. Run it with
//
//	go run ./bench/compact [-sizes 1000,10000,100000] [-src DIR] [-max-result BYTES]
//
// With -force-mb 64,100 it instead force-compacts one transcript of each
// size and prints the extra resident set the compaction took (VmHWM
// reset before it).
//
// It is not part of `go test ./...`.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rubinofs/rubinofs/compact"
	"github.com/rubinofs/rubinofs/ctltree"
)

func main() {
	sizes := flag.String("sizes", "1000,10000,100000", "transcript sizes in messages, comma-separated")
	src := flag.String("src", defaultSrc(), "directory whose .go files become tool results")
	maxResult := flag.Int("max-result", 4096, "bytes of a file kept as one tool result (agents truncate reads)")
	maxFiles := flag.Int("max-files", 20000, "at most this many source files")
	rolling := flag.Bool("rolling", true, "also run the rolling (agent loop) scenario")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the compactions (not the ingest) to `FILE`")
	emitMB := flag.Int("emit-mb", 0, "instead, write a transcript of about this many MB (JSON lines) to stdout, for feeding a daemon")
	forceMB := flag.String("force-mb", "", "instead of the tables above, force-compact transcripts of these sizes in MB (comma-separated) and print the extra RSS")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		profile = f
	}
	log.SetFlags(0)

	files, err := loadFiles(*src, *maxFiles, *maxResult)
	if err != nil {
		log.Fatal(err)
	}
	if len(files) == 0 {
		log.Fatalf("no .go files under %s", *src)
	}
	if *emitMB > 0 {
		emit(*emitMB, files)
		return
	}
	var srcBytes int
	for _, f := range files {
		srcBytes += len(f.content)
	}
	fmt.Printf("## Machine\n\n%s\n\nSource: %d .go files under %s (first %d bytes of each; %.1f MB)\n\n", machine(), len(files), *src, *maxResult, float64(srcBytes)/1e6)

	if *forceMB != "" {
		var mbs []int
		for _, s := range strings.Split(*forceMB, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 1 {
				log.Fatalf("bad size %q", s)
			}
			mbs = append(mbs, n)
		}
		printForce(mbs, files)
		return
	}
	var ns []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 10 {
			log.Fatalf("bad size %q", s)
		}
		ns = append(ns, n)
	}

	tableHeader("One-shot: ingest the transcript, compact once",
		"messages", "transcript MB", "ingest (parse+tokenize+insert)", "compact", "tokens before", "tokens after", "saved tokens",
		"savings ratio", "after/before", "messages after", "peak RSS MB")
	for _, n := range ns {
		r := oneShot(n, files)
		fmt.Printf("| %d | %.1f | %s | %s | %d | %d | %d | %.4f | %.4f | %d | %d |\n",
			n, float64(r.bytes)/1e6, dur(r.ingest), dur(r.compact), r.res.OriginalTokens, r.res.CompactedTokens, r.res.SavedTokens,
			float64(r.res.SavedTokens)/float64(r.res.OriginalTokens), float64(r.res.CompactedTokens)/float64(r.res.OriginalTokens),
			r.res.CompactedMessages, peakRSSMB())
	}
	fmt.Println()
	if !*rolling {
		return
	}
	tableHeader("Rolling: an agent loop that compacts whenever needs_compaction",
		"messages fed", "total time", "compactions", "skipped (thrashing)", "compaction time total", "per compaction (mean / max)",
		"tokens fed", "live tokens at end", "live messages at end", "mean savings ratio")
	for _, n := range ns {
		r := rollingRun(n, files)
		mean := time.Duration(0)
		if r.compactions > 0 {
			mean = r.compactTime / time.Duration(r.compactions)
		}
		fmt.Printf("| %d | %s | %d | %d | %s | %s / %s | %d | %d | %d | %.4f |\n",
			n, dur(r.total), r.compactions, r.skipped, dur(r.compactTime), dur(mean), dur(r.maxCompact), r.fedTokens, r.liveTokens, r.liveMessages, r.meanRatio)
	}
}

// tableHeader prints a Markdown section title and the head of a table
// with right-aligned columns.
func tableHeader(title string, cols ...string) {
	fmt.Printf("## %s\n\n", title)
	fmt.Println("| " + strings.Join(cols, " | ") + " |")
	fmt.Println("|" + strings.Repeat("---:|", len(cols)))
}

// profile, when set, receives a CPU profile of the first one-shot
// compaction.
var profile *os.File

type srcFile struct {
	path    string
	content string
}

func defaultSrc() string {
	if d := os.Getenv("GOMODCACHE"); d != "" {
		return d
	}
	if h, err := os.UserHomeDir(); err == nil {
		if d := filepath.Join(h, "go", "pkg", "mod"); dirExists(d) {
			return d
		}
	}
	return "."
}

func dirExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// loadFiles reads up to max .go files under root in lexical order, each
// cut to maxBytes on a line boundary.
func loadFiles(root string, max, maxBytes int) ([]srcFile, error) {
	var out []srcFile
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if len(out) >= max {
			return filepath.SkipAll
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil || !utf8Valid(b) {
			return nil
		}
		if len(b) > maxBytes {
			if i := bytes.LastIndexByte(b[:maxBytes], '\n'); i > 0 {
				b = b[:i+1]
			} else {
				b = b[:maxBytes]
			}
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, srcFile{path: rel, content: string(b)})
		return nil
	})
	return out, err
}

func utf8Valid(b []byte) bool { return strings.ToValidUTF8(string(b), "") == string(b) }

// transcript generates n messages of agent work: each turn is a user
// request, an assistant message calling read_file (and sometimes a
// grep-like bash) whose results are real files, and an answer. One read in
// eight re-reads an earlier file (agents do), which the pre-pass dedupes.
type transcript struct {
	files []srcFile
	turn  int
	call  int
}

func (g *transcript) next() []compact.Message {
	g.turn++
	f := g.files[(g.turn*7919)%len(g.files)]
	if g.turn%8 == 0 && g.turn > 8 {
		f = g.files[((g.turn-5)*7919)%len(g.files)] // a re-read
	}
	msgs := []compact.Message{{Role: compact.RoleUser, Content: fmt.Sprintf("Step %d: look at %s and tell me whether its error handling is right. Don't change exported names.", g.turn, f.path)}}
	g.call++
	c1 := fmt.Sprintf("call_%d", g.call)
	args, _ := json.Marshal(map[string]string{"path": f.path})
	calls := []compact.ToolCall{{ID: c1, Type: "function", Function: compact.FunctionCall{Name: "read_file", Arguments: string(args)}}}
	results := []compact.Message{{Role: compact.RoleTool, ToolCallID: c1, Content: f.content}}
	if g.turn%3 == 0 {
		g.call++
		c2 := fmt.Sprintf("call_%d", g.call)
		bargs, _ := json.Marshal(map[string]string{"command": "go vet ./" + filepath.Dir(f.path)})
		calls = append(calls, compact.ToolCall{ID: c2, Type: "function", Function: compact.FunctionCall{Name: "bash", Arguments: string(bargs)}})
		out := "ok"
		if g.turn%6 == 0 {
			out = fmt.Sprintf("# %s\n%s:12:2: undefined: handleErr\nexit status 1", filepath.Dir(f.path), f.path)
		}
		results = append(results, compact.Message{Role: compact.RoleTool, ToolCallID: c2, Content: out})
	}
	msgs = append(msgs, compact.Message{Role: compact.RoleAssistant, Content: "Reading " + f.path + ".", ToolCalls: calls})
	msgs = append(msgs, results...)
	msgs = append(msgs, compact.Message{Role: compact.RoleAssistant, Content: fmt.Sprintf(
		"In %s the errors are wrapped with %%w and returned to the caller. I decided to keep the structure instead of adding a helper. Next: check the callers.", f.path)})
	return msgs
}

// jsonLines renders msgs as the JSON lines a harness writes to the
// messages file.
func jsonLines(msgs []compact.Message) []byte {
	b, err := ctltree.JSONLines(msgs)
	if err != nil {
		log.Fatal(err)
	}
	return b
}

// systemPrompt opens every generated transcript.
const systemPrompt = "You are a careful Go reviewer working in a large repository. Never push to main; keep changes minimal."

// newSession opens a fresh store in a new temporary directory, with the
// default config, and creates a root session in it. done closes the store
// and removes the directory.
func newSession(ctx context.Context) (c *compact.Compressor, id string, done func()) {
	dir, err := os.MkdirTemp("", "bench-compact-")
	if err != nil {
		log.Fatal(err)
	}
	store, err := compact.OpenStore(filepath.Join(dir, "compact.db"))
	if err != nil {
		log.Fatal(err)
	}
	c, err = compact.NewCompressor(store, compact.Config{})
	if err != nil {
		log.Fatal(err)
	}
	sess, err := store.CreateSession(ctx, compact.SessionOptions{})
	if err != nil {
		log.Fatal(err)
	}
	return c, sess.ID, func() {
		store.Close()
		os.RemoveAll(dir)
	}
}

type oneShotResult struct {
	bytes           int
	ingest, compact time.Duration
	res             compact.Result
}

func oneShot(n int, files []srcFile) oneShotResult {
	ctx := context.Background()
	c, id, done := newSession(ctx)
	defer done()
	g := &transcript{files: files}
	var msgs []compact.Message
	msgs = append(msgs, compact.Message{Role: compact.RoleSystem, Content: systemPrompt})
	for len(msgs) < n {
		msgs = append(msgs, g.next()...)
	}
	msgs = msgs[:n]
	// Keep the transcript well formed at the cut: drop a trailing call
	// whose results were cut off.
	for len(msgs) > 0 && msgs[len(msgs)-1].Role == compact.RoleAssistant && len(msgs[len(msgs)-1].ToolCalls) > 0 {
		msgs = msgs[:len(msgs)-1]
	}
	data := jsonLines(msgs)
	r := oneShotResult{bytes: len(data)}
	start := time.Now()
	// Ingest in batches of whole lines, as a harness writes the messages
	// file.
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	var batch []byte
	flush := func() {
		if len(batch) > 0 {
			if _, err := c.AppendLines(ctx, id, batch); err != nil {
				log.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	for sc.Scan() {
		batch = append(append(batch, sc.Bytes()...), '\n')
		if len(batch) > 512<<10 {
			flush()
		}
	}
	flush()
	r.ingest = time.Since(start)
	start = time.Now()
	if profile != nil {
		pprof.StartCPUProfile(profile)
	}
	res, err := c.Compact(ctx, id, false)
	if profile != nil {
		pprof.StopCPUProfile()
		profile = nil
	}
	if err != nil {
		log.Fatal(err)
	}
	r.compact = time.Since(start)
	if !res.Compacted {
		log.Fatalf("%d messages: not compacted: %s", n, res.Reason)
	}
	r.res = res
	return r
}

type rollingResult struct {
	total, compactTime, maxCompact time.Duration
	compactions, skipped           int
	fedTokens                      int
	liveTokens, liveMessages       int
	meanRatio                      float64
}

func rollingRun(n int, files []srcFile) rollingResult {
	ctx := context.Background()
	c, id, done := newSession(ctx)
	defer done()
	g := &transcript{files: files}
	var r rollingResult
	start := time.Now()
	fed := 0
	var ratios []float64
	first := []compact.Message{{Role: compact.RoleSystem, Content: systemPrompt}}
	for fed < n {
		turn := g.next()
		if first != nil {
			turn = append(first, turn...)
			first = nil
		}
		if _, err := c.AppendLines(ctx, id, jsonLines(turn)); err != nil {
			log.Fatal(err)
		}
		fed += len(turn)
		st, err := c.Status(ctx, id)
		if err != nil {
			log.Fatal(err)
		}
		if !st.NeedsCompaction {
			continue
		}
		t0 := time.Now()
		res, err := c.Compact(ctx, id, false)
		d := time.Since(t0)
		if err != nil {
			log.Fatal(err)
		}
		if !res.Compacted {
			if res.Reason == compact.ReasonThrashing {
				r.skipped++
				continue
			}
			log.Fatalf("rolling: not compacted: %s", res.Reason)
		}
		r.compactions++
		r.compactTime += d
		r.maxCompact = max(r.maxCompact, d)
		ratios = append(ratios, float64(res.SavedTokens)/float64(res.OriginalTokens))
		id = res.TargetSessionID
	}
	r.total = time.Since(start)
	// Tokens fed: every message appended, counted once (the root's plus
	// everything appended to children after their compaction).
	infos, err := c.Store().Sessions(ctx)
	if err != nil {
		log.Fatal(err)
	}
	created := map[string]int{}
	for _, si := range infos {
		if si.ParentID == "" {
			r.fedTokens += si.Tokens
			continue
		}
		if sm, err := c.Store().SummaryInto(ctx, si.ID); err == nil && sm != nil {
			created[si.ID] = sm.CompactedMessages
		}
	}
	for _, si := range infos {
		if si.ParentID == "" {
			continue
		}
		msgs, err := c.Store().Messages(ctx, si.ID, int64(created[si.ID]))
		if err != nil {
			log.Fatal(err)
		}
		for _, m := range msgs {
			r.fedTokens += m.Tokens
		}
	}
	st, err := c.Status(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	r.liveTokens, r.liveMessages = st.Tokens, st.Messages
	sort.Float64s(ratios)
	for _, x := range ratios {
		r.meanRatio += x / float64(len(ratios))
	}
	return r
}

func dur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	default:
		return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
	}
}

// peakRSSMB returns the process's peak resident set (VmHWM) in MB.
func peakRSSMB() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.Atoi(f[1])
			return kb / 1024
		}
	}
	return 0
}

func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0]); len(f) >= 2 {
			kb, _ := strconv.Atoi(f[1])
			mem = fmt.Sprintf(", %.0f GiB RAM", float64(kb)/(1<<20))
		}
	}
	return fmt.Sprintf("%s, %d CPUs (GOMAXPROCS %d)%s, %s %s/%s", model, runtime.NumCPU(), runtime.GOMAXPROCS(0), mem, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
