package cluster

import (
	"context"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Voids tells, message by message in stream order, which journal batches are void.
//
// Each message expects the stream's last sequence, and that alone cannot tell whose
// message fills it. An owner pipelines messages, each expecting the one before it; when
// one is lost (its server cut off mid-append) and the next owner's claim takes its
// place, the message after it lands behind that claim, in the former owner's name, its
// records going back in lsn (seen under partitions). It was never acknowledged: its
// writer learns its predecessor is missing and fails its journal before reporting
// anything after it durable; and the claim's owner finds it where its own first append
// was to go and halts. So the journal means: after a claim, only batches of the claim's
// epoch count; any other's are void and replay skips them. Before the first claim a
// replay sees (the claim was compacted away), the first batch's epoch is the owner's.
// The claim in stream order decides, not the larger epoch: a stale owner whose claim
// landed after another's owns the journal from there, as the fences of their appends
// decide it (the other's next append is refused).
type Voids struct {
	epoch string // the owning epoch at this point of the stream ("" not known yet)
}

// Void takes the next message's headers and reports whether it is a void batch.
func (v *Voids) Void(h nats.Header) bool {
	epoch := h.Get(hdrEpoch)
	switch h.Get(hdrKind) {
	case "claim":
		v.epoch = epoch
	case "batch":
		if v.epoch == "" {
			v.epoch = epoch
		}
		return epoch != v.epoch
	}
	return false
}

// maxVoidRun bounds a run of void messages: a writer has at most MaxWindow messages in
// flight, and the first of them was the one lost.
const maxVoidRun = MaxWindow

// validTail is where the journal ends for the next claim: the position recorded by its
// last message, unless that message ends a void run — then by the message before the
// run. Reading back from the last message (last, the stream's first being first): a run
// of one epoch's messages that starts with that epoch's claim, reaches the stream's
// start or is longer than any void run is valid; one that follows another epoch's
// message is void (Voids: an owner's messages follow its own claim). The messages a walk
// may need are read at once, in parallel: the claim expects the tail not to move
// meanwhile, and one read after another left an owner that appends steadily unclaimable.
func (j *Journal) validTail(ctx context.Context, last, first uint64) (position, error) {
	got := map[uint64]*jetstream.RawStreamMsg{}
	read := func(seq uint64) (*jetstream.RawStreamMsg, error) {
		if m, ok := got[seq]; ok {
			return m, nil
		}
		lo := max(first, seq-min(seq, maxVoidRun+1)) // the window a walk from seq may need
		msgs := make([]*jetstream.RawStreamMsg, seq-lo+1)
		errs := make([]error, len(msgs))
		var wg sync.WaitGroup
		for i := range msgs {
			wg.Go(func() { msgs[i], errs[i] = j.getWithin(ctx, lo+uint64(i), openCall) })
		}
		wg.Wait()
		for i, m := range msgs {
			if errs[i] != nil {
				return nil, fmt.Errorf("reading journal message %d: %w", lo+uint64(i), errs[i])
			}
			got[lo+uint64(i)] = m
		}
		return got[seq], nil
	}
	end := last // the message whose recorded position is the tail
	for {
		m, err := read(end)
		if err != nil {
			return position{}, err
		}
		epoch, tailOf := m.Header.Get(hdrEpoch), m
		void, before := false, end
		for n := 0; before > first && n <= maxVoidRun && m.Header.Get(hdrKind) != "claim"; n++ {
			if m, err = read(before - 1); err != nil {
				return position{}, err
			}
			before--
			if m.Header.Get(hdrEpoch) != epoch {
				void = true
				break
			}
		}
		if !void {
			tail, err := parseLast(tailOf.Header.Get(hdrLast))
			if err != nil {
				return position{}, fmt.Errorf("journal message %d: %w", end, err)
			}
			return tail, nil
		}
		end = before // the message before the void run ends the valid journal
	}
}
