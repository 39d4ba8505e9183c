//go:build unix

package integration

import (
	"context"
	"encoding/base64"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/internal/eventstest"
	"github.com/holdfast/holdfast/messages"
)

// The allocator verbs (docs/api.md Part IV) while the server is killed with SIGKILL and
// restarted every 0.7 s: clients reserve any value of shared ranges with owner labels,
// release by value, import batches of specific values, free their owner's leases with
// lease.release_all, hold and consume tickets of a pool, look values up and page through
// the ranges' allocations. Every answer they got is then judged against the shards' own
// record, the event stream (one lsn order per shard):
//
//   - no range value was granted while a live lease held it;
//   - every range.lookup agrees with the history at its applied_lsn: held by exactly the
//     lease holding it then, free when none did;
//   - every page of range.allocations lists, at its applied_lsn, exactly the values held
//     in the part of the range it covers, with their leases; across the pages of a walk
//     values only grow (never one twice);
//   - consumed units never come back: a pool's consumed count never decreases, and at the
//     end it is the sum of the consumed leases' units.
func TestAllocatorsSurviveKills(t *testing.T) {
	if testing.Short() {
		t.Skip("allocator fault test")
	}
	srv := newServer(t, 3)
	nc, c := reconnectingClient(t, srv.URL(), client.WithTimeout(2*time.Second), client.WithRetry(50, 20*time.Millisecond, 500*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ranges := []client.RangeSpec{
		{ID: "a/vx", First: 0, Last: 47, Strategy: messages.StrategyRandom},
		{ID: "b/ports", First: 100, Last: 139, Strategy: messages.StrategyLeastRecentlyFreed,
			Excluded: []client.Interval{{First: 120, Last: 121}}, StaticBand: &client.Interval{First: 100, Last: 103}},
	}
	for _, s := range ranges {
		if r, err := c.CreateRangeSpec(ctx, s); err != nil || !r.OK() {
			t.Fatalf("create %s: %v %+v", s.ID, err, r)
		}
	}
	if r, err := c.CreatePool(ctx, "c/tickets", 60); err != nil || !r.OK() {
		t.Fatalf("create pool: %v %+v", err, r)
	}

	var mu sync.Mutex
	var lookups []lookupSeen
	var pages [][]pageSeen // walks
	var consumed []poolSeen
	stats := map[string]int{}
	note := func(k string) { mu.Lock(); stats[k]++; mu.Unlock() }
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		holder, label := fmt.Sprintf("h%d", w), fmt.Sprintf("owner=o%d", w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			held := map[string][]uint64{} // range → values this client holds (acknowledged)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				op := func(s string) client.WriteOption {
					return client.WithOperationID(fmt.Sprintf("%s-%d-%s", holder, i, s))
				}
				rg := ranges[i%2].ID
				switch i % 7 {
				case 0, 1: // any value, with the owner's label
					r, err := c.Reserve(ctx, client.ReserveRequest{Holder: holder, Activate: true, Labels: map[string]string{"owner": "o" + holder[1:]},
						Members: []*messages.Member{client.RangeAny(rg)}}, op("r"))
					if err != nil {
						note("reserve unknown")
						continue
					}
					note("reserve " + r.Code)
					if r.OK() {
						held[rg] = append(held[rg], r.Lease.Members[0].GetValue())
					}
				case 2: // look up a value of ours, or any
					v := uint64(i % 48)
					if vs := held[rg]; len(vs) > 0 {
						v = vs[i%len(vs)]
					}
					if rg == "b/ports" {
						v = 100 + v%40
					}
					r, err := c.LookupValue(ctx, rg, v)
					if err == nil && r.OK() {
						mu.Lock()
						lookups = append(lookups, lookupSeen{rng: rg, value: v, state: r.State, lease: r.Lease.GetLeaseId(), at: r.AppliedLSN})
						mu.Unlock()
					}
				case 3: // release one of ours by its value
					vs := held[rg]
					if len(vs) == 0 {
						continue
					}
					r, err := c.ReleaseValue(ctx, holder, rg, vs[0], 0, false, op("v"))
					if err != nil {
						note("release unknown")
						continue
					}
					note("range.release " + r.Code)
					held[rg] = vs[1:] // released now, or (value_free) freed by our release_all before
				case 4: // import a batch of specific values (some may be taken: all or nothing)
					var batch []client.ImportLease
					for j := 0; j < 1+i%4; j++ {
						batch = append(batch, client.ImportLease{Holder: holder, Activate: true, Labels: map[string]string{"owner": "o" + holder[1:]},
							Members: []*messages.Member{client.RangeValue("a/vx", uint64((i*7+j*11+int(holder[1]))%48))}})
					}
					r, err := c.Import(ctx, batch, op("i"))
					if err != nil {
						note("import unknown")
						continue
					}
					note("import " + r.Code)
					if r.OK() {
						for _, l := range r.Leases {
							held["a/vx"] = append(held["a/vx"], l.Members[0].GetValue())
						}
					}
				case 5: // free everything this owner holds, then hold and consume tickets
					for more, n := true, 0; more && n < 20; n++ {
						r, err := c.ReleaseAll(ctx, holder, label, 3, op(fmt.Sprintf("all%d", n)))
						if err != nil {
							note("release_all unknown")
							break
						}
						more = r.More
					}
					held = map[string][]uint64{}
					r, err := c.Reserve(ctx, client.ReserveRequest{Holder: holder, TTL: 5 * time.Second,
						Members: []*messages.Member{client.PoolUnits("c/tickets", 1)}}, op("t"))
					if err != nil || !r.OK() {
						note("tickets unavailable")
						continue
					}
					if r, err := c.Consume(ctx, holder, r.Fence(), op("k")); err == nil {
						note("consume " + r.Code)
					}
					if p, err := c.GetPool(ctx, "c/tickets"); err == nil && p.OK() {
						mu.Lock()
						consumed = append(consumed, poolSeen{consumed: p.Pool.GetConsumed(), held: p.Pool.GetReserved() + p.Pool.GetActive(), at: p.AppliedLSN})
						mu.Unlock()
					}
				case 6: // page through a range's allocations
					var walk []pageSeen
					cursor := ""
					for n := 0; n < 50; n++ {
						r, err := c.ListAllocations(ctx, rg, client.Page{Cursor: cursor, Limit: 5})
						if err != nil || !r.OK() {
							break
						}
						p := pageSeen{rng: rg, at: r.AppliedLSN, last: r.NextCursor == "", from: cursorValue(cursor)}
						for _, a := range r.Allocations {
							p.values = append(p.values, a.GetValue())
							p.leases = append(p.leases, a.GetLease().GetLeaseId())
						}
						walk = append(walk, p)
						if cursor = r.NextCursor; cursor == "" {
							break
						}
					}
					mu.Lock()
					pages = append(pages, walk)
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < 8; i++ {
		time.Sleep(700 * time.Millisecond)
		srv.Kill()
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(60 * time.Second):
		t.Fatal("the clients did not stop within 60 s of the last fault")
	}
	t.Logf("%d lookups, %d walks, %d pool reads; %v; server started %d times", len(lookups), len(pages), len(consumed), stats, srv.Starts())
	if len(lookups) < 20 || len(pages) < 10 || len(consumed) < 5 {
		t.Fatalf("too little was checked: %d lookups, %d walks, %d pool reads", len(lookups), len(pages), len(consumed))
	}
	// The history, once the stream has caught up with every answer given.
	var final *allocHistory
	var maxAt uint64
	for _, l := range lookups {
		maxAt = max(maxAt, l.at)
	}
	for attempt := 0; ; attempt++ {
		final = readAllocHistory(t, nc)
		if final.maxLSN >= maxAt || attempt == 30 {
			break
		}
		time.Sleep(time.Second)
	}
	if len(final.problems) > 0 {
		t.Fatalf("event stream: %v", final.problems)
	}
	for _, l := range lookups {
		want := final.holderAt(l.rng, l.value, l.at)
		switch {
		case l.state == client.ValueHeld && l.lease != want:
			t.Errorf("lookup %s %d at lsn %d: held by %s, the history says %q", l.rng, l.value, l.at, l.lease, want)
		case l.state == client.ValueFree && want != "":
			t.Errorf("lookup %s %d at lsn %d: free, the history says held by %s", l.rng, l.value, l.at, want)
		case l.state == client.ValueExcluded && (l.rng != "b/ports" || l.value < 120 || l.value > 121):
			t.Errorf("lookup %s %d: excluded", l.rng, l.value)
		}
	}
	for _, walk := range pages {
		prev := uint64(0) // the walk's last value shown
		for k, p := range walk {
			hi := ^uint64(0) // the page covers [p.from, hi]
			if !p.last && len(p.values) > 0 {
				hi = p.values[len(p.values)-1]
			}
			for i, v := range p.values {
				if (k > 0 || i > 0) && v <= prev {
					t.Errorf("%s: a walk shows %d after %d", p.rng, v, prev)
				}
				if want := final.holderAt(p.rng, v, p.at); want != p.leases[i] {
					t.Errorf("%s page at lsn %d: %d with lease %s, the history says %q", p.rng, p.at, v, p.leases[i], want)
				}
				prev = v
			}
			for _, v := range final.heldAt(p.rng, p.at) {
				if v >= p.from && v <= hi && !contains(p.values, v) {
					t.Errorf("%s page at lsn %d covering [%d, %d] lacks %d, held then", p.rng, p.at, p.from, hi, v)
				}
			}
		}
	}
	sort.Slice(consumed, func(i, j int) bool { return consumed[i].at < consumed[j].at })
	for i, p := range consumed {
		if i > 0 && p.consumed < consumed[i-1].consumed {
			t.Errorf("consumed went back from %d (lsn %d) to %d (lsn %d)", consumed[i-1].consumed, consumed[i-1].at, p.consumed, p.at)
		}
		if p.consumed+p.held > 60 {
			t.Errorf("pool at lsn %d: consumed %d + held %d > capacity 60", p.at, p.consumed, p.held)
		}
	}
	p, err := c.GetPool(ctx, "c/tickets")
	if err != nil || p.Pool.GetConsumed() != final.consumed {
		t.Fatalf("pool consumed %d (%v), the stream's consumed leases hold %d", p.Pool.GetConsumed(), err, final.consumed)
	}
}

// cursorValue is the value a range.allocations cursor goes on at (the test knows the
// cursor's form — base64url of the listing's scope, 0x01, and the shard's position, a
// contract key cursor; clients treat it as opaque).
func cursorValue(cursor string) uint64 {
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return 0
	}
	_, position, _ := strings.Cut(string(b), "\x01")
	key, found, ok := contract.ParseKeyCursor(position)
	if !found || !ok {
		return 0
	}
	v, _ := strconv.ParseUint(key, 10, 64)
	return v
}

func contains(vs []uint64, v uint64) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

type lookupSeen struct {
	rng, state, lease string
	value, at         uint64
}

type pageSeen struct {
	rng    string
	from   uint64 // the value the page starts at: its cursor's
	at     uint64
	last   bool
	values []uint64
	leases []string
}

type poolSeen struct{ consumed, held, at uint64 }

// allocHistory is, per range value, who held it from which lsn to which (one shard per
// range, so lsns order it), from the event stream.
type allocHistory struct {
	spans    map[string]map[uint64][]span // range → value → spans in lsn order
	consumed uint64
	maxLSN   uint64
	problems []string
}

type span struct {
	lease    string
	from, to uint64 // held at lsns from..to-1; to 0: still held
}

func readAllocHistory(t *testing.T, nc *nats.Conn) *allocHistory {
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h := &allocHistory{spans: map[string]map[uint64][]span{}}
	last := map[uint32]uint64{}
	eventstest.Consume(ctx, t, js, func(_ jetstream.Msg, e *messages.Event) {
		if e.GetLsn() < last[e.GetShard()] {
			h.problems = append(h.problems, fmt.Sprintf("shard %d: lsn %d after %d", e.GetShard(), e.GetLsn(), last[e.GetShard()]))
		}
		last[e.GetShard()] = e.GetLsn()
		h.maxLSN = max(h.maxLSN, e.GetLsn())
		l := e.GetLease()
		for _, m := range l.GetMembers() {
			if m.GetRangeId() == "" {
				continue
			}
			vs := h.spans[m.GetRangeId()]
			if vs == nil {
				vs = map[uint64][]span{}
				h.spans[m.GetRangeId()] = vs
			}
			ss := vs[m.GetValue()]
			switch e.GetEvent() {
			case "lease.reserved", "lease.activated":
				if e.GetEvent() == "lease.activated" && len(ss) > 0 && ss[len(ss)-1].lease == l.GetLeaseId() && ss[len(ss)-1].to == 0 {
					continue // a reserved lease activated: still the same hold
				}
				if len(ss) > 0 && ss[len(ss)-1].to == 0 {
					h.problems = append(h.problems, fmt.Sprintf("%s %d granted to %s at lsn %d while %s held it",
						m.GetRangeId(), m.GetValue(), l.GetLeaseId(), e.GetLsn(), ss[len(ss)-1].lease))
				}
				vs[m.GetValue()] = append(ss, span{lease: l.GetLeaseId(), from: e.GetLsn()})
			case "lease.released", "lease.expired", "lease.revoked", "lease.consumed":
				if n := len(ss); n > 0 && ss[n-1].lease == l.GetLeaseId() && ss[n-1].to == 0 {
					ss[n-1].to = e.GetLsn()
				}
			}
		}
		if e.GetEvent() == "lease.consumed" {
			for _, m := range l.GetMembers() {
				h.consumed += m.GetQuantity()
			}
		}
	})
	return h
}

// holderAt is the lease holding value v of range rng at lsn at ("" when none).
func (h *allocHistory) holderAt(rng string, v, at uint64) string {
	for _, s := range h.spans[rng][v] {
		if s.from <= at && (s.to == 0 || at < s.to) {
			return s.lease
		}
	}
	return ""
}

// heldAt lists the values of rng held at lsn at.
func (h *allocHistory) heldAt(rng string, at uint64) []uint64 {
	var out []uint64
	for v := range h.spans[rng] {
		if h.holderAt(rng, v, at) != "" {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
