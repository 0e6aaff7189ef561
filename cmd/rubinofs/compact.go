package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rubinofs/rubinofs/compact"
)

// appendChunk is the most the CLI writes to a messages file at once: each
// write is stored all or nothing, so a failure names one chunk.
const appendChunk = 512 << 10

func compactCommand() *cli.Command {
	return &cli.Command{
		Name:  "compact",
		Usage: "feed, inspect and compact agent transcripts (through .rubino/compact)",
		Description: "Sessions hold transcripts in OpenAI chat-message form. `run` keeps the head and a recent tail,\n" +
			"summarises the middle into a child session and never splits a tool call from its result.\n" +
			"IDs may be unique prefixes (4+ hex digits).",
		Flags: []cli.Flag{mountFlag()},
		Subcommands: []*cli.Command{
			{
				Name: "ls", Usage: "list sessions",
				Flags:  []cli.Flag{mountFlag(), &cli.BoolFlag{Name: "json", Usage: "print the raw JSON lines"}},
				Action: compactLs,
			},
			{
				Name: "new", Usage: "create a session and print its id",
				Flags: []cli.Flag{mountFlag(),
					&cli.StringFlag{Name: "model", Usage: "the model (chooses the tokenizer)"},
					&cli.IntFlag{Name: "window", Usage: "context window in tokens (default: the config's, 128000)"},
					&cli.StringFlag{Name: "tokenizer", Usage: "cl100k_base, o200k_base or chars/4 (default: by model)"},
					&cli.StringFlag{Name: "title", Usage: "a title"},
				},
				Action: compactNew,
			},
			{
				Name: "append", Usage: "append JSON lines (OpenAI chat messages) from FILE or stdin",
				ArgsUsage: "ID [FILE|-]",
				Flags:     []cli.Flag{mountFlag()},
				Action:    compactAppend,
			},
			{
				Name: "status", Usage: "show a session's size, threshold and whether it needs compaction",
				ArgsUsage: "ID",
				Flags:     []cli.Flag{mountFlag(), &cli.BoolFlag{Name: "json", Usage: "print the raw JSON"}},
				Action:    compactStatus,
			},
			{
				Name: "run", Usage: "compact a session (a no-op below the threshold or when it would not shrink the session; skipped when thrashing unless --force)",
				ArgsUsage: "ID",
				Flags: []cli.Flag{mountFlag(),
					&cli.BoolFlag{Name: "force", Usage: "run even when recent compactions were ineffective"},
					&cli.BoolFlag{Name: "json", Usage: "print the result JSON"},
				},
				Action: compactRun,
			},
			{
				Name: "rm", Usage: "delete a session and the sessions compacted from it (yours only, unless you administer the mount)",
				ArgsUsage: "ID",
				Flags:     []cli.Flag{mountFlag()},
				Action:    compactRm,
			},
			{
				Name: "show", Usage: "show a session's status, lineage and summary",
				ArgsUsage: "ID",
				Flags: []cli.Flag{mountFlag(),
					&cli.BoolFlag{Name: "messages", Usage: "print the transcript (JSON lines) instead"},
				},
				Action: compactShow,
			},
			{
				Name: "import", Usage: "import a Claude Code or Codex session file (JSONL) into a new session",
				ArgsUsage: "FILE",
				Flags: []cli.Flag{mountFlag(),
					&cli.StringFlag{Name: "format", Value: "auto", Usage: "auto, claude, codex or openai"},
					&cli.StringFlag{Name: "model", Usage: "the model (default: the one the file names)"},
					&cli.IntFlag{Name: "window", Usage: "context window in tokens"},
				},
				Action: compactImport,
			},
		},
	}
}

// resolveSession turns an id or prefix into the full id through
// compact/resolve.
func resolveSession(mnt, id string) (string, error) {
	if id == "" {
		return "", cli.Exit("give a session ID (or a unique prefix)", 2)
	}
	full, err := cloneCtl(mnt, "compact/resolve", []byte(id))
	if err != nil {
		return "", cli.Exit(err.Error(), 1)
	}
	return full, nil
}

// mountSession returns the mount (mountOf) and the full id of the session
// the first argument names (resolveSession).
func mountSession(c *cli.Context) (mnt, id string, err error) {
	if mnt, err = mountOf(c); err != nil {
		return "", "", err
	}
	if id, err = resolveSession(mnt, c.Args().Get(0)); err != nil {
		return "", "", err
	}
	return mnt, id, nil
}

