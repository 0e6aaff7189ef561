package journal

// Names that are not valid UTF-8 in the journal's JSON: a Linux name is
// any bytes but '/' and NUL, and encoding/json writes each bad byte of a
// string as U+FFFD, so such a name travels as its bytes in hex beside the
// string (docs/DESIGN.md#journal-paths).

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// jsonName returns s as a JSON string field holds it: s and "" when s is
// valid UTF-8, else s with each bad byte as U+FFFD (for people) and s's
// bytes in hex (for readers).
func jsonName(s string) (shown, x string) {
	if utf8.ValidString(s) {
		return s, ""
	}
	return strings.ToValidUTF8(s, "\uFFFD"), hex.EncodeToString([]byte(s))
}

// fromJSONName is jsonName's inverse: the bytes x holds, or shown when x
// is "". A bad hex string is an error.
func fromJSONName(shown, x string) (string, error) {
	if x == "" {
		return shown, nil
	}
	raw, err := hex.DecodeString(x)
	if err != nil {
		return "", fmt.Errorf("journal: a name's bytes are not hex: %q", x)
	}
	return string(raw), nil
}

// stepJSON is a Step's JSON form: its fields, and the hex bytes of a
// Path, From or pre-image target that is not valid UTF-8.
type stepJSON struct {
	Kind  string   `json:"kind"`
	Path  string   `json:"path"`
	PathX string   `json:"path_x,omitempty"`
	From  string   `json:"from,omitempty"`
	FromX string   `json:"from_x,omitempty"`
	Pre   PreImage `json:"pre,omitempty"`
}

// MarshalJSON writes s with "path_x", "from_x" and the pre-image's
// "target_x" beside a name that is not valid UTF-8 (its bytes in hex), so
// a plan read by another process (a branch made from a checkpoint) names
// the files the workspace has.
func (s Step) MarshalJSON() ([]byte, error) {
	j := stepJSON{Kind: s.Kind, Pre: s.Pre}
	j.Path, j.PathX = jsonName(s.Path)
	j.From, j.FromX = jsonName(s.From)
	j.Pre.Path, _ = jsonName(s.Pre.Path)
	j.Pre.Target, j.Pre.TargetX = jsonName(s.Pre.Target)
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes, taking the hex bytes of a
// name where they are given.
func (s *Step) UnmarshalJSON(b []byte) error {
	var j stepJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	var err error
	*s = Step{Kind: j.Kind, Pre: j.Pre}
	if s.Path, err = fromJSONName(j.Path, j.PathX); err != nil {
		return err
	}
	if s.From, err = fromJSONName(j.From, j.FromX); err != nil {
		return err
	}
	if s.Pre.Target, err = fromJSONName(j.Pre.Target, j.Pre.TargetX); err != nil {
		return err
	}
	s.Pre.TargetX = ""
	if j.PathX != "" && j.Pre.Path != "" {
		s.Pre.Path = s.Path // the pre-image is of the step's own path
	}
	return nil
}
