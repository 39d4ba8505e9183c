//go:build unix

package integration

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/cluster"
)

// checkJournals reads every shard's journal stream on url and fails the test where a
// batch does not follow the one before it (its first lsn is not the last one's next):
// what a replay would refuse. Void batches (cluster.Voids: a former owner's, behind
// another's claim) are skipped, as a replay skips them. It dumps the messages around a gap.
func checkJournals(t *testing.T, url string, shards int) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for k := range shards {
		name := fmt.Sprintf("HOLDFAST_J_%d", k)
		s, err := js.Stream(ctx, name)
		if err != nil {
			continue
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		var voids cluster.Voids
		var last uint64
		seen := false
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
			m, err := s.GetMsg(ctx, seq)
			if err != nil {
				continue
			}
			h := m.Header
			line := fmt.Sprintf("seq %d kind %s epoch %s node %s first %s last %s", seq, h.Get("Holdfast-Kind"), h.Get("Holdfast-Epoch"),
				h.Get("Holdfast-Node"), h.Get("Holdfast-First"), h.Get("Holdfast-Last"))
			void := voids.Void(h)
			if void {
				line += " (void)"
			}
			lines = append(lines, line)
			if void || h.Get("Holdfast-Kind") != "batch" {
				continue
			}
			first, _ := strconv.ParseUint(h.Get("Holdfast-First"), 10, 64)
			end, _, _ := strings.Cut(h.Get("Holdfast-Last"), ".")
			lastLSN, _ := strconv.ParseUint(end, 10, 64)
			if seen && first != last+1 {
				from := max(0, len(lines)-12)
				t.Errorf("%s: a batch at stream sequence %d starts at lsn %d after lsn %d:\n%s", name, seq, first, last, strings.Join(lines[from:], "\n"))
			}
			seen, last = true, lastLSN
		}
	}
}