func short(id string) string {
	if len(id) > compact.ShortIDLen {
		return id[:compact.ShortIDLen]
	}
	return id
}

func compactLs(c *cli.Context) error {
	raw, err := readMountCtl(c, "compact/list")
	if err != nil {
		return err
	}
	if c.Bool("json") {
		os.Stdout.Write(raw)
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPARENT\tOWNER\tMODEL\tMESSAGES\tTOKENS\tBYTES\tCREATED\tCOMPACTED INTO")
	for _, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var si compact.SessionInfo
		if err := json.Unmarshal(line, &si); err != nil {
			return cli.Exit(fmt.Sprintf("compact/list: %v", err), 1)
		}
		kids := make([]string, len(si.Children))
		for i, k := range si.Children {
			kids[i] = short(k)
		}
		owner := "-"
		if si.Owner != nil {
			owner = strconv.FormatUint(uint64(*si.Owner), 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", short(si.ID), dash(short(si.ParentID)), owner, dash(si.Model), si.Messages, si.Tokens,
			si.Bytes, si.CreatedAt.Local().Format(time.DateTime), strings.Join(kids, ","))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func compactNew(c *cli.Context) error {
	mnt, err := mountOf(c)
	if err != nil {
		return err
	}
	opts := compact.SessionOptions{Model: c.String("model"), ContextWindow: c.Int("window"), Tokenizer: c.String("tokenizer"), Title: c.String("title")}
	id, err := newSession(mnt, opts)
	if err != nil {
		return err
	}
	fmt.Println(id)
	return nil
}

func newSession(mnt string, opts compact.SessionOptions) (string, error) {
	spec, err := json.Marshal(opts)
	if err != nil {
		return "", err
	}
	id, err := cloneCtl(mnt, "compact/new", append(spec, '\n'))
	if err != nil {
		return "", cli.Exit(err.Error(), 1)
	}
	return id, nil
}

var chunkLineRe = regexp.MustCompile(`line (\d+):`)

// appendMessages writes data (JSON lines) to session id's messages file in
// chunks of whole lines. Returns the number of lines stored; on a failure
// the error names the line of data (1-based) that was refused.
func appendMessages(mnt, id string, data []byte) (int, error) {
	rel := "compact/sessions/" + id + "/messages"
	stored, lineNo := 0, 1
	for len(data) > 0 {
		n := len(data)
		if n > appendChunk {
			n = bytes.LastIndexByte(data[:appendChunk], '\n') + 1
			if n == 0 {
				return stored, fmt.Errorf("line %d is longer than %d bytes", lineNo, appendChunk)
			}
		}
		chunk := data[:n]
		lines := bytes.Count(chunk, []byte("\n"))
		if chunk[len(chunk)-1] != '\n' {
			chunk = append(chunk[:n:n], '\n')
			lines++
		}
		if err := writeCtl(mnt, rel, chunk); err != nil {
			msg := err.Error()
			var ce *ctlError
			if errors.As(err, &ce) && ce.Reason != "" {
				msg = ce.Reason
				if m := chunkLineRe.FindStringSubmatch(msg); m != nil {
					k, _ := strconv.Atoi(m[1])
					msg = strings.Replace(msg, m[0], fmt.Sprintf("line %d:", lineNo+k-1), 1)
				}
				msg = fmt.Sprintf("%s (%s)", msg, ce.Errno)
			}
			return stored, errors.New(msg)
		}
		stored += nonBlankLines(chunk)
		lineNo += lines
		data = data[n:]
	}
	return stored, nil
}

func nonBlankLines(b []byte) int {
	n := 0
	for _, l := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			n++
		}
	}
	return n
}

func compactAppend(c *cli.Context) error {
	mnt, id, err := mountSession(c)
	if err != nil {
		return err
	}
	var in io.Reader = os.Stdin
	if f := c.Args().Get(1); f != "" && f != "-" {
		fh, err := os.Open(f)
		if err != nil {
			return cli.Exit(err.Error(), 1)
		}
		defer fh.Close()
		in = fh
	}
	data, err := io.ReadAll(bufio.NewReader(in))
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	n, err := appendMessages(mnt, id, data)
	if err != nil {
		return cli.Exit(fmt.Sprintf("appended %d messages to %s, then: %v", n, short(id), err), 1)
	}
	fmt.Printf("appended %d messages to %s\n", n, short(id))
	return nil
}

func readStatus(mnt, id string) (compact.Status, []byte, error) {
	raw, err := readCtl(mnt, "compact/sessions/"+id+"/status")
	if err != nil {
		return compact.Status{}, nil, cli.Exit(err.Error(), 1)
	}
	var st compact.Status
	if err := json.Unmarshal(raw, &st); err != nil {
		return compact.Status{}, nil, cli.Exit(fmt.Sprintf("status of %s: %v", id, err), 1)
	}
	return st, raw, nil
}

func formatSessionStatus(st compact.Status) string {
	var b strings.Builder
	fmt.Fprintf(&b, "session:    %s\n", st.SessionID)
	if st.ParentSessionID != "" {
		fmt.Fprintf(&b, "parent:     %s\n", st.ParentSessionID)
	}
	fmt.Fprintf(&b, "model:      %s (tokenizer %s)\n", dash(st.Model), st.Tokenizer)
	pct := 0.0
	if st.ThresholdTokens > 0 {
		pct = 100 * float64(st.Tokens) / float64(st.ThresholdTokens)
	}
	fmt.Fprintf(&b, "size:       %d messages, %d tokens (%.0f%% of the %d-token threshold, window %d)\n",
		st.Messages, st.Tokens, pct, st.ThresholdTokens, st.ContextWindow)
	fmt.Fprintf(&b, "compaction: needs_compaction=%v thrashing=%v\n", st.NeedsCompaction, st.Thrashing)
	if st.Detail != "" {
		fmt.Fprintf(&b, "            %s\n", st.Detail)
	}
	if len(st.CompactedInto) > 0 {
		fmt.Fprintf(&b, "compacted into: %s\n", strings.Join(st.CompactedInto, ", "))
	}
	return b.String()
}

func compactStatus(c *cli.Context) error {
	mnt, id, err := mountSession(c)
	if err != nil {
		return err
	}
	st, raw, err := readStatus(mnt, id)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		os.Stdout.Write(raw)
		return nil
	}
	fmt.Print(formatSessionStatus(st))
	return nil
}

