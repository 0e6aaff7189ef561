package journal

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// wireStrings are the strings the equivalence test draws from: empty, plain,
// every kind Marshal escapes, non-ASCII and invalid UTF-8.
var wireStrings = []string{"", "a", "dir/file.go", "sp ace", `q"uote`, `back\slash`, "<tag>", "a>b", "&amp;",
	"new\nline\ttab\x01\x1f", "del\x7f", "é ü 日本", "bad\xff\xfename", "\u2028\u2029", "x/\x00/y"}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// randomRecord is a record with each field set or left zero at random.
func randomRecord(r *rand.Rand) Record {
	str := func() string { return pick(r, wireStrings) }
	u64 := func() uint64 { return pick(r, []uint64{0, 1, 42, math.MaxUint32, math.MaxUint64}) }
	i64 := func() int64 { return pick(r, []int64{0, 1, -1, 5000, math.MaxInt64, math.MinInt64}) }
	u32p := func() *uint32 {
		if r.IntN(2) == 0 {
			return nil
		}
		v := pick(r, []uint32{0, 1000, math.MaxUint32})
		return &v
	}
	rec := Record{Seq: u64(), Op: str(), Path: str(), PID: u64(), Path2: str(), PID2: u64(), ID: str(),
		Label: str(), Owner: u32p(), Ref: u64(), Failed: r.IntN(2) == 0,
		Time: pick(r, []time.Time{{}, time.Unix(1764567890, 123456789).UTC(), time.Unix(1764567890, 0).UTC(),
			time.Unix(1764567890, 120000000).In(time.FixedZone("x", 3600)),
			time.Unix(1764567890, 0).In(time.FixedZone("far", 25*3600))})}
	for range r.IntN(3) {
		rec.Defs = append(rec.Defs, PathDef{I: u64(), D: u64(), N: str(), X: str()})
	}
	for range r.IntN(3) {
		rec.Pre = append(rec.Pre, PreImage{Path: str(), PID: u64(), Kind: str(), Mode: uint32(u64()), Size: i64(),
			Blob: str(), Unrecoverable: str(), Target: str(), TargetX: str(), Uid: u32p(), Gid: u32p(), Rdev: u64()})
	}
	for range r.IntN(3) {
		rec.After = append(rec.After, After{Path: str(), PID: u64(), Kind: str(), Mode: uint32(u64()), Size: i64(),
			Ino: u64(), MtimeNs: i64(), Hash: str()})
	}
	if r.IntN(4) == 0 {
		rec.Pre = []PreImage{} // empty, not nil: omitted all the same
	}
	return rec
}

// TestAppendRecordIsMarshal: the log's encoder writes what encoding/json's
// Marshal writes, byte for byte, for records with every field set or zero
// and strings of every kind Marshal escapes; and a line reads back as
// the record (docs/DESIGN.md#journal-wire).
func TestAppendRecordIsMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	set := map[string]bool{} // the fields some record set
	for i := range 20000 {
		rec := randomRecord(r)
		markSet(set, reflect.ValueOf(rec))
		want, werr := json.Marshal(rec)
		got, gerr := appendRecord([]byte("prefix"), &rec)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("record %d %+v: Marshal's error %v, the encoder's %v", i, rec, werr, gerr)
		}
		if werr != nil {
			continue // a zone offset of a day or more: refused by both
		}
		if !bytes.Equal(got[len("prefix"):], want) {
			t.Fatalf("record %d %+v:\n got %s\nwant %s", i, rec, got[len("prefix"):], want)
		}
	}
	// Every field of the line's types was set by some record: a field
	// added to them and not to the generator fails here, not silently.
	for _, typ := range []reflect.Type{reflect.TypeFor[Record](), reflect.TypeFor[PathDef](),
		reflect.TypeFor[PreImage](), reflect.TypeFor[After]()} {
		for f := range typ.Fields() {
			if !set[typ.Name()+"."+f.Name] {
				t.Errorf("no record set %s.%s: add it to randomRecord (and to appendRecord)", typ.Name(), f.Name)
			}
		}
	}
	// Marshal refuses a year RFC 3339 cannot hold; so does the encoder.
	bad := Record{Seq: 1, Op: "x", Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := appendRecord(nil, &bad); err == nil {
		t.Fatal("a year past 9999 was encoded")
	}
}

// markSet adds to set "Type.Field" for each field of the struct v (and of
// the structs in its slices) that is not zero.
func markSet(set map[string]bool, v reflect.Value) {
	typ := v.Type()
	for i := range typ.NumField() {
		f := v.Field(i)
		if !f.IsZero() {
			set[typ.Name()+"."+typ.Field(i).Name] = true
		}
		if f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct {
			for j := range f.Len() {
				markSet(set, f.Index(j))
			}
		}
	}
}

// BenchmarkRecordLine: one unlink's record line with its path definitions
// and a linked pre-image, as sessionLog.write encodes it.
func BenchmarkRecordLine(b *testing.B) {
	uid := uint32(0)
	rec := Record{Seq: 12345, Time: time.Now().UTC(), Op: "unlink", PID: 812,
		Defs: []PathDef{{I: 811, D: 40, N: "internal"}, {I: 812, D: 811, N: "typesinternal_test.go"}},
		Pre: []PreImage{{PID: 812, Kind: KindFile, Mode: 0o100644, Size: 5123,
			Blob: "9f2c6a7d0b1e4f3a8c5d2e1f0a9b8c7d", Uid: &uid, Gid: &uid}}}
	b.Run("marshal", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			var err error
			if buf, err = appendRecord(buf[:0], &rec); err != nil {
				b.Fatal(err)
			}
		}
	})
}
