package valueset

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"slices"
	"testing"
)

// uv concatenates uvarints, to spell encodings out in tests.
func uv(vs ...uint64) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.AppendUvarint(b, v)
	}
	return b
}

// TestSetEncodingCanonical: equal sets built along different histories (so
// with different tree shapes and pools) encode to identical bytes.
func TestSetEncodingCanonical(t *testing.T) {
	var a, b Set
	for v := uint64(0); v < 301; v++ { // 3 is coprime to 301: every value once
		a.Add(v * 3 % 301)
	}
	for v := uint64(301); v > 0; v-- {
		b.Add(v - 1)
	}
	for v := uint64(0); v < 301; v += 7 {
		a.Remove(v)
		b.Remove(v)
	}
	b.Add(1000)
	b.Remove(1000)
	ea, eb := a.AppendBinary(nil), b.AppendBinary(nil)
	if !bytes.Equal(ea, eb) {
		t.Fatalf("equal sets encode differently:\n%x\n%x", ea, eb)
	}
	// Trailing bytes are returned untouched.
	var d Set
	rest, err := d.DecodeBinary(append(ea, 0xAA, 0xBB))
	if err != nil || !bytes.Equal(rest, []byte{0xAA, 0xBB}) {
		t.Fatalf("rest = %x, err = %v", rest, err)
	}
	mustCheck(t, &d)
	if !slices.Equal(intervals(&d), intervals(&a)) {
		t.Fatal("decoded set differs")
	}
}

func TestSetEncodingLayout(t *testing.T) {
	var s Set
	for _, v := range []uint64{5, 6, 7, 10, maxU} {
		s.Add(v)
	}
	// count 3; [5,7]; gap 10-7-2=1, length 0; gap max-10-2, length 0.
	want := uv(3, 5, 2, 1, 0, maxU-12, 0)
	if got := s.AppendBinary(nil); !bytes.Equal(got, want) {
		t.Fatalf("encoding %x, want %x", got, want)
	}
}

func TestSetDecodeRejects(t *testing.T) {
	cases := map[string][]byte{
		"empty input":         {},
		"truncated count":     {0x80},
		"truncated interval":  uv(1, 5),
		"truncated second":    append(uv(2, 5, 0, 1), 0x80),
		"count exceeds input": uv(3, 1, 1, 1, 1),
		"absurd count":        uv(1<<62, 0, 0),
		"overlong varint":     {0x01, 0x85, 0x00, 0x00},
		"overlong count":      {0x81, 0x00, 0x05, 0x00},
		"varint overflow":     append(uv(1), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x00),
		"end wraps":           uv(1, maxU, 1),
		"start wraps":         uv(2, maxU-3, 0, 3, 0),
		"after max":           uv(2, 0, maxU-1, 0, 0),
		"prevEnd+2 wraps":     uv(2, 0, maxU, 0, 0),
		"wide end wraps":      uv(1, 1, maxU),
		"second end wraps":    uv(2, 0, 0, 0, maxU-1),
	}
	for name, in := range cases {
		var s Set
		s.Add(42)
		before := s.AppendBinary(nil)
		_, err := s.DecodeBinary(in)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v", name, err)
		}
		if !bytes.Equal(s.AppendBinary(nil), before) {
			t.Errorf("%s: failed decode modified the set", name)
		}
	}
	// Adjacent, overlapping and unsorted intervals cannot even be expressed:
	// gaps are unsigned and offset by 2. The smallest legal gap decodes to
	// two intervals with exactly one absent value between them.
	var s Set
	if _, err := s.DecodeBinary(uv(2, 0, 0, 0, 0)); err != nil {
		t.Fatal(err)
	}
	if got := intervals(&s); !slices.Equal(got, [][2]uint64{{0, 0}, {2, 2}}) {
		t.Fatalf("intervals %v", got)
	}
}