// formatResult renders a result for people. A no-op never reads as a
// success: it says "not compacted" and why. Savings are net of the summary
// (tokens before minus after); the gross middle removed is shown beside.
func formatResult(r compact.Result) string {
	if r.Error != "" {
		return fmt.Sprintf("compaction of %s failed: %s\n", short(r.SourceSessionID), r.Error)
	}
	if !r.Compacted {
		var b strings.Builder
		fmt.Fprintf(&b, "not compacted (%s): %s has %d messages, %d tokens; threshold %d tokens\n",
			r.Reason, short(r.SourceSessionID), r.OriginalMessages, r.OriginalTokens, r.ThresholdTokens)
		switch r.Reason {
		case compact.ReasonThrashing:
			b.WriteString("the last compactions in this lineage each saved under 10% net of their summary; use --force to run anyway\n")
		case compact.ReasonAlreadyCompacted:
			fmt.Fprintf(&b, "already compacted into %s; continue there\n", r.TargetSessionID)
		case compact.ReasonWouldNotShrink:
			fmt.Fprintf(&b, "%s\nno session was created; --force cannot commit a transcript that does not shrink either\n", r.Detail)
		default:
			if r.Detail != "" {
				fmt.Fprintln(&b, r.Detail)
			}
		}
		return b.String()
	}
	pct := 0.0
	if r.OriginalTokens > 0 {
		pct = 100 * float64(r.SavedTokens) / float64(r.OriginalTokens)
	}
	return fmt.Sprintf("compacted %s -> %s: %d -> %d messages, %d -> %d tokens (saved %d tokens net, %.1f%%; %d removed, %d added back as the summary), summary %s by %s\ncontinue in %s\n",
		short(r.SourceSessionID), short(r.TargetSessionID), r.OriginalMessages, r.CompactedMessages, r.OriginalTokens, r.CompactedTokens,
		r.SavedTokens, pct, r.RemovedTokens, r.RemovedTokens-r.SavedTokens, short(r.SummaryID), r.Summarizer, r.TargetSessionID)
}

