package events

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/contract"
)

// In a cluster of data format 3 the events stream also holds the shards' journals, on
// the subjects journals names (cluster.Feed): a journal message never expires (a
// per-message TTL of "never", which the stream's age limit respects) and goes only by a
// purge of its shard's subject once a snapshot covers it, so the stream allows
// per-message TTLs and purges (by the service's account only: tenants are given
// consumers of their own events, never the stream's API). Each append is an atomic
// batch of the journal message and the events that ride with it.

// StreamHoldsJournals reports whether the events stream can also hold journals: it does
// not exist yet (EnsureFeedStream will create it so), or it allows purges — a stream an
// earlier Holdfast created denies them, and JetStream never lifts that.
func StreamHoldsJournals(ctx context.Context, js jetstream.JetStream) (holds bool, err error) {
	err = untilAnswered(ctx, func(actx context.Context) error {
		s, err := js.Stream(actx, contract.StreamName)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			holds = true
			return nil
		case err != nil:
			return fmt.Errorf("events: looking up stream %s: %w", contract.StreamName, err)
		}
		holds = !s.CachedInfo().Config.DenyPurge
		return nil
	})
	return holds, err
}

// EnsureFeedStream creates the events stream to hold the prefix's events and journals
// (journals: the journal subjects' filter), or makes an existing one do so.
func EnsureFeedStream(ctx context.Context, js jetstream.JetStream, prefix, journals string, cfg Config) error {
	return untilAnswered(ctx, func(actx context.Context) error { return ensureFeedOnce(actx, js, prefix, journals, cfg) })
}

func ensureFeedOnce(ctx context.Context, js jetstream.JetStream, prefix, journals string, cfg Config) error {
	subjects := []string{EventSubjects(prefix), journals}
	for attempt := 0; attempt < 2; attempt++ {
		s, err := js.Stream(ctx, contract.StreamName)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			sc := streamConfig(cfg, subjects...)
			sc.Description += "; and the shards' journals, <prefix>._j.<shard>"
			sc.AllowMsgTTL, sc.AllowAtomicPublish = true, true
			sc.AllowDirect = false // a journal's tail is read from the stream's leader
			_, err := js.CreateStream(ctx, sc)
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				continue
			}
			if err != nil {
				return fmt.Errorf("events: creating stream %s for %v: %w", contract.StreamName, subjects, err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("events: looking up stream %s: %w", contract.StreamName, err)
		}
		sc := s.CachedInfo().Config
		if sc.DenyPurge {
			return fmt.Errorf("events: stream %s denies purges (an earlier Holdfast created it), so it cannot hold this prefix's journals", contract.StreamName)
		}
		changed := false
		for _, subj := range subjects {
			if !slices.Contains(sc.Subjects, subj) {
				sc.Subjects, changed = append(sc.Subjects, subj), true
			}
		}
		if sc.Duplicates < cfg.DuplicateWindow {
			sc.Duplicates, changed = cfg.DuplicateWindow, true
		}
		if !sc.AllowAtomicPublish || !sc.AllowMsgTTL || !sc.DenyDelete {
			sc.AllowAtomicPublish, sc.AllowMsgTTL, sc.DenyDelete, changed = true, true, true, true
		}
		if !changed {
			return nil
		}
		if _, err := js.UpdateStream(ctx, sc); err != nil {
			return fmt.Errorf("events: updating stream %s (subjects %v, atomic batches, message TTLs): %w", contract.StreamName, sc.Subjects, err)
		}
		return nil
	}
	return fmt.Errorf("events: stream %s could be neither created nor found", contract.StreamName)
}
