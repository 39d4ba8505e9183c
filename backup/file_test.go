package backup

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func testCopy() *Copy {
	return &Copy{Header: Header{Taken: time.Unix(1_800_000_000, 0).UTC(), Version: "test", Prefix: "holdfast", Shards: 3, SlotMs: 100,
		Parts: []Part{{LSN: 4, Slot: 9}, {LSN: 1, Slot: 8}, {LSN: 7, Slot: 9}}},
		States: [][]byte{[]byte("shard zero"), nil, bytes.Repeat([]byte{7}, 3<<20)}}
}

// A copy reads back as written, and every way of damaging the bytes is told apart: a
// cut anywhere, a flipped byte in a part or the header.
func TestCopyFileRoundTripAndDamage(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, testCopy()); err != nil {
		t.Fatal(err)
	}
	got, err := Read(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	want := testCopy()
	if got.Shards != 3 || got.Parts[2].LSN != 7 || got.Parts[2].Size != 3<<20 || !bytes.Equal(got.States[0], want.States[0]) ||
		len(got.States[1]) != 0 || !bytes.Equal(got.States[2], want.States[2]) || !got.Taken.Equal(want.Taken) {
		t.Fatalf("read back %+v", got.Header)
	}
	for _, cut := range []int{0, 5, len(Magic) + 2, len(Magic) + 40, b.Len() - 3<<19, b.Len() - 1} {
		if _, err := Read(bytes.NewReader(b.Bytes()[:cut])); err == nil {
			t.Errorf("a copy cut at %d of %d bytes read", cut, b.Len())
		}
	}
	for at, want := range map[int]string{b.Len() - 1000: "shard 2's part sums to", len(Magic) + 20: ""} {
		bad := append([]byte(nil), b.Bytes()...)
		bad[at] ^= 1
		if _, err := Read(bytes.NewReader(bad)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("byte %d flipped: %v, want %q", at, err, want)
		}
	}
}

// A copy of a newer format is refused naming both formats; a header that does not add up
// is refused before any part is read.
func TestCopyHeaderChecks(t *testing.T) {
	c := testCopy()
	for name, h := range map[string]Header{
		"newer":  {Format: Format + 1, Shards: 1, SlotMs: 1, Parts: []Part{{}}},
		"parts":  {Format: Format, Shards: 2, SlotMs: 1, Parts: []Part{{}}},
		"slot":   {Format: Format, Shards: 1, Parts: []Part{{}}},
		"shard":  {Format: Format, Shards: 1, SlotMs: 1, Parts: []Part{{Shard: 1}}},
		"format": {Format: 0, Shards: 1, SlotMs: 1, Parts: []Part{{}}},
	} {
		if err := h.check(); err == nil {
			t.Errorf("%s: a bad header passed", name)
		} else if name == "newer" && !strings.Contains(err.Error(), "copy format 2, and this build reads format 1") {
			t.Errorf("newer: %v", err)
		}
	}
	c.States = c.States[:2] // three shards named, two states
	if err := Write(&bytes.Buffer{}, c); err == nil {
		t.Error("a copy whose states do not match its shard count was written")
	}
}

// A copy file is read from wherever an operator keeps it: any bytes give a copy or an
// error, never a panic or an allocation the file's length does not back.
func FuzzReadCopy(f *testing.F) {
	var b bytes.Buffer
	c := testCopy()
	c.States[2] = []byte("small")
	if err := Write(&b, c); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Add([]byte(Magic + "\x00\x00\x00\x02{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, err := Read(bytes.NewReader(data)); err == nil && len(got.States) != int(got.Shards) {
			t.Fatalf("read %d states of %d shards", len(got.States), got.Shards)
		}
	})
}
