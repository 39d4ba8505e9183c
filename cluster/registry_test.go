package cluster

import (
	"fmt"
	"strings"
	"testing"
)

// A node joins a prefix whose recorded data format it reads (also one recorded before
// formats were, 1), and refuses one written by a newer build, naming both formats.
func TestRegistryFormat(t *testing.T) {
	base := Registration{Journal: "jetstream", Shards: 3, SlotMillis: 100}
	mine := base
	mine.Format = DataFormat
	for _, have := range []uint32{0, 1, DataFormat} {
		h := base
		h.Format = have
		if err := compatible("p", h, mine); err != nil {
			t.Errorf("recorded format %d: %v", have, err)
		}
	}
	newer := base
	newer.Format = DataFormat + 1
	err := compatible("p", newer, mine)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("format %d, written by a newer Holdfast, and this build reads format %d at most", DataFormat+1, DataFormat)) {
		t.Fatalf("a newer format: %v", err)
	}
}