// TestDecodeForgedCountAllocatesLittle: a count the remaining input cannot
// hold is rejected before the node pool is allocated, so a forged header
// cannot make a replica reserve memory out of proportion to the input.
func TestDecodeForgedCountAllocatesLittle(t *testing.T) {
	const n = 1 << 20
	in := append(uv(n), make([]byte, n)...) // room for n/2 intervals only
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var s Set
	if _, err := s.DecodeBinary(in); !errors.Is(err, ErrMalformed) {
		t.Fatalf("err = %v", err)
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > n {
		t.Fatalf("rejected decode allocated %d bytes", grew)
	}
}

func TestFreedQueueEncoding(t *testing.T) {
	var q FreedQueue
	for _, v := range []uint64{7, 3, maxU, 0, 8} {
		q.PushBack(v)
	}
	// zigzag deltas: +7, -4, max-3 (= -4 as int64), +1, +8.
	want := uv(5, 14, 7, 7, 2, 16)
	enc := q.AppendBinary(nil)
	if !bytes.Equal(enc, want) {
		t.Fatalf("encoding %x, want %x", enc, want)
	}
	var d FreedQueue
	rest, err := d.DecodeBinary(append(enc, 1))
	if err != nil || !bytes.Equal(rest, []byte{1}) {
		t.Fatalf("rest %x, err %v", rest, err)
	}
	if got := queueValues(&d); !slices.Equal(got, []uint64{7, 3, maxU, 0, 8}) {
		t.Fatalf("decoded %v", got)
	}
	if v, _ := d.Front(); v != 7 {
		t.Fatalf("Front = %d", v)
	}
}

func TestFreedQueueDecodeRejects(t *testing.T) {
	cases := map[string][]byte{
		"empty input":         {},
		"truncated":           uv(2, 4),
		"count exceeds input": uv(5, 1, 1),
		"absurd count":        uv(1<<40, 1),
		"duplicate":           uv(2, 6, 0),
		"overlong varint":     {0x01, 0x80, 0x00},
	}
	for name, in := range cases {
		var q FreedQueue
		q.PushBack(99)
		_, err := q.DecodeBinary(in)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v", name, err)
		}
		if got := queueValues(&q); !slices.Equal(got, []uint64{99}) {
			t.Errorf("%s: failed decode modified the queue: %v", name, got)
		}
	}
}

// FuzzDecode feeds arbitrary bytes to both decoders. Neither may panic, and
// whatever they accept must be a valid structure that re-encodes to exactly
// the bytes consumed (the encodings are canonical).
func FuzzDecode(f *testing.F) {
	var s Set
	for _, v := range []uint64{0, 1, 2, 9, 1 << 40, maxU - 1, maxU} {
		s.Add(v)
	}
	f.Add(s.AppendBinary(nil))
	f.Add(encodeInterval(0, maxU))
	f.Add(uv(2, 0, 0, 0, 0))
	f.Add(uv(3, 5, 2, 1, 0, maxU-12, 0))
	f.Add(uv(5, 14, 7, 7, 2, 16))
	f.Add([]byte{0})
	f.Add([]byte{0x81, 0x00, 0x05, 0x00})
	f.Add(uv(2, 6, 0))
	f.Fuzz(func(t *testing.T, in []byte) {
		var s Set
		if rest, err := s.DecodeBinary(in); err == nil {
			mustCheck(t, &s)
			if enc := s.AppendBinary(nil); !bytes.Equal(enc, in[:len(in)-len(rest)]) {
				t.Fatalf("set: consumed %x, re-encoded %x", in[:len(in)-len(rest)], enc)
			}
		}
		var q FreedQueue
		if rest, err := q.DecodeBinary(in); err == nil {
			if err := checkQueue(&q); err != nil {
				t.Fatal(err)
			}
			if enc := q.AppendBinary(nil); !bytes.Equal(enc, in[:len(in)-len(rest)]) {
				t.Fatalf("queue: consumed %x, re-encoded %x", in[:len(in)-len(rest)], enc)
			}
		}
	})
}
