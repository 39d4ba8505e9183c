package client

import (
	"errors"
	"fmt"

	"github.com/holdfast/holdfast/messages"
)

// CommittedError is a committed domain outcome turned into an error by
// Result.Err: the command has a log position and this is its final result
// (resource_busy, lease_not_found, stale_epoch, ...). Retrying the same
// operation id replays it.
type CommittedError struct {
	Op          string
	Code        string
	Message     string
	LSN         uint64
	OperationID string
}

func (e *CommittedError) Error() string {
	s := fmt.Sprintf("holdfast %s: committed %s", e.Op, e.Code)
	if e.LSN != 0 {
		s += fmt.Sprintf(" (lsn %d)", e.LSN)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Is matches a *CommittedError target whose Code is empty or equal, so that
// errors.Is(err, &CommittedError{Code: "resource_busy"}) and
// errors.Is(err, ErrCommitted) work.
func (e *CommittedError) Is(target error) bool {
	t, ok := target.(*CommittedError)
	return ok && (t.Code == "" || t.Code == e.Code)
}

// DefiniteError is a rejected/definite reply: not committed, no effect, and
// not remembered by the server (retrying the same operation id later executes
// it fresh).
type DefiniteError struct {
	Op          string
	Code        string
	Message     string
	OperationID string
	// Reply is the decoded rejection reply.
	Reply *messages.Reply
}

func (e *DefiniteError) Error() string {
	s := fmt.Sprintf("holdfast %s: rejected (definite) %s", e.Op, e.Code)
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Is matches a *DefiniteError target whose Code is empty or equal.
func (e *DefiniteError) Is(target error) bool {
	t, ok := target.(*DefiniteError)
	return ok && (t.Code == "" || t.Code == e.Code)
}

// IndefiniteError means the outcome of the call is unknown: the server
// answered rejected/indefinite (engine_halted, storage_failure, timeout) or
// the transport failed (Code "timeout", "no_responders", "transport_error",
// "canceled", "bad_reply"), and the client's retries did not settle it. For a
// write, the command may or may not have committed: the caller resolves it by
// retrying with the same OperationID (see OperationID()).
type IndefiniteError struct {
	Op string
	// OperationID is the operation id to retry with ("" for reads).
	OperationID string
	Code        string
	Message     string
	// Attempts is how many requests were sent.
	Attempts int
	// Reply is the last rejected/indefinite reply, if the last failure was
	// one.
	Reply *messages.Reply
	// Err is the transport or context error, if any.
	Err error
}

func (e *IndefiniteError) Error() string {
	s := fmt.Sprintf("holdfast %s: outcome unknown (%s) after %d attempt(s)", e.Op, e.Code, e.Attempts)
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.OperationID != "" {
		s += "; retry with operation id " + e.OperationID
	}
	return s
}

func (e *IndefiniteError) Unwrap() error { return e.Err }

// Is matches an *IndefiniteError target whose Code is empty or equal.
func (e *IndefiniteError) Is(target error) bool {
	t, ok := target.(*IndefiniteError)
	return ok && (t.Code == "" || t.Code == e.Code)
}

// Sentinels for errors.Is: each matches every error of its class.
var (
	ErrCommitted  error = &CommittedError{}
	ErrDefinite   error = &DefiniteError{}
	ErrIndefinite error = &IndefiniteError{}
)

// OperationID returns the operation id to retry with when err is (or wraps)
// an *IndefiniteError, else "".
func OperationID(err error) string {
	var ie *IndefiniteError
	if errors.As(err, &ie) {
		return ie.OperationID
	}
	return ""
}

// Code returns the code carried by err when it is one of the three classes,
// else "".
func Code(err error) string {
	var (
		ce *CommittedError
		de *DefiniteError
		ie *IndefiniteError
	)
	switch {
	case errors.As(err, &ce):
		return ce.Code
	case errors.As(err, &de):
		return de.Code
	case errors.As(err, &ie):
		return ie.Code
	}
	return ""
}
