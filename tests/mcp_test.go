package tests

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rubinofs/rubinofs/daemon"
)

// mcpClient starts `rubinofs mcp` with args through the SDK's own client
// over stdio, as the command prefix runs it (for `rubinofs run --session
// NAME --join --`, or setpriv), and closes it at the test's end.
func mcpClient(t *testing.T, m *mount, opts *mcp.ClientOptions, prefix []string, args ...string) *mcp.ClientSession {
	t.Helper()
	return mcpClientAt(t, m.mnt, m.tmp, opts, prefix, args...)
}

// mcpClientAt is mcpClient for the mount mnt (its working directory and
// RUBINO_MOUNT), with home for the test environment (testEnv).
func mcpClientAt(t *testing.T, mnt, home string, opts *mcp.ClientOptions, prefix []string, args ...string) *mcp.ClientSession {
	t.Helper()
	argv := append(append(slices.Clone(prefix), rubinofsBin(t), "mcp"), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = mnt
	cmd.Env = append(testEnv(home), "RUBINO_MOUNT="+mnt)
	cmd.Stderr = os.Stderr
	c := mcp.NewClient(&mcp.Implementation{Name: "rubinofs-test", Version: "v0"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to rubinofs mcp: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callTool calls tool name with args and returns its text and whether it
// is a tool error; a protocol error fails the test.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: protocol error: %v", name, args, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

// mustTool is callTool that fails the test on a tool error.
func mustTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	text, isErr := callTool(t, cs, name, args)
	if isErr {
		t.Fatalf("%s %v: tool error: %s", name, args, text)
	}
	return text
}

// mustToolError is callTool that fails the test unless the call is a
// tool error whose text matches want.
func mustToolError(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, want string) {
	t.Helper()
	text, isErr := callTool(t, cs, name, args)
	if !isErr || !regexp.MustCompile(want).MatchString(text) {
		t.Fatalf("%s %v: want a tool error matching %q, got isError=%v: %s", name, args, want, isErr, text)
	}
}

var cpIDRE = regexp.MustCompile(`cp[0-9]{6,}`)

// TestMCPJournalTools: an agent's session, through the MCP server alone
// (the SDK's client over stdio): a checkpoint, a shell edit in the same
// session, the changes and diff since, a dry run and a rewind that
// restores the disk, the checkpoints list; every bad input is a tool
// error with a reason, never a protocol error.
func TestMCPJournalTools(t *testing.T) {
	m := newMount(t, map[string]string{"a.txt": "one\n", "b.txt": "bee\n"}, nil)
	if out, err := m.rubinofs("session", "new", "mcpA", "--keep"); err != nil {
		t.Fatalf("session new: %v\n%s", err, out)
	}
	inSession := []string{rubinofsBin(t), "run", "--session", "mcpA", "--join", "--"}
	cs := mcpClient(t, m, nil, inSession)
	sh := func(script string) (string, error) {
		return m.rubinofs("run", "--session", "mcpA", "--join", "--", "/bin/sh", "-c", `cd "$RUBINO_MOUNT" && `+script)
	}

	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if tl.Description == "" || tl.InputSchema == nil {
			t.Errorf("tool %s has no description or input schema", tl.Name)
		}
	}
	for _, want := range []string{"status", "why", "checkpoint", "checkpoints", "changes", "diff", "rewind",
		"task_spawn", "task_list", "task_show", "task_wait", "task_stop", "task_reply", "task_approve", "sessions"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools/list lacks %s: %v", want, names)
		}
	}

	if st := mustTool(t, cs, "status", nil); !strings.Contains(st, "your session: mcpA") || !strings.Contains(st, "guard: enforce") {
		t.Errorf("status does not name the caller's session mcpA:\n%s", st)
	}
	if ss := mustTool(t, cs, "sessions", nil); !strings.Contains(ss, "* mcpA") {
		t.Errorf("sessions does not mark mcpA as the caller's:\n%s", ss)
	}

	cpText := mustTool(t, cs, "checkpoint", map[string]any{"label": "before the edit"})
	cp := cpIDRE.FindString(cpText)
	if cp == "" {
		t.Fatalf("checkpoint gave no id: %q", cpText)
	}
	if out, err := sh("cat a.txt >/dev/null && echo two >> a.txt && echo new > c.txt"); err != nil {
		t.Fatalf("edit in the session: %v\n%s", err, out)
	}
	ch := mustTool(t, cs, "changes", map[string]any{"since": cp})
	if !regexp.MustCompile(`(?m)^M\s+a\.txt`).MatchString(ch) || !regexp.MustCompile(`(?m)^A\s+c\.txt`).MatchString(ch) {
		t.Errorf("changes since %s lacks M a.txt and A c.txt:\n%s", cp, ch)
	}
	if strings.Contains(ch, "b.txt") {
		t.Errorf("changes names b.txt, which the session did not change:\n%s", ch)
	}
	diff := mustTool(t, cs, "diff", map[string]any{"since": cp, "paths": []string{"a.txt"}})
	if !strings.Contains(diff, "+two") || strings.Contains(diff, "c.txt") {
		t.Errorf("diff of a.txt since %s:\n%s", cp, diff)
	}
	if cps := mustTool(t, cs, "checkpoints", nil); !strings.Contains(cps, cp) || !strings.Contains(cps, "before the edit") {
		t.Errorf("checkpoints lacks %s with its label:\n%s", cp, cps)
	}

	plan := mustTool(t, cs, "rewind", map[string]any{"to": cp, "dry_run": true})
	if !strings.Contains(plan, "a.txt") || m.readBacking("a.txt") != "one\ntwo\n" {
		t.Fatalf("dry run: plan %q, a.txt now %q", plan, m.readBacking("a.txt"))
	}
	rep := mustTool(t, cs, "rewind", map[string]any{"to": cp})
	if got := m.readBacking("a.txt"); got != "one\n" {
		t.Errorf("after rewind a.txt = %q, want %q (report: %s)", got, "one\n", rep)
	}
	if _, err := os.Stat(m.backing("c.txt")); !os.IsNotExist(err) {
		t.Errorf("after rewind c.txt still exists (%v); report: %s", err, rep)
	}
	if !regexp.MustCompile(`undo with: the rewind tool, to=cp[0-9]{6}`).MatchString(rep) {
		t.Errorf("the rewind's report does not say how to undo it with the rewind tool:\n%s", rep)
	}

	// A refused write shows in why, with the path.
	if out, err := sh("echo clobber > b.txt"); err == nil {
		t.Fatalf("blind write to b.txt allowed:\n%s", out)
	}
	if why := mustTool(t, cs, "why", nil); !strings.Contains(why, "b.txt") {
		t.Errorf("why does not name b.txt:\n%s", why)
	}

	// Bad input: a tool error with the reason.
	mustToolError(t, cs, "rewind", map[string]any{"to": "yesterday"}, `not a checkpoint id`)
	mustToolError(t, cs, "rewind", map[string]any{}, `"to"|checkpoint`)
	mustToolError(t, cs, "changes", map[string]any{"since": "x"}, `not a checkpoint id`)
	mustToolError(t, cs, "diff", map[string]any{"since": cp, "paths": []string{"/etc/passwd"}}, `.`)
	mustToolError(t, cs, "diff", map[string]any{"since": "cp1"}, `not a checkpoint id`)
	mustToolError(t, cs, "task_spawn", map[string]any{"prompt": " "}, `prompt`)
	mustToolError(t, cs, "task_spawn", map[string]any{"prompt": "true", "subagent": "no-such-subagent"}, `no-such-subagent`)
	mustToolError(t, cs, "task_stop", map[string]any{"id": "no-such-task"}, `no-such-task`)
	mustToolError(t, cs, "task_wait", map[string]any{"id": "no-such-task", "timeout_s": 5}, `no-such-task`)
	mustToolError(t, cs, "task_show", map[string]any{"id": "no-such-task"}, `no-such-task`)
	mustToolError(t, cs, "task_show", map[string]any{"id": ""}, `task id`)
	mustToolError(t, cs, "task_approve", map[string]any{"id": "t1", "decision": "maybe"}, `yes or no`)
	mustToolError(t, cs, "task_reply", map[string]any{"id": "t1"}, `"text"|answer`)
	mustToolError(t, cs, "task_wait", map[string]any{"id": "t1", "timeout_s": -1}, `timeout_s`)
	// The SDK validates the arguments against the schema: a wrong type is
	// a tool error naming the field.
	mustToolError(t, cs, "rewind", map[string]any{"to": 7}, `to`)
}

// TestMCPTasks: task_spawn, task_list, task_show, task_wait (with
// progress notifications while it waits), task_stop, through the server.
func TestMCPTasks(t *testing.T) {
	m := newMount(t, map[string]string{"f": "x\n"}, nil)
	var mu sync.Mutex
	var progress []string
	opts := &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		progress = append(progress, req.Params.Message)
		mu.Unlock()
	}}
	cs := mcpClient(t, m, opts, nil)

	id := strings.TrimSpace(mustTool(t, cs, "task_spawn", map[string]any{"prompt": "echo hello-from-task"}))
	if id == "" || strings.ContainsAny(id, " \n") {
		t.Fatalf("task_spawn gave %q", id)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{
		Name: "task_wait", Arguments: map[string]any{"id": id, "timeout_s": 120},
		Meta: mcp.Meta{"progressToken": "w1"},
	})
	if err != nil || res.IsError {
		t.Fatalf("task_wait: %v %+v", err, res)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if !strings.Contains(text, "done") || !strings.Contains(text, "hello-from-task") {
		t.Errorf("task_wait's answer lacks the status done and the output:\n%s", text)
	}
	if ls := mustTool(t, cs, "task_list", nil); !strings.Contains(ls, id) {
		t.Errorf("task_list lacks %s:\n%s", id, ls)
	}

	long := strings.TrimSpace(mustTool(t, cs, "task_spawn", map[string]any{"prompt": "sleep 300"}))
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{
		Name: "task_wait", Arguments: map[string]any{"id": long, "timeout_s": 1},
		Meta: mcp.Meta{"progressToken": "w2"},
	})
	if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "still running") {
		t.Fatalf("task_wait with a 1 s timeout on a running task: %v %+v", err, res)
	}
	mu.Lock()
	got := slices.Clone(progress)
	mu.Unlock()
	if !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, long) && strings.Contains(s, "running") }) {
		t.Errorf("no progress notification named %s running: %q", long, got)
	}
	mustTool(t, cs, "task_stop", map[string]any{"id": long})
	if st := mustTool(t, cs, "task_wait", map[string]any{"id": long, "timeout_s": 120}); !strings.Contains(st, "stopped") {
		t.Errorf("after task_stop the task is not stopped:\n%s", st)
	}
}

