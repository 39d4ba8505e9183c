package contract

import (
	"strings"
	"testing"
	"time"
)

func TestTimingDefaults(t *testing.T) {
	tm := NewTiming(0, 0)
	want := Timing{Attempt: 2 * time.Second, Request: 1500 * time.Millisecond, ForwardRetry: 50 * time.Millisecond,
		Drain: 1500 * time.Millisecond, OwnershipTTL: 5 * time.Second, Renew: 1250 * time.Millisecond,
		Serve: 3750 * time.Millisecond, Settle: time.Second, JournalCall: 937500 * time.Microsecond}
	if tm != want {
		t.Fatalf("NewTiming(0, 0) = %+v\nwant %+v", tm, want)
	}
	if err := tm.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := NewTiming(time.Minute, 0).JournalCall; got != 2*time.Second {
		t.Fatalf("journal call at a 1m TTL = %v, want the 2s cap", got)
	}
}

// Every table NewTiming derives holds the relations, over the TTLs a node accepts (whole
// seconds, at least one) and attempts from a tenth of a second.
func TestTimingDerivedHolds(t *testing.T) {
	for ttl := time.Second; ttl <= 120*time.Second; ttl += time.Second {
		for _, attempt := range []time.Duration{134 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second, time.Minute} {
			if err := NewTiming(ttl, attempt).Validate(); err != nil {
				t.Fatalf("ttl %v attempt %v: %v", ttl, attempt, err)
			}
		}
	}
}

// Each relation, broken alone, is refused with its reason.
func TestTimingValidateRefusesInvertedTimeouts(t *testing.T) {
	for _, c := range []struct {
		name   string
		mutate func(*Timing)
		want   string
	}{
		{"server answers after the client stopped waiting", func(t *Timing) { t.Request = 10 * time.Second }, "below the client attempt"},
		{"request no longer than one retry", func(t *Timing) { t.Request = 60 * time.Millisecond; t.Drain = t.Request }, "no second send"},
		{"drain cuts requests off", func(t *Timing) { t.Drain = time.Second }, "cut off"},
		{"renewals too rare", func(t *Timing) { t.Renew = 4 * time.Second }, "serve window"},
		{"serving past the claim", func(t *Timing) { t.Serve = 5 * time.Second }, "before the claim lapses"},
		{"a journal stall outlasts the claim", func(t *Timing) { t.JournalCall = 2 * time.Second }, "past the serve window"},
		{"a starting node waits past its renewals", func(t *Timing) { t.Settle = 2 * time.Second }, "renewal period"},
		{"zero", func(t *Timing) { t.ForwardRetry = 0 }, "positive"},
	} {
		tm := NewTiming(0, 0)
		c.mutate(&tm)
		err := tm.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate() = %v, want an error saying %q", c.name, err, c.want)
		}
	}
}
