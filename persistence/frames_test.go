package persistence

import (
	"errors"
	"testing"
)

// Frames encoded for a message parse back whole; any flipped bit or cut is an error.
func TestFramesRoundTripAndDetectDamage(t *testing.T) {
	batch := []Record{{LSN: 7, Slot: 3, Payload: []byte("seven")}, {LSN: 8, Slot: 3, Payload: []byte("eight!")}}
	data := AppendFrames(nil, batch)
	if len(data) != FrameSize(batch[0])+FrameSize(batch[1]) {
		t.Fatalf("size %d", len(data))
	}
	var got []Record
	if err := ParseFrames(data, 1<<10, func(r Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].LSN != 8 || string(got[1].Payload) != "eight!" {
		t.Fatalf("parsed %+v", got)
	}
	for i := range data {
		bad := append([]byte(nil), data...)
		bad[i] ^= 0x10
		if err := ParseFrames(bad, 1<<10, func(Record) error { return nil }); err == nil {
			t.Fatalf("flipped bit at %d not detected", i)
		}
	}
	if err := ParseFrames(data[:len(data)-1], 1<<10, func(Record) error { return nil }); err == nil {
		t.Fatal("cut message not detected")
	}
	if err := CheckBatch(6, 3, batch, 1<<10); err != nil {
		t.Fatal(err)
	}
	if err := CheckBatch(5, 3, batch, 1<<10); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("gap: %v", err)
	}
	if err := CheckBatch(6, 3, batch, 5); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("too large: %v", err)
	}
}
