package actors

import (
	"fmt"
	"os"
	"path/filepath"
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

// countingStorage is file storage whose journal counts its use.
type countingStorage struct {
	FileStorage
	appends, replays *atomic.Int64
}

func (c countingStorage) OpenJournal() (persistence.Journal, error) {
	j, err := c.FileStorage.OpenJournal()
	return countingJournal{Journal: j, appends: c.appends, replays: c.replays}, err
}

// A shard recovers from and appends to the journal of the Storage it is given.
func TestShardUsesTheStorageItIsGiven(t *testing.T) {
	var appends, replays atomic.Int64
	o := testOptions(t.TempDir())
	o.Storage = func(shard uint32) (Storage, error) {
		dir := filepath.Join(o.Dir, fmt.Sprintf("shard-%03d", shard))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		return countingStorage{FileStorage: FileStorage{Dir: dir}, appends: &appends, replays: &replays}, nil
	}
	sys := startSystem(t, o)
	wantCode(t, do(t, sys, 0, createResource("c1", "seat")), contract.CodeOK)
	sys.Stop()
	if appends.Load() == 0 || replays.Load() != 1 {
		t.Fatalf("journal given: %d appends, %d replays", appends.Load(), replays.Load())
	}
}
