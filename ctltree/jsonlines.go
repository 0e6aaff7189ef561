package ctltree

import (
	"bytes"
	"encoding/json"
)

// JSONLines renders recs as JSON lines, one object per line, each ending in
// '\n', the format of every list file in the control tree (denials, tracked,
// sessions' changes, compaction lineage). HTML characters are not escaped,
// so paths and commands read as they are ("<", ">" and "&" stay literal).
// The error is json.Marshal's, for a value that cannot be encoded.
func JSONLines[T any](recs []T) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for i := range recs {
		if err := enc.Encode(recs[i]); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}
