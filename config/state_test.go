package config

import (
	"testing"
	"time"
)

// TestStateRetentionKey: state.retention defaults to 30 days, a user file
// and --state-retention set it (0: never at mount), a negative one is out
// of range, and a workspace file may not set it.
func TestStateRetentionKey(t *testing.T) {
	e := newEnv(t)
	if c := e.mustLoad(); c.State.Retention != 30*24*time.Hour {
		t.Fatalf("default state.retention %v, want 720h", c.State.Retention)
	}
	e.write(e.userFile(), "[state]\nretention = \"0s\"\n")
	if c := e.mustLoad(); c.State.Retention != 0 {
		t.Fatalf("state.retention from the user file: %v, want 0", c.State.Retention)
	}
	if c := e.mustLoad(Flag{Key: "state.retention", Name: "--state-retention", Value: time.Hour}); c.State.Retention != time.Hour {
		t.Fatalf("state.retention from --state-retention: %v, want 1h", c.State.Retention)
	}
	e = newEnv(t)
	e.write(e.userFile(), "[state]\nretention = \"-1h\"\n")
	_, err := e.load()
	mustErr(t, err, e.userFile()+":2: state.retention: -1h0m0s out of range")
	e = newEnv(t)
	e.write(e.wsFile(), "[state]\nretention = \"1s\"\n")
	_, err = e.load()
	mustErr(t, err, "refusing the workspace file", ":2: state.retention may not be set in a workspace file")
}
