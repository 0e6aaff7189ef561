package guard

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/rubinofs/rubinofs/sessions"
)

// savedState is the JSON form of the guard's read state (Save, Load).
type savedState struct {
	Version  int                      `json:"version"` // 1
	Saved    time.Time                `json:"saved"`
	Sessions map[string][]savedRecord `json:"sessions"`
	Roots    []sessions.Info          `json:"roots,omitempty"`
}

// savedRecord is one saved read record. A path that is not valid UTF-8
// (a Linux name is any bytes but '/' and NUL) is also kept in PathX, its
// bytes in hex, since a JSON string turns each bad byte into U+FFFD and
// Load would then find another file or none.
type savedRecord struct {
	Path    string `json:"path"`
	PathX   string `json:"path_x,omitempty"`
	Ino     uint64 `json:"ino"`
	Hash    string `json:"hash"`
	MtimeNs int64  `json:"mtime_ns"`
	Size    int64  `json:"size"`
	Own     bool   `json:"own"`
}

// Save writes every session's records (and the given live session roots)
// as JSON, so a restarted daemon can keep them (Load). Records made stale by
// another session's write are not saved. Concurrency: a snapshot; safe
// while the guard is in use.
func (g *Guard) Save(w io.Writer, roots []sessions.Info) error {
	head, err := json.Marshal(struct {
		Version int             `json:"version"`
		Saved   time.Time       `json:"saved"`
		Roots   []sessions.Info `json:"roots,omitempty"`
	}{1, g.now().UTC(), roots})
	if err != nil {
		return err
	}
	g.mu.Lock()
	names := make([]string, 0, len(g.sessions))
	trackers := make(map[string]*Tracker, len(g.sessions))
	for name, t := range g.sessions {
		names = append(names, name)
		trackers[name] = t
	}
	g.mu.Unlock()
	sort.Strings(names)
	// Streamed, one record at a time: the state of 100,000 read files is
	// never a second time in memory as one JSON document (savedState is
	// the shape Load reads).
	ew := &errWriter{w: w}
	ew.write(head[:len(head)-1])
	ew.write([]byte(`,"sessions":{`))
	first := true
	for _, name := range names {
		t := trackers[name]
		t.settlePending() // a record is saved with its hash (docs/DESIGN.md#lazy-hash)
		n := 0
		var merr error
		t.eachRecord(func(id FileID, r record) {
			if r.foreign || r.hash.IsZero() || merr != nil {
				return
			}
			if n == 0 {
				if !first {
					ew.write([]byte(","))
				}
				first = false
				k, _ := json.Marshal(name)
				ew.write(k)
				ew.write([]byte(":[\n"))
			} else {
				ew.write([]byte(",\n"))
			}
			n++
			sr := savedRecord{Path: r.path, Ino: id.Ino,
				Hash: r.hash.String(), MtimeNs: r.mtimeNs, Size: r.size, Own: r.written}
			if !utf8.ValidString(r.path) {
				sr.PathX = hex.EncodeToString([]byte(r.path))
			}
			b, err := json.Marshal(sr)
			if err != nil {
				merr = err
				return
			}
			ew.write(b)
		})
		if merr != nil {
			return merr
		}
		if n > 0 {
			ew.write([]byte("]"))
		}
	}
	ew.write([]byte("}}\n"))
	return ew.err
}

// errWriter keeps the first error of a series of writes.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) write(b []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(b)
	}
}

// Load restores records saved by Save. Each record is revalidated: its
// path must still name the same inode and the content must still hash as
// saved; anything else is dropped (the session reads again). It returns the
// saved session roots (the caller re-registers those still alive) and how
// many records were kept and dropped. Errors: malformed JSON or an unknown
// version; nothing is loaded then.
func (g *Guard) Load(r io.Reader, lookup func(path string) (Target, error)) (roots []sessions.Info, kept, dropped int, err error) {
	var st savedState
	if err := json.NewDecoder(r).Decode(&st); err != nil {
		return nil, 0, 0, fmt.Errorf("read state: %w", err)
	}
	if st.Version != 1 {
		return nil, 0, 0, fmt.Errorf("read state: unknown version %d", st.Version)
	}
	for session, recs := range st.Sessions {
		for _, rec := range recs {
			if rec.PathX != "" {
				if raw, err := hex.DecodeString(rec.PathX); err == nil {
					rec.Path = string(raw)
				}
			}
			b, err := hex.DecodeString(rec.Hash)
			cur, lerr := lookup(rec.Path)
			if err != nil || len(b) != 16 || lerr != nil || cur.Stat.ID.Ino != rec.Ino {
				dropped++
				continue
			}
			want := Hash{Hi: be64(b[:8]), Lo: be64(b[8:])}
			got, err := g.hashes.Sum(cur.Stat, cur.Open)
			if err != nil || got != want {
				dropped++
				continue
			}
			if rec.Own {
				g.ForSession(session).NoteWrite(cur, got)
			} else {
				g.ForSession(session).Register(cur, got)
			}
			kept++
		}
	}
	return st.Roots, kept, dropped, nil
}

func be64(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}
