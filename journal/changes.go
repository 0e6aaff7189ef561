package journal

// The change list of a session since a checkpoint.

// ListChanges lists what session changed since checkpoint since (""
// means the session start, cp000000), sorted by path: each path's Ops,
// Before (its earliest pre-image after the checkpoint: kind, mode, size,
// and Hash = the blob address, which is the xxh3-128 of its bytes; no
// hash when it was unrecoverable), After (ins.Lstat now, hashed with
// ins.HashOf for a regular file) and, for a rename target, RenamedFrom (the
// name it had at the checkpoint, following chains of renames; for an
// exchange, the other name). An unknown checkpoint is an error.
func (j *Journal) ListChanges(sessionName, since string, ins Inspector) ([]PathChange, error) {
	out := []PathChange{}
	err := j.EachChange(sessionName, since, ins, func(pc PathChange) error {
		out = append(out, pc)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// renamedFrom maps each rename target to the name its object had before
// the first rename of the chain (a→b→c gives c: a); an exchange maps each
// name to the other.
func renamedFrom(rs []Rename) map[string]string {
	out := map[string]string{}
	for _, r := range rs {
		if r.Exchange {
			fa, fb := out[r.From], out[r.To]
			if fa == "" {
				fa = r.From
			}
			if fb == "" {
				fb = r.To
			}
			out[r.To], out[r.From] = fa, fb
			for _, k := range []string{r.To, r.From} {
				if out[k] == k {
					delete(out, k)
				}
			}
			continue
		}
		orig := out[r.From]
		if orig == "" {
			orig = r.From
		}
		delete(out, r.From)
		if orig != r.To {
			out[r.To] = orig
		} else {
			delete(out, r.To)
		}
	}
	return out
}
