package main

// The MCP server's waiting tool and read-only resources
// (docs/DESIGN.md#mcp-server).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rubinofs/rubinofs/tasks"
)

// taskWaitDefault and taskWaitMax bound task_wait's timeout_s, seconds.
const (
	taskWaitDefault = 60
	taskWaitMax     = 3600
)

// taskWaitPoll is how often task_wait reads the task's status file, and
// taskWaitProgress how often at most it reports progress while the
// status stays the same.
const (
	taskWaitPoll     = 250 * time.Millisecond
	taskWaitProgress = 5 * time.Second
)

type taskWaitInput struct {
	ID       string `json:"id" jsonschema:"the task id"`
	TimeoutS int    `json:"timeout_s,omitempty" jsonschema:"seconds to wait at most (default 60, at most 3600; 0 with the field given: look once)"`
}

// addTaskWait adds task_wait: it returns task_show's text once the task
// is finished, or waits on a question or an approval (which the caller
// must answer with task_reply or task_approve), or when timeout_s has
// passed (then saying it is still running). It reads the task's status
// file every taskWaitPoll and, when the client gave a progress token,
// sends a progress notification at each change of status and at least
// every taskWaitProgress. Cancelling the call ends the wait; the task
// goes on.
func addTaskWait(s *mcp.Server, name string) {
	mcp.AddTool(s, &mcp.Tool{Name: name, Description: "Wait until a task is finished, or needs your answer or " +
		"approval, or timeout_s passes; return its state and result as task_show does. Reports progress while it waits."},
		func(ctx context.Context, req *mcp.CallToolRequest, in taskWaitInput) (*mcp.CallToolResult, any, error) {
			if err := needID(in.ID); err != nil {
				return nil, nil, err
			}
			timeout := taskWaitDefault
			if req.Params != nil && strings.Contains(string(req.Params.Arguments), `"timeout_s"`) {
				timeout = in.TimeoutS
			}
			if timeout < 0 || timeout > taskWaitMax {
				return nil, nil, fmt.Errorf("timeout_s must be 0 to %d seconds, not %d", taskWaitMax, timeout)
			}
			mnt, err := findMount(os.Getenv("RUBINO_MOUNT"))
			if err != nil {
				return nil, nil, err
			}
			var token any
			if req.Params != nil {
				token = req.Params.GetProgressToken()
			}
			start := time.Now()
			deadline := start.Add(time.Duration(timeout) * time.Second)
			tick := time.NewTicker(taskWaitPoll)
			defer tick.Stop()
			last, lastAt := tasks.Status(""), time.Time{}
			for {
				raw, err := readCtl(mnt, "agents/"+in.ID+"/status")
				if err != nil {
					return nil, nil, fmt.Errorf("task %s: %v (task_list lists the tasks you may see)", in.ID, err)
				}
				st := tasks.Status(strings.TrimSpace(string(raw)))
				parked := st == tasks.StatusNeedsApproval || st == tasks.StatusBlockedOnHuman
				if st.Terminal() || parked || !time.Now().Before(deadline) {
					text, err := cliRun(ctx, "agents", "show", "--", in.ID)
					if err != nil {
						return nil, nil, err
					}
					switch {
					case parked:
						text = fmt.Sprintf("task %s waits on you (%s): answer with task_reply or task_approve.\n\n", in.ID, st) + text
					case !st.Terminal():
						text = fmt.Sprintf("task %s is still %s after %ds: task_wait again, or task_stop.\n\n", in.ID, st, timeout) + text
					}
					return textResult(text), nil, nil
				}
				if token != nil && (st != last || time.Since(lastAt) >= taskWaitProgress) {
					last, lastAt = st, time.Now()
					req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
						ProgressToken: token,
						Progress:      time.Since(start).Seconds(),
						Total:         float64(timeout),
						Message:       fmt.Sprintf("task %s: %s", in.ID, st),
					})
				}
				select {
				case <-ctx.Done():
					return nil, nil, errors.New("task_wait cancelled; the task goes on")
				case <-tick.C:
				}
			}
		})
}

// mcpResources are the read-only views, each shown only when the tool of
// the same content is served (--tools).
var mcpResources = []struct {
	uri, name, tool, desc string
	args                  []string
}{
	{"rubino://status", "status", "status", "The mount's state: guard mode, your session, counts.", []string{"status"}},
	{"rubino://why", "why", "why", "Your session's recent refused writes and what to do.", []string{"denials"}},
	{"rubino://changes", "changes", "changes", "The paths your session changed since it started.", []string{"changes"}},
}

// addMCPResources adds the resources whose tool allow admits (nil: all).
func addMCPResources(s *mcp.Server, allow map[string]bool) {
	for _, r := range mcpResources {
		if allow != nil && !allow[r.tool] {
			continue
		}
		uri, args := r.uri, r.args
		s.AddResource(&mcp.Resource{URI: uri, Name: r.name, Description: r.desc, MIMEType: "text/plain"},
			func(ctx context.Context, _ *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				text, err := cliRun(ctx, args...)
				if err != nil {
					text = "error: " + err.Error()
				}
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: text}}}, nil
			})
	}
}
