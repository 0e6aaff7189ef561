package journal

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
)

// randomOp makes one random change among a few names, so that renames,
// replacements, deletions and re-creations of the same names interleave.
func randomOp(d *driver, rng *rand.Rand) {
	names := []string{"a", "b", "c", "d1", "d2", "d1/x", "d1/y", "d2/x", "d1/sub", "d1/sub/z"}
	pick := func() string { return names[rng.IntN(len(names))] }
	isDir := func(p string) bool { st, err := os.Lstat(d.abs(p)); return err == nil && st.IsDir() }
	// A symlink is never written through, and a file with several hard
	// links never changed in place: a change through one name is not a
	// change of the others (docs/DESIGN.md#journal-rewind).
	isLink := func(p string) bool {
		st, err := os.Lstat(d.abs(p))
		return err == nil && (st.Mode()&os.ModeSymlink != 0 || st.Sys().(*syscall.Stat_t).Nlink > 1)
	}
	parentOK := func(p string) bool {
		dir := filepath.Dir(p)
		return dir == "." || isDir(dir)
	}
	p, q := pick(), pick()
	switch rng.IntN(9) {
	case 0, 1:
		if parentOK(p) && !isDir(p) && !isLink(p) {
			d.write(p, fmt.Sprint("w", rng.IntN(1000), "\n"))
		}
	case 2:
		if parentOK(p) && !isDir(p) && !isLink(p) {
			d.appendf(p, "more\n")
		}
	case 3:
		if d.exists(p) && parentOK(q) && p != q && !isDir(q) && !isDir(p) {
			d.rename(p, q)
		} else if isDir(p) && !d.exists(q) && parentOK(q) && !within(q, []string{p}) {
			d.rename(p, q)
		}
	case 4:
		if d.exists(p) && !isDir(p) {
			d.unlink(p)
		} else if isDir(p) {
			d.rmR(p)
		}
	case 5:
		if !d.exists(p) && parentOK(p) {
			d.mkdir(p)
		}
	case 6:
		if d.exists(p) && !isDir(p) {
			if !isLink(p) {
				d.chmod(p, os.FileMode(0o600+rng.IntN(2)*0o155))
			}
		}
	case 7:
		if !d.exists(p) && parentOK(p) {
			if rng.IntN(2) == 0 {
				d.symlink("target-"+q, p)
			} else if d.exists(q) && !isDir(q) && !isLink(q) {
				d.link(q, p)
			}
		}
	case 8:
		if d.exists(p) && d.exists(q) && p != q && !within(p, []string{q}) && !within(q, []string{p}) {
			d.exchange(p, q)
		}
	}
}

// randomSeeds is how many random sequences the test replays (more when
// RUBINOFS_JOURNAL_SEEDS says so).
var randomSeeds = uint64(40)

func init() {
	if n, err := strconv.ParseUint(os.Getenv("RUBINOFS_JOURNAL_SEEDS"), 10, 64); err == nil {
		randomSeeds = n
	}
}

// Random sequences with checkpoints: a rewind to any checkpoint gives the
// tree as it was then, and a rewind to the rewind's own checkpoint gives
// the tree as it was before the rewind.
func TestRewindRandomSequences(t *testing.T) {
	for seed := uint64(1); seed <= randomSeeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			j := openJ(t, filepath.Join(t.TempDir(), "journal"))
			d := newDriver(t, j, "s")
			d.seed(map[string]string{"a": "A\n", "d1/x": "X\n"})
			snaps := map[string]map[string]string{"cp000000": d.manifest()}
			if _, err := j.Checkpoint("s", "first"); err != nil { // cp000000 is written first
				t.Fatal(err)
			}
			snaps["cp000001"] = snaps["cp000000"]
			for c := 2; c < 5; c++ {
				for k := 0; k < 8; k++ {
					randomOp(d, rng)
				}
				cp, err := j.Checkpoint("s", "")
				if err != nil {
					t.Fatal(err)
				}
				snaps[cp.ID] = d.manifest()
			}
			for k := 0; k < 8; k++ {
				randomOp(d, rng)
			}
			ids := make([]string, 0, len(snaps))
			for id := range snaps {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			to := ids[rng.IntN(len(ids))]
			before := d.manifest()
			if os.Getenv("JDEBUG") != "" {
				recs, _ := j.Records("s")
				for _, r := range recs {
					t.Logf("%d %s %s %s pre=%v after=%v", r.Seq, r.Op, r.Path, r.Path2, r.Pre, r.After)
				}
				t.Logf("rewind to %s", to)
			}
			plan, res := d.rewind(to, RewindOptions{})
			if len(plan.Conflicts) > 0 {
				t.Fatalf("conflicts %+v", plan.Conflicts)
			}
			sameManifest(t, "rewind to "+to, snaps[to], d.manifest())
			d.rewind(res.Checkpoint, RewindOptions{})
			sameManifest(t, "undo of the rewind to "+to, before, d.manifest())
		})
	}
}
