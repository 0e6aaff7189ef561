package journal

// A session log's line, written without reflection
// (docs/DESIGN.md#journal-wire).

import (
	"encoding/json"
	"strconv"
	"time"
)

// appendRecord appends rec as encoding/json's Marshal writes it, byte for
// byte (the field order, omitempty, and Marshal's escaping of strings), to
// b: a log is read back with encoding/json, and both forms must stay one.
// A string with any byte Marshal would escape (a control or non-ASCII
// byte, a quote, a backslash, <, > or &) is handed to Marshal; so is a
// time that is not in UTC (every writer's is) or whose year RFC 3339
// cannot hold, which Marshal refuses, as it refuses a zone offset of a
// day or more (the error is returned). A log line holds only what sessionLog.write gives it: a
// record whose paths are the table's ids (pathTable.encode).
func appendRecord(b []byte, rec *Record) ([]byte, error) {
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, rec.Seq, 10)
	b = append(b, `,"time":`...)
	if y := rec.Time.Year(); y < 0 || y > 9999 || rec.Time.Location() != time.UTC {
		tb, err := json.Marshal(rec.Time)
		if err != nil {
			return b, err
		}
		b = append(b, tb...)
	} else {
		b = append(b, '"')
		b = rec.Time.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	b = append(b, `,"op":`...)
	b = appendString(b, rec.Op)
	if len(rec.Defs) > 0 {
		b = append(b, `,"defs":[`...)
		for i := range rec.Defs {
			if i > 0 {
				b = append(b, ',')
			}
			d := &rec.Defs[i]
			b = append(b, `{"i":`...)
			b = strconv.AppendUint(b, d.I, 10)
			b = append(b, `,"d":`...)
			b = strconv.AppendUint(b, d.D, 10)
			b = append(b, `,"n":`...)
			b = appendString(b, d.N)
			b = optString(b, `,"x":`, d.X)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = optString(b, `,"path":`, rec.Path)
	b = optUint(b, `,"pid":`, rec.PID)
	b = optString(b, `,"path2":`, rec.Path2)
	b = optUint(b, `,"pid2":`, rec.PID2)
	if len(rec.Pre) > 0 {
		b = append(b, `,"pre":[`...)
		for i := range rec.Pre {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendPreImage(b, &rec.Pre[i])
		}
		b = append(b, ']')
	}
	b = optString(b, `,"id":`, rec.ID)
	b = optString(b, `,"label":`, rec.Label)
	if rec.Owner != nil {
		b = append(b, `,"owner":`...)
		b = strconv.AppendUint(b, uint64(*rec.Owner), 10)
	}
	b = optUint(b, `,"ref":`, rec.Ref)
	if len(rec.After) > 0 {
		b = append(b, `,"after":[`...)
		for i := range rec.After {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendAfter(b, &rec.After[i])
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}

// appendPreImage appends p as Marshal writes a PreImage.
func appendPreImage(b []byte, p *PreImage) []byte {
	b = appendNamed(b, p.Path, p.PID, p.Kind)
	b = optUint(b, `,"mode":`, uint64(p.Mode))
	b = optInt(b, `,"size":`, p.Size)
	b = optString(b, `,"blob":`, p.Blob)
	b = optString(b, `,"unrecoverable":`, p.Unrecoverable)
	b = optString(b, `,"target":`, p.Target)
	b = optString(b, `,"target_x":`, p.TargetX)
	if p.Uid != nil {
		b = append(b, `,"uid":`...)
		b = strconv.AppendUint(b, uint64(*p.Uid), 10)
	}
	if p.Gid != nil {
		b = append(b, `,"gid":`...)
		b = strconv.AppendUint(b, uint64(*p.Gid), 10)
	}
	b = optUint(b, `,"rdev":`, p.Rdev)
	return append(b, '}')
}

// appendAfter appends a as Marshal writes an After.
func appendAfter(b []byte, a *After) []byte {
	b = appendNamed(b, a.Path, a.PID, a.Kind)
	b = optUint(b, `,"mode":`, uint64(a.Mode))
	b = optInt(b, `,"size":`, a.Size)
	b = optUint(b, `,"ino":`, a.Ino)
	b = optInt(b, `,"mtime_ns":`, a.MtimeNs)
	b = optString(b, `,"hash":`, a.Hash)
	return append(b, '}')
}

// appendNamed opens a PreImage's or an After's object with the fields
// both start with: path and pid (omitempty), then kind.
func appendNamed(b []byte, path string, pid uint64, kind string) []byte {
	b = append(b, '{')
	b = optString(b, `"path":`, path)
	if path != "" && pid != 0 {
		b = append(b, ',')
	}
	b = optUint(b, `"pid":`, pid)
	if path != "" || pid != 0 {
		b = append(b, ',')
	}
	b = append(b, `"kind":`...)
	return appendString(b, kind)
}

// optString appends key and s unless s is empty (omitempty).
func optString(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return appendString(append(b, key...), s)
}

// optUint appends key and n unless n is 0 (omitempty).
func optUint(b []byte, key string, n uint64) []byte {
	if n == 0 {
		return b
	}
	return strconv.AppendUint(append(b, key...), n, 10)
}

// optInt appends key and n unless n is 0 (omitempty).
func optInt(b []byte, key string, n int64) []byte {
	if n == 0 {
		return b
	}
	return strconv.AppendInt(append(b, key...), n, 10)
}

// appendString appends s as a JSON string, as Marshal writes it: as is
// when no byte needs escaping, else through Marshal itself.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
