package tests

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/rubinofs/rubinofs/compact"
	"github.com/rubinofs/rubinofs/daemon"
)

// compactBoundsMount mounts with allow_other (so uid 65534 reaches the
// mount) and a compaction config with a 1 MiB transcript limit and a cap of
// maxPerUID transcripts per uid.
func compactBoundsMount(t *testing.T, maxPerUID int) *mount {
	cfg := compact.Config{MaxTranscriptBytes: compact.MinTranscriptBytes, MaxTranscriptsPerUID: maxPerUID}.WithDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return newMount(t, nil, func(c *daemon.Config) {
		c.Options = append(c.Options, "allow_other")
		c.Compact = &cfg
	})
}

// newTranscript creates a transcript as prefix's user (asNobody or "")
// and returns its id.
func (m *mount) newTranscript(prefix string) string {
	m.t.Helper()
	id := strings.TrimSpace(m.mustSh(prefix + `sh -c 'exec 3<>.rubino/compact/new; printf "{\"context_window\":4000}\n" >&3; cat <&3'`))
	if len(id) != compact.IDLen {
		m.t.Fatalf("new returned %q", id)
	}
	return id
}

// transcriptLines renders n alternating user/assistant messages whose
// contents are size bytes each, as JSON lines.
func transcriptLines(n, size int) []byte {
	var b strings.Builder
	for i := 0; i < n; i++ {
		role := compact.RoleUser
		if i%2 == 1 {
			role = compact.RoleAssistant
		}
		word := fmt.Sprintf("turn %d edits file%d.go. ", i, i)
		content := strings.Repeat(word, size/len(word)+1)[:size]
		line, _ := json.Marshal(map[string]string{"role": role, "content": content})
		b.Write(line)
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// TestCompactTranscriptOwnership: a transcript belongs to the uid that
// created it. As uid 65534, root's transcript is not listed, cannot be
// resolved, read, appended to, compacted or deleted, and stays as it was;
// uid 65534 uses its own transcript fully and sees only it; root outside
// every session (the mount owner) sees both.
func TestCompactTranscriptOwnership(t *testing.T) {
	m := compactBoundsMount(t, 0)
	const dir = ".rubino/compact"
	rootID := m.newTranscript("")
	rdir := dir + "/sessions/" + rootID
	m.mustSh("cat " + shq(m.writeTmp("root.jsonl", transcriptLines(12, 2000))) + " >> " + rdir + "/messages")
	before := m.mustSh("cat " + rdir + "/messages")

	// Not listed, not resolvable, not in the directory.
	if out := m.mustSh(asNobody + "cat " + dir + "/list"); strings.Contains(out, rootID) {
		t.Errorf("uid 65534 lists root's transcript:\n%s", out)
	}
	if out := m.mustSh(asNobody + "ls " + dir + "/sessions"); strings.Contains(out, rootID) {
		t.Errorf("uid 65534 sees root's transcript in sessions/:\n%s", out)
	}
	if out, err := m.sh(asNobody + `sh -c 'exec 3<>` + dir + `/resolve; printf ` + rootID[:8] + ` >&3; cat <&3'`); err == nil && strings.Contains(out, rootID) {
		t.Errorf("uid 65534 resolves root's transcript: %q", out)
	}
	// Not readable, not appendable, not compactable, not deletable, by the
	// full id (the kernel has root's lookup cached) and by a prefix.
	for _, name := range []string{rootID, rootID[:8]} {
		sd := dir + "/sessions/" + name
		for _, f := range []string{"messages", "status", "summary", "lineage", "result"} {
			if out, err := m.sh(asNobody + "cat " + sd + "/" + f); err == nil {
				t.Errorf("uid 65534 reads root's %s/%s:\n%.200s", name, f, out)
			}
		}
		if out, err := m.sh(asNobody + `sh -c 'echo "{\"role\":\"user\",\"content\":\"injected\"}" >> ` + sd + `/messages'`); err == nil {
			t.Errorf("uid 65534 appends to root's transcript %s: %q", name, out)
		}
		for _, cmd := range []string{"force", "compact", "delete"} {
			if out, err := m.sh(asNobody + `sh -c 'echo ` + cmd + ` > ` + sd + `/ctl'`); err == nil {
				t.Errorf("uid 65534 writes %s to root's %s/ctl: %q", cmd, name, out)
			}
		}
	}
	if after := m.mustSh("cat " + rdir + "/messages"); after != before {
		t.Fatalf("root's transcript changed under uid 65534 (%d -> %d bytes)", len(before), len(after))
	}
	var st compact.Status
	m.jsonFile(rdir+"/status", &st)
	if len(st.CompactedInto) != 0 {
		t.Fatalf("root's transcript was compacted by uid 65534: %+v", st)
	}

	// uid 65534 uses its own transcript, and sees only it.
	nbID := m.newTranscript(asNobody)
	ndir := dir + "/sessions/" + nbID
	// (The test's temporary directory is root's: root reads the file, uid
	// 65534 writes it.)
	m.mustSh("cat " + shq(m.writeTmp("nb.jsonl", transcriptLines(12, 2000))) + " | " + asNobody + "sh -c 'cat >> " + ndir + "/messages'")
	if out := m.mustSh(asNobody + "cat " + ndir + "/messages"); strings.Count(out, "\n") != 12 {
		t.Fatalf("uid 65534 reads back its transcript: %d lines", strings.Count(out, "\n"))
	}
	m.mustSh(asNobody + "sh -c 'echo force > " + ndir + "/ctl'")
	var res compact.Result
	if err := json.Unmarshal([]byte(m.mustSh(asNobody+"cat "+ndir+"/result")), &res); err != nil || !res.Compacted {
		t.Fatalf("uid 65534 compacts its transcript: %v %+v", err, res)
	}
	list := m.mustSh(asNobody + "cat " + dir + "/list")
	if !strings.Contains(list, nbID) || !strings.Contains(list, res.TargetSessionID) || strings.Contains(list, rootID) {
		t.Fatalf("uid 65534's list (want its transcript and its child only):\n%s", list)
	}
	if !strings.Contains(list, `"owner":65534`) {
		t.Errorf("list does not name the owner:\n%s", list)
	}
	// The mount owner outside every session sees and administers both.
	all := m.mustSh("cat " + dir + "/list")
	if !strings.Contains(all, rootID) || !strings.Contains(all, nbID) {
		t.Fatalf("root's list:\n%s", all)
	}
	m.mustSh("cat " + ndir + "/status >/dev/null")
	// uid 65534 deletes its transcript and the child compacted from it.
	m.mustSh(asNobody + "sh -c 'echo delete > " + ndir + "/ctl'")
	if out := m.mustSh("cat " + dir + "/list"); strings.Contains(out, nbID) || strings.Contains(out, res.TargetSessionID) || !strings.Contains(out, rootID) {
		t.Fatalf("after uid 65534 deleted its transcript:\n%s", out)
	}
}

// TestCompactTranscriptLimits: an append that would take a transcript past
// compact.max_transcript_bytes fails with EFBIG, the reason names the
// option, and the transcript's bytes are unchanged; the owner can still
// read, compact and then continue in the child. A uid past
// compact.max_transcripts_per_uid gets EAGAIN with the reason, and other
// uids are not affected.
func TestCompactTranscriptLimits(t *testing.T) {
	m := compactBoundsMount(t, 3)
	const dir = ".rubino/compact"
	id := m.newTranscript("")
	sdir := dir + "/sessions/" + id
	// 9 messages of 100,000 bytes: 900,045 bytes of the 1 MiB limit.
	m.mustSh("cat " + shq(m.writeTmp("fill.jsonl", transcriptLines(9, 100_000))) + " >> " + sdir + "/messages")
	before := m.mustSh("md5sum < " + sdir + "/messages")
	over := m.writeTmp("over.jsonl", transcriptLines(1, 200_000))
	out, err := m.sh(`exec 3<>` + sdir + `/messages; cat ` + shq(over) + ` >&3 || cat <&3`)
	if err != nil || !strings.Contains(out, "error: ") || !strings.Contains(out, "compact.max_transcript_bytes") {
		t.Fatalf("append past the limit: %v %q", err, out)
	}
	if out, err := m.sh("cat " + shq(over) + " >> " + sdir + "/messages"); err == nil || !strings.Contains(out, "File too large") {
		t.Fatalf("append past the limit: want EFBIG, got %v %q", err, out)
	}
	if after := m.mustSh("md5sum < " + sdir + "/messages"); after != before {
		t.Fatalf("the refused append changed the transcript")
	}
	var st compact.Status
	m.jsonFile(sdir+"/status", &st)
	if st.Messages != 9 {
		t.Fatalf("messages after the refused append: %d", st.Messages)
	}
	// The owner compacts it and continues in the child.
	m.mustSh("echo force > " + sdir + "/ctl")
	var res compact.Result
	m.jsonFile(sdir+"/result", &res)
	if !res.Compacted {
		t.Fatalf("force compaction at the limit: %+v", res)
	}
	m.mustSh("cat " + shq(over) + " >> " + dir + "/sessions/" + res.TargetSessionID + "/messages")

	// The per-uid cap: root holds 2 (the source and its child); uid 65534
	// creates 3, then gets EAGAIN with the reason.
	for i := 0; i < 3; i++ {
		m.newTranscript(asNobody)
	}
	out, _ = m.sh(asNobody + `sh -c 'exec 3<>` + dir + `/new; printf "\n" >&3 || cat <&3'`)
	if !strings.Contains(out, "error: ") || !strings.Contains(out, "compact.max_transcripts_per_uid") {
		t.Fatalf("a transcript past the cap: %q", out)
	}
	// (dd, not the shell's printf, which reports any write error as EIO.)
	if out, err := m.sh(asNobody + `sh -c 'printf "\n" | dd of=` + dir + `/new conv=notrunc status=none'`); err == nil || !strings.Contains(out, "Resource temporarily unavailable") {
		t.Fatalf("past the cap: want EAGAIN, got %v %q", err, out)
	}
	m.newTranscript("") // root's third
}
