package client

import (
	"errors"
	"testing"

	"github.com/holdfast/holdfast/messages"
)

func TestFenceStringRoundTrip(t *testing.T) {
	f := Fence{LeaseID: "3-1042", Epoch: 2}
	if f.String() != "3-1042@2" {
		t.Fatalf("String() = %q", f.String())
	}
	g, err := ParseFence("3-1042@2")
	if err != nil || g != f {
		t.Fatalf("ParseFence = %v, %v", g, err)
	}
	for _, bad := range []string{"", "3-1042", "@2", "3-1042@", "3-1042@0", "3-1042@x", "03-1@1", "3-0@1", "a-b@1"} {
		if _, err := ParseFence(bad); err == nil {
			t.Fatalf("ParseFence(%q) accepted", bad)
		}
	}
	if FenceOf(&messages.Lease{LeaseId: "1-2", LeaseEpoch: 3}) != (Fence{"1-2", 3}) || !FenceOf(nil).IsZero() {
		t.Fatal("FenceOf")
	}
}

func TestFenceCompare(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"3-10@1", "3-10@1", 0},
		{"3-10@1", "3-10@2", -1}, // same lease, revoked or released since
		{"3-10@2", "3-10@1", 1},
		{"3-10@5", "3-11@1", -1}, // a later lease of the shard wins whatever the epoch
		{"3-100@1", "3-99@3", 1}, // numeric, not lexical
	}
	for _, c := range cases {
		a, _ := ParseFence(c.a)
		b, _ := ParseFence(c.b)
		got, err := a.Compare(b)
		if err != nil || got != c.want {
			t.Fatalf("%s vs %s = %d, %v; want %d", c.a, c.b, got, err, c.want)
		}
		if a.IsStale(b) != (c.want < 0) {
			t.Fatalf("%s IsStale(%s) = %v", c.a, c.b, a.IsStale(b))
		}
	}
	if _, err := (Fence{"1-5", 1}).Compare(Fence{"2-5", 1}); !errors.Is(err, ErrIncomparableFences) {
		t.Fatal("fences of different shards compared")
	}
	if !(Fence{"1-5", 1}).IsStale(Fence{"2-1", 1}) || !(Fence{"x", 1}).IsStale(Fence{"1-1", 1}) {
		t.Fatal("incomparable fences must count as stale")
	}
}

func TestFenceGuard(t *testing.T) {
	var g FenceGuard
	old := Fence{"2-40", 1}
	if err := g.Admit("db/primary", old); err != nil {
		t.Fatal(err)
	}
	if err := g.Admit("db/primary", old); err != nil {
		t.Fatalf("same fence again: %v", err)
	}
	g.Observe("db/primary", Fence{"2-40", 2}) // the lease was revoked
	if err := g.Admit("db/primary", old); !errors.Is(err, ErrStaleFence) {
		t.Fatalf("stale fence admitted: %v", err)
	}
	next := Fence{"2-57", 1}
	if err := g.Admit("db/primary", next); err != nil {
		t.Fatal(err)
	}
	if f, ok := g.Latest("db/primary"); !ok || f != next {
		t.Fatalf("Latest = %v %v", f, ok)
	}
	if err := g.Admit("db/primary", Fence{"5-99", 1}); !errors.Is(err, ErrIncomparableFences) {
		t.Fatalf("fence of another shard: %v", err)
	}
	if err := g.Admit("other", Fence{"junk", 1}); !errors.Is(err, ErrIncomparableFences) {
		t.Fatalf("invalid first fence: %v", err)
	}
	if err := g.Admit("other", Fence{"0-1", 1}); err != nil {
		t.Fatal(err)
	}
}
