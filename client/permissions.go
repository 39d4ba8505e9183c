package client

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
)

// A request to a subject the connection's user may not publish to is dropped by the
// NATS server, which tells the connection so asynchronously (-ERR 'Permissions Violation
// for Publish to "..."'); nats.go hands that to the connection's error handler and the
// request itself waits for its timeout, which would make a configuration mistake look
// like a stopped server ("outcome unknown"). The client watches the connection's errors
// and fails a request waiting on a refused subject at once, definite: nothing was
// delivered, so nothing can have happened.

// CodePermissionDenied is the Code of the DefiniteError of a request NATS refused for
// the connection's permissions (to publish the request, or to subscribe to the reply
// inbox).
const CodePermissionDenied = "permission_denied"

// PermissionError is why a request was refused by NATS for permissions.
type PermissionError struct {
	Subject string // the subject refused
	Action  string // "publish" or "subscribe"
	Err     error  // nats.go's error (wraps nats.ErrPermissionViolation)
}

func (e *PermissionError) Error() string {
	return fmt.Sprintf("NATS refused to let this connection %s to %q: a permissions violation (the user's publish/subscribe permissions do not allow it)", e.Action, e.Subject)
}

func (e *PermissionError) Unwrap() error { return e.Err }

var violation = regexp.MustCompile(`Permissions Violation for (Publish|Subscription) to "([^"]+)"`)

// permWatch is one connection's watch of its permission errors, shared by every client
// of the connection.
type permWatch struct {
	mu      sync.Mutex
	waiters map[*permWaiter]struct{}
}

type permWaiter struct {
	subject string
	cancel  context.CancelFunc              // ends the request's attempt
	denied  atomic.Pointer[PermissionError] // why, set before cancel
}

// permWatches are the watched connections; a connection leaves when it closes.
var permWatches sync.Map // *nats.Conn → *permWatch

// watchPermissions installs the watch on nc once (chained before the handlers nc has).
func watchPermissions(nc *nats.Conn) *permWatch {
	if w, ok := permWatches.Load(nc); ok {
		return w.(*permWatch)
	}
	w := &permWatch{waiters: map[*permWaiter]struct{}{}}
	if actual, loaded := permWatches.LoadOrStore(nc, w); loaded {
		return actual.(*permWatch)
	}
	prevErr := nc.ErrorHandler()
	nc.SetErrorHandler(func(c *nats.Conn, s *nats.Subscription, err error) {
		w.notify(c, err)
		if prevErr != nil {
			prevErr(c, s, err)
		}
	})
	prevClosed := nc.ClosedHandler()
	nc.SetClosedHandler(func(c *nats.Conn) {
		permWatches.Delete(c)
		if prevClosed != nil {
			prevClosed(c)
		}
	})
	return w
}

// wait registers a request to subject until stop: if NATS refuses it meanwhile, cancel
// ends the request's attempt and the waiter's denied says why. (One context per attempt,
// not two: this is on every request's path.)
func (w *permWatch) wait(subject string, cancel context.CancelFunc) *permWaiter {
	pw := &permWaiter{subject: subject, cancel: cancel}
	w.mu.Lock()
	w.waiters[pw] = struct{}{}
	w.mu.Unlock()
	return pw
}

// stop ends a wait.
func (w *permWatch) stop(pw *permWaiter) {
	w.mu.Lock()
	delete(w.waiters, pw)
	w.mu.Unlock()
}

// notify fails the requests a permissions violation concerns: those published to the
// refused subject, or every one when the reply inbox cannot be subscribed.
func (w *permWatch) notify(nc *nats.Conn, err error) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return
	}
	m := violation.FindStringSubmatch(err.Error())
	if m == nil {
		return
	}
	subject := m[2]
	pe := &PermissionError{Subject: subject, Action: "publish", Err: err}
	inbox := false
	if m[1] == "Subscription" {
		pe.Action = "subscribe"
		prefix := nc.Opts.InboxPrefix
		if prefix == "" {
			prefix = nats.InboxPrefix
		}
		inbox = strings.HasPrefix(subject, strings.TrimSuffix(prefix, ".")+".")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for pw := range w.waiters {
		if inbox || (m[1] == "Publish" && pw.subject == subject) {
			pw.denied.Store(pe)
			pw.cancel()
		}
	}
}

// refusal is why NATS refused the request waited for, or nil (also for no waiter).
func (pw *permWaiter) refusal() *PermissionError {
	if pw == nil {
		return nil
	}
	return pw.denied.Load()
}
