package actors

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast/contract"
)

// The newest snapshot is kept with one before it to fall back on; the fallback is only
// real if the journal still holds everything after that older snapshot. A shard whose
// newest snapshot turns out unreadable recovers from the one before and loses nothing.
func TestUnreadableNewestSnapshotFallsBack(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(dir)
	o.SnapshotEvery = 40
	o.SegmentSize = 1 << 10 // small segments, so compaction really removes some
	sys := startSystem(t, o)
	for i := range 300 {
		wantCode(t, do(t, sys, 0, createResource(fmt.Sprintf("c%d", i), fmt.Sprintf("r%d", i))), contract.CodeOK)
		if i%40 == 39 {
			time.Sleep(5 * time.Millisecond) // let the snapshot land before the next one is due
		}
	}
	time.Sleep(50 * time.Millisecond)
	sys.Stop()

	shardDir := filepath.Join(dir, "shard-000")
	snaps, _ := filepath.Glob(filepath.Join(shardDir, "snapshot-*.snap"))
	if len(snaps) < 2 { // two are kept, three for a moment while the oldest is removed
		t.Fatalf("snapshots kept: %v, want 2", snaps)
	}
	segments, _ := filepath.Glob(filepath.Join(shardDir, "*.journal"))
	slices.Sort(segments)
	if len(segments) == 0 || strings.TrimLeft(filepath.Base(segments[0]), "0") == "1.journal" {
		t.Fatalf("segments %v: the journal was never compacted, so the test shows nothing", segments)
	}
	slices.Sort(snaps)
	newest := snaps[len(snaps)-1]
	b, err := os.ReadFile(newest)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0xff // a flipped bit in the payload: the checksum refuses it
	if err := os.WriteFile(newest, b, 0o644); err != nil {
		t.Fatal(err)
	}

	sys = startSystem(t, o)
	defer sys.Stop()
	for i := range 300 {
		wantCode(t, read(t, sys, 0, ReadRequest{Verb: contract.VerbGetResource, Tenant: "t", ID: fmt.Sprintf("r%d", i)}), contract.CodeOK)
	}
}
