//go:build unix

package integration

import (
	"encoding/json"
	"testing"

	"github.com/holdfast/holdfast/integration/internal/check"
	"github.com/holdfast/holdfast/integration/internal/history"
	"github.com/holdfast/holdfast/messages"
)

// doctorRealHistory proves the checkers are not vacuous on a real history: it breaks a
// copy of a passing history the way a faulty server would, in several ways, and expects
// the responsible checker to fail each time. (The check package's unit tests do the
// same on small handmade histories.)
func doctorRealHistory(t *testing.T, recs []history.Record) {
	t.Helper()
	reply := func(r *history.Record) *messages.Reply {
		m := &messages.Reply{}
		if r.Kind != history.KindCall || len(r.Reply) == 0 || messages.UnmarshalJSONTolerant(r.Reply, m) != nil {
			return nil
		}
		return m
	}
	event := func(r *history.Record) *messages.Event {
		m := &messages.Event{}
		if r.Kind != history.KindEvent || messages.UnmarshalJSONTolerant(r.Event, m) != nil {
			return nil
		}
		return m
	}
	doctors := []struct {
		name    string
		checker string
		// apply breaks the n-th place it can in a copy; nil: fewer than n+1 places.
		apply func(rs []history.Record, n int) []history.Record
	}{
		{"drop an activation event", check.CEvents, func(rs []history.Record, n int) []history.Record {
			for i := range rs {
				if e := event(&rs[i]); e != nil && e.Event == "lease.activated" && next(&n) {
					return append(rs[:i:i], rs[i+1:]...)
				}
			}
			return nil
		}},
		{"store an event twice", check.CEvents, func(rs []history.Record, n int) []history.Record {
			for i := range rs {
				if rs[i].Kind == history.KindEvent && next(&n) {
					d := rs[i]
					d.Seq += 1 << 40
					return append(rs, d)
				}
			}
			return nil
		}},
		{"a resource read one version off", check.CLinear, func(rs []history.Record, n int) []history.Record {
			for i := range rs {
				if r := reply(&rs[i]); r != nil && rs[i].Verb == "resource.get" && r.Resource != nil && rs[i].Intent == "" && next(&n) {
					r.Resource.Version++
					rs[i].Reply, _ = messages.MarshalJSON(r)
					return rs
				}
			}
			return nil
		}},
		{"a stale epoch accepted", check.CFencing, func(rs []history.Record, n int) []history.Record {
			for i := range rs {
				if r := reply(&rs[i]); r != nil && r.Code == "stale_epoch" && rs[i].Intent == "" && next(&n) {
					r.Code, r.Message = "ok", ""
					rs[i].Reply, _ = messages.MarshalJSON(r)
					return rs
				}
			}
			return nil
		}},
		{"an expiry before the deadline", check.CExpiry, func(rs []history.Record, n int) []history.Record {
			for i := range rs {
				if e := event(&rs[i]); e != nil && e.Event == "lease.expired" && e.Lease.DeadlineSlot > 0 && next(&n) {
					e.Slot = e.Lease.DeadlineSlot - 1
					rs[i].Event, _ = messages.MarshalJSON(e)
					return rs
				}
			}
			return nil
		}},
		{"a second answer with another lsn", check.CDedupe, func(rs []history.Record, n int) []history.Record {
			for i := range rs {
				if r := reply(&rs[i]); r != nil && r.Outcome == "committed" && r.Lsn > 0 && rs[i].Intent == "" && next(&n) {
					d := rs[i]
					d.Attempt++
					d.Invoke, d.Return = d.Return+1, d.Return+2
					r.Lsn++
					r.FromRetryCache = true
					d.Reply, _ = messages.MarshalJSON(r)
					return append(rs, d)
				}
			}
			return nil
		}},
		{"a pool read with one unit too many", check.CLinear, func(rs []history.Record, n int) []history.Record {
			for i := range rs {
				if r := reply(&rs[i]); r != nil && rs[i].Verb == "pool.get" && r.Pool != nil && r.Pool.Available > 0 && next(&n) {
					r.Pool.Available--
					r.Pool.Reserved++
					rs[i].Reply, _ = messages.MarshalJSON(r)
					return rs
				}
			}
			return nil
		}},
	}
	for _, d := range doctors {
		// A read can be off and still linearizable when a write whose outcome the client
		// never learnt (a closed connection, a timeout) overlaps it: that write may be what
		// it saw. So each break is tried at up to doctorTries places; the checker must
		// catch one of them.
		tried, caught := 0, false
		for n := range doctorTries {
			cp := make([]history.Record, len(recs))
			copy(cp, recs)
			doctored := d.apply(cp, n)
			if doctored == nil {
				break
			}
			tried++
			rep := check.Round(doctored, check.Options{Skip: map[string]bool{}})
			if rep.Has(d.checker) {
				for _, v := range rep.Violations {
					if v.Checker == d.checker {
						b, _ := json.Marshal(v.Message)
						t.Logf("doctor %q (place %d): %s caught it: %s", d.name, n+1, d.checker, b)
						break
					}
				}
				caught = true
				break
			}
			t.Logf("doctor %q (place %d): %s did not notice; trying another place", d.name, n+1, d.checker)
		}
		switch {
		case caught:
		case tried == 0:
			t.Logf("doctor %q: nothing to doctor in this history", d.name)
		default:
			t.Errorf("doctor %q: %s noticed none of %d places broken", d.name, d.checker, tried)
		}
	}
}

// doctorTries bounds the places one doctor breaks in turn.
const doctorTries = 8

// next counts down to the candidate a doctor breaks: true at the n-th call (from 0).
func next(n *int) bool {
	*n--
	return *n < 0
}
