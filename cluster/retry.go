package cluster

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// What a JetStream error means to Holdfast, and how a call is asked again: every
// classifier of the package and its one retry loop, so that "is this worth asking
// again?" has one answer.

// JetStream's error codes that nats.go names no constant for (nats-server's
// server/jetstream_errors_generated.go).
const (
	jsClusterNoPeers         jetstream.ErrorCode = 10005 // no suitable peers for placement
	jsTemporarilyUnavailable jetstream.ErrorCode = 10008 // JetStream system temporarily unavailable
	jsMessageNotFound        jetstream.ErrorCode = 10037 // no message found
	errCodeInProcess         jetstream.ErrorCode = 10158 // duplicate message id is in process
	errCodeNotReady          jetstream.ErrorCode = 10163 // expected last sequence per subject temporarily unavailable
	errCodeIncompleteBatch   jetstream.ErrorCode = 10176 // an atomic batch is incomplete
	errCodeDuplicateInBatch  jetstream.ErrorCode = 10201 // an atomic batch holds a duplicate message id
	errCodeTooManyInflight   jetstream.ErrorCode = 10210 // too many atomic batches in flight
)

// attemptTimeout bounds one JetStream API call at start-up: a replicated asset another
// node is creating may not answer until its group has a leader, and a silent call is
// better sent again than waited on.
const attemptTimeout = 3 * time.Second

// attemptPause is the wait between two attempts.
const attemptPause = 50 * time.Millisecond

// attempts runs op in attempts of attemptTimeout until it succeeds, fails for good (not
// retryable), or ctx ends: a JetStream asset whose group is electing a leader does not
// answer at all, and a silent call is better sent again than waited on.
func attempts(ctx context.Context, op func(context.Context) error) error {
	return attemptWhile(ctx, retryable, op)
}

// attemptsToOpen is attempts for creating or opening an asset other nodes may be creating at
// the same moment: one that is not yet visible is looked for again too.
func attemptsToOpen(ctx context.Context, op func(context.Context) error) error {
	return attemptWhile(ctx, func(err error) bool { return notYetVisible(err) || retryable(err) }, op)
}

func attemptWhile(ctx context.Context, again func(error) bool, op func(context.Context) error) error {
	for {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		err := op(actx)
		cancel()
		if err == nil || !again(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(attemptPause):
		}
	}
}

// retryable is an error worth one more attempt: transient, or a call not answered in time.
func retryable(err error) bool {
	return transient(err) || errors.Is(err, context.DeadlineExceeded)
}

// transient is an error of a JetStream asset that is being created or whose leader is
// being elected: worth asking again.
func transient(err error) bool {
	switch {
	case apiCode(err) == jsClusterNoPeers:
		return true // a JetStream server of the cluster is not back yet
	case JetStreamForming(err):
		return true // servers started together: the meta leader is being elected (again)
	}
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, jetstream.ErrNoStreamResponse)
}

// JetStreamForming is JetStream's "temporarily unavailable" (10008): a cluster without
// a meta leader, as when its servers have just started together and their first
// leader steps down again while the others are still joining.
func JetStreamForming(err error) bool {
	if apiCode(err) == jsTemporarilyUnavailable {
		return true
	}
	// The object store lists through nats.go's older JetStream API, whose error type is
	// its own (seen: listing snapshots while the store's stream elected a leader).
	var oldErr *nats.APIError
	return errors.As(err, &oldErr) && oldErr.ErrorCode == nats.ErrorCode(jsTemporarilyUnavailable)
}

// notYetVisible is an asset another node has just created, not yet known to the server
// that answered (a replicated stream's group is still forming): look again.
func notYetVisible(err error) bool {
	return errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound)
}

// isInProcess says whether a publish was refused because the same message id is still
// being stored.
func isInProcess(err error) bool { return apiCode(err) == errCodeInProcess }

// isWrongLast is a publish refused by its expected last sequence: the journal was
// appended to by somebody else (fenced), or the expectation was stale.
func isWrongLast(err error) bool {
	c := apiCode(err)
	return c == jetstream.JSErrCodeStreamWrongLastSequence || c == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// isNotReady is an append on a subject refused while the subject's previous append is
// still being stored.
func isNotReady(err error) bool { return apiCode(err) == errCodeNotReady }

// isBatchBusy is an atomic batch's publish refused for "not now" rather than "no".
func isBatchBusy(err error) bool {
	c := apiCode(err)
	return c == errCodeIncompleteBatch || c == errCodeTooManyInflight
}

// isDuplicateInBatch is an atomic batch refused because one of its message ids is in the
// stream's duplicate window already.
func isDuplicateInBatch(err error) bool { return apiCode(err) == errCodeDuplicateInBatch }

// apiCode is the JetStream API error code err carries, 0 when none.
func apiCode(err error) jetstream.ErrorCode {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode
	}
	return 0
}
