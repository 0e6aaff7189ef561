// Command bounds makes the state of the journal-bounds benchmark
// (docs/BENCHMARKS.md#journal-bounds): a workspace of N empty files
// under dirs of 1,000 and a journal whose session "big" created each of
// them (one create record and one after-note a file), written with this
// tree's journal package, so the log is in the format of the version the
// command is built from. bounds.sh mounts it and measures the daemon.
//
//	go run ./bench/journal/bounds -n 200000 -ws WS -state STATE
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/rubinofs/rubinofs/journal"
)

func main() {
	n := flag.Int("n", 200000, "files (changes) to make")
	ws := flag.String("ws", "", "the workspace to fill (made)")
	state := flag.String("state", "", "the state directory (its journal/ is made)")
	flag.Parse()
	if *ws == "" || *state == "" {
		log.Fatal("bounds: -ws and -state are required")
	}
	j, err := journal.Open(filepath.Join(*state, "journal"), journal.Options{})
	if err != nil {
		log.Fatal(err)
	}
	absent := func(string) (journal.PreImage, error) { return journal.PreImage{Kind: journal.KindAbsent}, nil }
	for i := 0; i < *n; i++ {
		rel := fmt.Sprintf("d%03d/f%07d.txt", i/1000, i)
		p := filepath.Join(*ws, rel)
		if i%1000 == 0 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				log.Fatal(err)
			}
		}
		rec, err := j.Record("big", "create", rel, "", absent)
		if err != nil {
			log.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			log.Fatal(err)
		}
		st, err := os.Lstat(p)
		if err != nil {
			log.Fatal(err)
		}
		if err := j.NoteAfter("big", rec.Seq, []journal.After{{Path: rel, Kind: journal.KindFile, Mode: 0o100644, MtimeNs: st.ModTime().UnixNano()}}); err != nil {
			log.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		log.Fatal(err)
	}
}
