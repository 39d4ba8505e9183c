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
		apply   func([]history.Record) []history.Record // nil result: not applicable
	}{
		{"drop an activation event", check.CEvents, func(rs []history.Record) []history.Record {
			for i := range rs {
				if e := event(&rs[i]); e != nil && e.Event == "lease.activated" {
					return append(rs[:i:i], rs[i+1:]...)
				}
			}
			return nil
		}},
		{"store an event twice", check.CEvents, func(rs []history.Record) []history.Record {
			for i := range rs {
				if rs[i].Kind == history.KindEvent {
					d := rs[i]
					d.Seq += 1 << 40
					return append(rs, d)
				}
			}
			return nil
		}},
		{"a resource read one version off", check.CLinear, func(rs []history.Record) []history.Record {
			for i := range rs {
				if r := reply(&rs[i]); r != nil && rs[i].Verb == "resource.get" && r.Resource != nil && rs[i].Intent == "" {
					r.Resource.Version++
					rs[i].Reply, _ = messages.MarshalJSON(r)
					return rs
				}
			}
			return nil
		}},
		{"a stale epoch accepted", check.CFencing, func(rs []history.Record) []history.Record {
			for i := range rs {
				if r := reply(&rs[i]); r != nil && r.Code == "stale_epoch" && rs[i].Intent == "" {
					r.Code, r.Message = "ok", ""
					rs[i].Reply, _ = messages.MarshalJSON(r)
					return rs
				}
			}
			return nil
		}},
		{"an expiry before the deadline", check.CExpiry, func(rs []history.Record) []history.Record {
			for i := range rs {
				if e := event(&rs[i]); e != nil && e.Event == "lease.expired" && e.Lease.DeadlineSlot > 0 {
					e.Slot = e.Lease.DeadlineSlot - 1
					rs[i].Event, _ = messages.MarshalJSON(e)
					return rs
				}
			}
			return nil
		}},
		{"a second answer with another lsn", check.CDedupe, func(rs []history.Record) []history.Record {
			for i := range rs {
				if r := reply(&rs[i]); r != nil && r.Outcome == "committed" && r.Lsn > 0 && rs[i].Intent == "" {
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
		{"a pool read with one unit too many", check.CLinear, func(rs []history.Record) []history.Record {
			for i := range rs {
				if r := reply(&rs[i]); r != nil && rs[i].Verb == "pool.get" && r.Pool != nil && r.Pool.Available > 0 {
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
		cp := make([]history.Record, len(recs))
		copy(cp, recs)
		doctored := d.apply(cp)
		if doctored == nil {
			t.Logf("doctor %q: nothing to doctor in this history", d.name)
			continue
		}
		rep := check.Round(doctored, check.Options{Skip: map[string]bool{}})
		if !rep.Has(d.checker) {
			t.Errorf("doctor %q: %s did not notice:\n%s", d.name, d.checker, rep)
		} else {
			for _, v := range rep.Violations {
				if v.Checker == d.checker {
					b, _ := json.Marshal(v.Message)
					t.Logf("doctor %q: %s caught it: %s", d.name, d.checker, b)
					break
				}
			}
		}
	}
}