// TestMCPToolsAllowList: --tools serves only the tools named (and their
// resources); a name that is no tool is a usage error naming the tools.
func TestMCPToolsAllowList(t *testing.T) {
	m := newMount(t, map[string]string{"f": "x\n"}, nil)
	cs := mcpClient(t, m, nil, nil, "--tools", "status,why")
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"status", "why"}) {
		t.Errorf("--tools status,why serves %v", names)
	}
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "rewind", Arguments: map[string]any{"to": "cp000000"}}); err == nil {
		t.Errorf("rewind answered although --tools left it out")
	}
	rs, err := cs.ListResources(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, r := range rs.Resources {
		uris = append(uris, r.URI)
	}
	slices.Sort(uris)
	if !slices.Equal(uris, []string{"rubino://status", "rubino://why"}) {
		t.Errorf("resources with --tools status,why: %v", uris)
	}
	rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "rubino://status"})
	if err != nil || len(rr.Contents) != 1 || !strings.Contains(rr.Contents[0].Text, "mode") {
		t.Errorf("read rubino://status: %v %+v", err, rr)
	}

	out, err := m.rubinofs("mcp", "--tools", "status,bogus")
	if code := exitCode(err); code != 2 || !strings.Contains(out, `no tool "bogus"`) || !strings.Contains(out, "checkpoint") {
		t.Errorf("--tools status,bogus: exit %d: %s", code, out)
	}
}

