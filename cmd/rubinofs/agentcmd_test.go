package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLiveOf: only sessions whose info says live count against the
// unmount (running roots, tasks, kept sessions), each named with its
// command; ended and default sessions do not.
func TestLiveOf(t *testing.T) {
	got := liveOf(map[string][]byte{
		"default":      []byte(`{"command": "(callers of uid 0 under no session)", "name": "default", "root_pid": 0}`),
		"s-ended":      []byte(`{"command": "make", "live": false}`),
		"s-running":    []byte(`{"command": "sleep 100", "live": true}`),
		"task-3":       []byte(`{"command": "sh -c build", "live": true}`),
		"kept":         []byte(`{"command": "", "keep": true, "live": true}`),
		"garbled-info": []byte(`{`),
	})
	want := []string{"kept (no command: kept)", "s-running (sleep 100)", "task-3 (sh -c build)"}
	if !slices.Equal(got, want) {
		t.Errorf("liveOf = %q, want %q", got, want)
	}
}

// TestAgentBinary: --agent-bin takes a path or a name on PATH; without
// it a missing agent is an error that says how to install it.
func TestAgentBinary(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "claude")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	kind := agentKinds["claude-code"]
	if p, err := agentBinary("", kind); err != nil || p != fake {
		t.Errorf("claude on PATH: %q, %v; want %s", p, err, fake)
	}
	if p, err := agentBinary(fake, agentKinds["codex"]); err != nil || p != fake {
		t.Errorf("--agent-bin %s: %q, %v", fake, p, err)
	}
	if _, err := agentBinary("", agentKinds["codex"]); err == nil || !strings.Contains(err.Error(), "codex not found on PATH") || !strings.Contains(err.Error(), "npm install -g @openai/codex") {
		t.Errorf("codex missing: %v, want how to install it", err)
	}
	if _, err := agentBinary(filepath.Join(dir, "nope"), kind); err == nil || !strings.Contains(err.Error(), "--agent-bin") {
		t.Errorf("--agent-bin of a missing file: %v", err)
	}
}

// TestMountAround: the mount root is the directory or the nearest
// ancestor holding .rubino/status; a tree without one is no mount, even
// with $RUBINO_MOUNT naming one elsewhere.
func TestMountAround(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "m", ".rubino"), 0o755)
	os.WriteFile(filepath.Join(root, "m", ".rubino", "status"), []byte("{}"), 0o644)
	os.MkdirAll(filepath.Join(root, "m", "a", "b"), 0o755)
	os.MkdirAll(filepath.Join(root, "plain"), 0o755)
	t.Setenv("RUBINO_MOUNT", filepath.Join(root, "m"))
	if got, ok := mountAround(filepath.Join(root, "m", "a", "b")); !ok || got != filepath.Join(root, "m") {
		t.Errorf("mountAround(m/a/b) = %q, %v", got, ok)
	}
	if got, ok := mountAround(filepath.Join(root, "plain")); ok {
		t.Errorf("mountAround(plain) = %q, want no mount", got)
	}
}
