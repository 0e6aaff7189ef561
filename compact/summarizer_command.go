package compact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultSummarizerTimeout bounds one call of the command and openai
// backends when the config gives no timeout_seconds.
const DefaultSummarizerTimeout = 120 * time.Second

// maxSummaryBytes bounds what a backend may return.
const maxSummaryBytes = 1 << 20

// ErrSummarizerTimeout is wrapped by the command and openai backends when
// their call exceeds its timeout (the control file reports ETIMEDOUT).
var ErrSummarizerTimeout = errors.New("summarizer timed out")

func timeoutOf(cfg SummarizerConfig) time.Duration {
	if cfg.TimeoutSeconds > 0 {
		return time.Duration(cfg.TimeoutSeconds) * time.Second
	}
	return DefaultSummarizerTimeout
}

// summarizerTimeout is the bound of one backend call: d, or
// DefaultSummarizerTimeout when d is not positive.
func summarizerTimeout(d time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return DefaultSummarizerTimeout
}

// CommandSummarizer runs a program per summary: the prompt (SystemPrompt, a
// blank line, BuildPrompt) on its stdin, the summary on its stdout (at most
// 1 MiB, trimmed; empty is an error). It runs without a shell, in its own
// process group, with the daemon's environment plus RUBINOFS_SESSION_ID,
// RUBINOFS_MODEL and RUBINOFS_MAX_TOKENS; on timeout or cancellation the
// whole group is killed. A non-zero exit is an error quoting the end of its
// stderr. Safe for concurrent use (one process per call).
type CommandSummarizer struct {
	Argv    []string
	Timeout time.Duration // 0: DefaultSummarizerTimeout
}

// Name returns "command".
func (*CommandSummarizer) Name() string { return "command" }

// cappedBuffer keeps at most max bytes and remembers that it overflowed.
type cappedBuffer struct {
	buf      bytes.Buffer
	max      int
	overflow bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); room < len(p) {
		b.overflow = true
		if room > 0 {
			b.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return b.buf.Write(p)
}

// Summarize runs the command.
func (c *CommandSummarizer) Summarize(ctx context.Context, req SummaryRequest) (string, error) {
	timeout := summarizerTimeout(c.Timeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Argv[0], c.Argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	cmd.Env = append(os.Environ(),
		"RUBINOFS_SESSION_ID="+req.SessionID,
		"RUBINOFS_MODEL="+req.Model,
		"RUBINOFS_MAX_TOKENS="+strconv.Itoa(req.MaxTokens))
	cmd.Stdin = strings.NewReader(SystemPrompt + "\n\n" + BuildPrompt(req))
	stdout := &cappedBuffer{max: maxSummaryBytes}
	stderr := &cappedBuffer{max: 64 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return "", fmt.Errorf("%w: command %s ran longer than %v", ErrSummarizerTimeout, c.Argv[0], timeout)
		}
		return "", fmt.Errorf("summarizer command %s: %w", c.Argv[0], ctx.Err())
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.buf.String())
		if len(msg) > 400 {
			msg = "..." + msg[len(msg)-400:]
		}
		if msg != "" {
			return "", fmt.Errorf("summarizer command %s: %v: %s", c.Argv[0], err, oneLine(msg, 420))
		}
		return "", fmt.Errorf("summarizer command %s: %v", c.Argv[0], err)
	}
	if stdout.overflow {
		return "", fmt.Errorf("summarizer command %s: output exceeds %d bytes", c.Argv[0], maxSummaryBytes)
	}
	out := strings.TrimSpace(stdout.buf.String())
	if out == "" {
		return "", fmt.Errorf("summarizer command %s printed no summary", c.Argv[0])
	}
	return out, nil
}