// TestMCPSecondUID: the server run by another uid (65534) acts as that
// uid's caller: it does not see the mount owner's session or tasks.
func TestMCPSecondUID(t *testing.T) {
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv (util-linux) is needed to act as another uid")
	}
	m := newMount(t, map[string]string{"f": "x\n"}, func(c *daemon.Config) { c.Options = append(c.Options, "allow_other") })
	openUp(t, m.tmp)
	if out, err := m.rubinofs("session", "new", "rootsess", "--keep"); err != nil {
		t.Fatalf("session new: %v\n%s", err, out)
	}
	root := mcpClient(t, m, nil, nil)
	id := strings.TrimSpace(mustTool(t, root, "task_spawn", map[string]any{"prompt": "sleep 300"}))
	t.Cleanup(func() { callTool(t, root, "task_stop", map[string]any{"id": id}) })

	bin := sharedBin(t)
	nobody := []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"}
	argv := append(slices.Clone(nobody), bin, "mcp", "--mount", m.mnt)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = "/"
	cmd.Env = append(testEnv(m.tmp), "RUBINO_MOUNT="+m.mnt)
	cmd.Stderr = os.Stderr
	c := mcp.NewClient(&mcp.Implementation{Name: "nobody", Version: "v0"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect as 65534: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	if ss := mustTool(t, cs, "sessions", nil); strings.Contains(ss, "rootsess") {
		t.Errorf("uid 65534 sees root's session:\n%s", ss)
	}
	if ls, _ := callTool(t, cs, "task_list", nil); strings.Contains(ls, id) {
		t.Errorf("uid 65534 lists root's task %s:\n%s", id, ls)
	}
	mustToolError(t, cs, "task_stop", map[string]any{"id": id}, id)
	mustToolError(t, cs, "task_show", map[string]any{"id": id}, id)
	callTool(t, cs, "rewind", map[string]any{"to": "cp000000", "force": true})
	if got := m.readBacking("f"); got != "x\n" {
		t.Errorf("f changed to %q", got)
	}
}

// TestMCPOutsideAMount: started outside any mount (no --mount, no
// $RUBINO_MOUNT), the server still answers: every tool is a tool error
// saying it is not inside a rubinofs mount. With --mount naming a
// directory that is no mount, it does not start.
func TestMCPOutsideAMount(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(rubinofsBin(t), "mcp")
	cmd.Dir = dir
	cmd.Env = testEnv(dir)
	cmd.Stderr = os.Stderr
	c := mcp.NewClient(&mcp.Implementation{Name: "outside", Version: "v0"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	for _, tool := range []string{"status", "checkpoint", "sessions", "task_list"} {
		mustToolError(t, cs, tool, nil, `not inside a rubinofs mount`)
	}
	out, err := runCLI(t, dir, testEnv(dir), "mcp", "--mount", dir)
	if exitCode(err) != 1 || !strings.Contains(out, "is not a rubinofs mount") {
		t.Errorf("mcp --mount of a plain directory: exit %d: %s", exitCode(err), out)
	}
}

// TestMCPRead: the read tool through the MCP server, in a session: the
// whole file numbered, the same window again "unchanged", another window
// its bytes; a file over the limit an outline whose elided range read
// with offset and limit gives the bytes (twice: a drill-in is never
// "unchanged"); a write by the session after the read is allowed; bad
// input a tool error.
func TestMCPRead(t *testing.T) {
	big := strings.Join(bigSource(150, 20), "\n") + "\n"
	m := newMount(t, map[string]string{"f.txt": "alpha\nbeta\ngamma\n", "big.go": big}, nil)
	if out, err := m.rubinofs("session", "new", "mcpR", "--keep"); err != nil {
		t.Fatalf("session new: %v\n%s", err, out)
	}
	cs := mcpClient(t, m, nil, []string{rubinofsBin(t), "run", "--session", "mcpR", "--join", "--"})

	whole := mustTool(t, cs, "read", map[string]any{"path": "f.txt"})
	if !strings.Contains(whole, "     2\tbeta\n") {
		t.Fatalf("read f.txt:\n%s", whole)
	}
	if again := mustTool(t, cs, "read", map[string]any{"path": "f.txt"}); !strings.Contains(again, "unchanged since your last read") {
		t.Errorf("the same read again:\n%s", again)
	}
	if win := mustTool(t, cs, "read", map[string]any{"path": "f.txt", "offset": 3, "limit": 1}); !strings.Contains(win, "gamma") || strings.Contains(win, "beta") {
		t.Errorf("lines 3-3:\n%s", win)
	}
	out := mustTool(t, cs, "read", map[string]any{"path": "big.go"})
	ms := elidedRE.FindStringSubmatch(out)
	if ms == nil || strings.Contains(out, "step(0, 1)") {
		t.Fatalf("big.go read whole is no outline:\n%.1500s", out)
	}
	first, _ := strconv.Atoi(ms[1])
	for i := 0; i < 2; i++ {
		drill := mustTool(t, cs, "read", map[string]any{"path": "big.go", "offset": first, "limit": 2})
		if !strings.Contains(drill, "step(0, 1)") {
			t.Fatalf("drill-in %d into lines %d-%d:\n%s", i, first, first+1, drill)
		}
	}
	if out, err := m.rubinofs("run", "--session", "mcpR", "--join", "--", "/bin/sh", "-c", `echo delta >> "$RUBINO_MOUNT/f.txt"`); err != nil {
		t.Fatalf("the session's write after its read through the read tool: %v\n%s", err, out)
	}
	mustToolError(t, cs, "read", map[string]any{"path": "no-such-file"}, `no-such-file`)
	mustToolError(t, cs, "read", map[string]any{"path": "f.txt", "offset": -1}, `offset`)
	mustToolError(t, cs, "read", map[string]any{"path": "/etc/hostname"}, `.`)
}
