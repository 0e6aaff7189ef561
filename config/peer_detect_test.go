package config

import "testing"

// TestPeerDetect: peer detection is on by default (Cache.NoPeerDetect
// false); the user file or --peer-detect=false turns it off; a workspace
// file may turn it on but not off (docs/DESIGN.md#peer-mounts).
func TestPeerDetect(t *testing.T) {
	e := newEnv(t)
	if c := e.mustLoad(); c.Cache.NoPeerDetect {
		t.Fatal("detection off by default")
	}
	if c := e.mustLoad(Flag{Key: "cache.peer_detect", Name: "--peer-detect", Value: false}); !c.Cache.NoPeerDetect {
		t.Fatal("--peer-detect=false left detection on")
	}
	e.write(e.wsFile(), "[cache]\npeer_detect = false\n")
	_, err := e.load()
	mustErr(t, err, "refusing the workspace file", "cache.peer_detect = false would loosen")

	e = newEnv(t)
	e.write(e.userFile(), "[cache]\npeer_detect = false\n")
	if c := e.mustLoad(); !c.Cache.NoPeerDetect {
		t.Fatal("user file peer_detect = false left detection on")
	}
	e.write(e.wsFile(), "[cache]\npeer_detect = true\n")
	if c := e.mustLoad(); c.Cache.NoPeerDetect {
		t.Fatal("workspace file peer_detect = true left detection off")
	}
}
