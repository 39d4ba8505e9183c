package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// attempts asks again while JetStream is forming or silent, and only then; attemptsToOpen
// also while an asset is not yet visible; a call whose context ends is not asked again.
func TestAttemptsAskAgainOnlyWhatIsWorthAskingAgain(t *testing.T) {
	forming := &jetstream.APIError{ErrorCode: jsTemporarilyUnavailable, Description: "JetStream system temporarily unavailable"}
	for _, tc := range []struct {
		name  string
		fails []error // the op's errors before it succeeds
		open  bool
		calls int
		err   error
	}{
		{name: "forming then answered", fails: []error{forming, fmt.Errorf("wrapped: %w", forming)}, calls: 3},
		{name: "silent then answered", fails: []error{nats.ErrNoResponders, context.DeadlineExceeded}, calls: 3},
		{name: "no peers then answered", fails: []error{&jetstream.APIError{ErrorCode: jsClusterNoPeers}}, calls: 2},
		{name: "a definite error", fails: []error{jetstream.ErrKeyExists, nil}, calls: 1, err: jetstream.ErrKeyExists},
		{name: "not yet visible is definite to attempts", fails: []error{jetstream.ErrStreamNotFound}, calls: 1, err: jetstream.ErrStreamNotFound},
		{name: "not yet visible is looked for again when opening", fails: []error{jetstream.ErrBucketNotFound, jetstream.ErrStreamNotFound}, open: true, calls: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			op := func(ctx context.Context) error {
				if _, ok := ctx.Deadline(); !ok {
					t.Fatal("an attempt without its own deadline")
				}
				calls++
				if calls <= len(tc.fails) {
					return tc.fails[calls-1]
				}
				return nil
			}
			run := attempts
			if tc.open {
				run = attemptsToOpen
			}
			err := run(context.Background(), op)
			if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if calls != tc.calls {
				t.Fatalf("%d calls, want %d", calls, tc.calls)
			}
		})
	}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	calls := 0
	err := attempts(ctx, func(context.Context) error { calls++; return forming })
	if !errors.Is(err, forming) || ctx.Err() == nil {
		t.Fatalf("a call asked again past its context: err %v after %d calls", err, calls)
	}
	if calls < 2 || calls > 10 {
		t.Fatalf("%d calls in 200ms with a 50ms pause", calls)
	}
}