func compactRun(c *cli.Context) error {
	mnt, id, err := mountSession(c)
	if err != nil {
		return err
	}
	cmd := "compact"
	if c.Bool("force") {
		cmd = "force"
	}
	bar := compactSpinner(mnt, id) // nil unless stderr is a terminal
	werr := writeCtl(mnt, "compact/sessions/"+id+"/ctl", []byte(cmd+"\n"))
	finishSpinner(bar)
	raw, rerr := readCtl(mnt, "compact/sessions/"+id+"/result")
	if werr != nil {
		return cli.Exit(fmt.Sprintf("compaction of %s failed: %v", short(id), werr), 1)
	}
	if rerr != nil {
		return cli.Exit(rerr.Error(), 1)
	}
	if c.Bool("json") {
		os.Stdout.Write(raw)
		return nil
	}
	var r compact.Result
	if err := json.Unmarshal(raw, &r); err != nil {
		return cli.Exit(fmt.Sprintf("result of %s: %v", id, err), 1)
	}
	if r.SourceSessionID != id {
		return cli.Exit(fmt.Sprintf("result of %s names session %s: another request overtook this one", id, r.SourceSessionID), 1)
	}
	fmt.Print(formatResult(r))
	return nil
}

func compactRm(c *cli.Context) error {
	mnt, id, err := mountSession(c)
	if err != nil {
		return err
	}
	if err := writeCtl(mnt, "compact/sessions/"+id+"/ctl", []byte("delete\n")); err != nil {
		return cli.Exit(fmt.Sprintf("deleting %s: %v", short(id), err), 1)
	}
	fmt.Printf("deleted %s and the sessions compacted from it\n", short(id))
	return nil
}

func compactShow(c *cli.Context) error {
	mnt, id, err := mountSession(c)
	if err != nil {
		return err
	}
	dir := "compact/sessions/" + id + "/"
	if c.Bool("messages") {
		raw, err := readCtl(mnt, dir+"messages")
		if err != nil {
			return cli.Exit(err.Error(), 1)
		}
		os.Stdout.Write(raw)
		return nil
	}
	st, _, err := readStatus(mnt, id)
	if err != nil {
		return err
	}
	fmt.Print(formatSessionStatus(st))
	lin, err := readCtl(mnt, dir+"lineage")
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	fmt.Println("\nlineage:")
	for _, line := range bytes.Split(bytes.TrimSpace(lin), []byte("\n")) {
		var e compact.LineageEntry
		if len(line) == 0 || json.Unmarshal(line, &e) != nil {
			continue
		}
		info := ""
		if e.SummaryID != "" {
			info = fmt.Sprintf("  (summary %s saved %d of %d tokens net, %.1f%%)", short(e.SummaryID), e.SavedTokens, e.OriginalTokens, 100*e.SavedRatio)
		}
		fmt.Printf("  %s%s %-8s%s\n", strings.Repeat("  ", e.Depth), short(e.SessionID), e.Relation, info)
	}
	sum, err := readCtl(mnt, dir+"summary")
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	if len(bytes.TrimSpace(sum)) > 0 {
		fmt.Printf("\nsummary:\n%s", sum)
	}
	return nil
}

func compactImport(c *cli.Context) error {
	mnt, err := mountOf(c)
	if err != nil {
		return err
	}
	path := c.Args().First()
	if path == "" {
		return cli.Exit("give the session FILE to import", 2)
	}
	f, err := os.Open(path)
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	defer f.Close()
	format := c.String("format")
	if format == "auto" {
		format = compact.FormatAuto
	}
	im, err := compact.ImportTranscript(f, format)
	if err != nil {
		return cli.Exit(fmt.Sprintf("%s: %v", path, err), 1)
	}
	model := c.String("model")
	if model == "" {
		model = im.Model
	}
	id, err := newSession(mnt, compact.SessionOptions{Model: model, ContextWindow: c.Int("window")})
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for i := range im.Messages {
		if err := enc.Encode(im.Messages[i]); err != nil {
			return cli.Exit(err.Error(), 1)
		}
	}
	n, err := appendMessages(mnt, id, buf.Bytes())
	if err != nil {
		return cli.Exit(fmt.Sprintf("imported %d of %d messages into %s, then: %v", n, len(im.Messages), id, err), 1)
	}
	fmt.Printf("imported %d messages (%s format, %d lines skipped) into %s\n", n, im.Format, im.Skipped, id)
	return nil
}
