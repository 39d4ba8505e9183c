package actors

import (
	"sync/atomic"
	"testing"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/persistence"
)

// countingJournal is a persistence.Journal that counts appends and replays around the
// file journal: a shard must use its journal only through the interface.
type countingJournal struct {
	persistence.Journal
	appends, replays *atomic.Int64
}

func (j countingJournal) Append(b []persistence.Record) error {
	j.appends.Add(1)
	return j.Journal.Append(b)
}

func (j countingJournal) Replay(from uint64, fn func(persistence.Record) error) error {
	j.replays.Add(1)
	return j.Journal.Replay(from, fn)
}

// A shard recovers from and appends to the journal Options.OpenJournal gives it.
func TestShardUsesTheJournalItIsGiven(t *testing.T) {
	var appends, replays atomic.Int64
	o := testOptions(t.TempDir())
	o.OpenJournal = func(_ uint32, dir string) (persistence.Journal, error) {
		j, err := persistence.OpenFileJournal(dir, persistence.FileOptions{})
		return countingJournal{Journal: j, appends: &appends, replays: &replays}, err
	}
	sys := startSystem(t, o)
	wantCode(t, do(t, sys, 0, createResource("c1", "seat")), contract.CodeOK)
	sys.Stop()
	if appends.Load() == 0 || replays.Load() != 1 {
		t.Fatalf("journal given: %d appends, %d replays", appends.Load(), replays.Load())
	}
}
