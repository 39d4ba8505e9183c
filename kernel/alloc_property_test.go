package kernel

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/holdfast/holdfast/contract"
)

// TestAllocatorProperties drives random streams of the allocator verbs (docs/api.md
// Part IV) that the reference model leaves out — exclusions, static bands, resizes,
// imports, the bulk verbs — together with reserves, releases by value, consumes and
// expiry, and checks after every step what must hold whatever the stream:
//
//   - the kernel's invariants (CheckInvariants: tables, index, range shapes);
//
//   - range.lookup agrees with range.allocations and the excluded listing, value by
//     value, and with the range's counts; paged listings are complete, in order and never
//     show a value or a lease twice, whatever the page size;
//
//   - "any" never picks an excluded value, and picks a static band value only when no
//     other value was free;
//
//   - lease.list by label, paged, is exactly the live leases carrying the label;
//
//   - consumed units never come back;
//
//   - a snapshot restores to the same bytes, and the journal replayed from the start
//     rebuilds the same state.
//
//     go test ./kernel -run AllocatorProperties -kernel.alloc-steps=100000
func TestAllocatorProperties(t *testing.T) {
	seed := *flagModelSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	for i := range uint64(8) {
		s := seed + i
		t.Run(fmt.Sprint(s), func(t *testing.T) {
			p := newAllocProp(t, s)
			for n := 0; n < *flagAllocSteps; n++ {
				p.step(n)
			}
			p.replay()
			if testing.Verbose() {
				mLogStats(t, p.stats)
			}
		})
	}
}

var flagAllocSteps = flag.Int("kernel.alloc-steps", 600, "steps per seed of TestAllocatorProperties")

type allocProp struct {
	t       *testing.T
	r       *rand.Rand
	seed    uint64
	cfg     Config
	k       *Kernel
	slot    uint64
	ops     int
	journal []Entry
	out     Output
	stats   map[string]int    // "verb code" → count, logged with -v
	leases  []uint64          // lease ids the kernel granted, to aim verbs at
	eaten   map[string]uint64 // pool → consumed units last seen
	last    string
}

var (
	apRanges = []struct {
		id          string
		first, last uint64
		strategy    Strategy
	}{{"n1/a", 0, 31, StrategyLowestFree}, {"n1/r", 100, 163, StrategyRandom}, {"n1/l", 0, 15, StrategyLeastRecentlyFreed}}
	apOwners = []string{"u1", "u2", "u3"}
)

func newAllocProp(t *testing.T, seed uint64) *allocProp {
	cfg := DefaultConfig()
	cfg.SlotMillis = 100
	cfg.DedupeWindowSlots = 40
	cfg.HistoryWindowSlots = 30
	cfg.MaxLeases = 64
	cfg.MaxMembers = 160
	cfg.MaxExpirations = 24
	k, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := &allocProp{t: t, r: rand.New(rand.NewPCG(seed, 21)), seed: seed, cfg: cfg, k: k, slot: 1, eaten: map[string]uint64{}, stats: map[string]int{}}
	for _, rg := range apRanges {
		c := &Command{Verb: contract.VerbCreateRange, ObjectID: rg.id, First: rg.first, Last: rg.last, Strategy: rg.strategy}
		if p.r.IntN(2) == 0 {
			v := rg.first + p.r.Uint64N(rg.last-rg.first)
			c.Excluded = []Interval{{v, min(rg.last, v+p.r.Uint64N(3))}}
		}
		if p.r.IntN(2) == 0 {
			c.Band, c.HasBand = Interval{rg.first, rg.first + 3}, true
		}
		p.write(c)
	}
	p.write(&Command{Verb: contract.VerbCreatePool, ObjectID: "n1/p", Capacity: 8})
	p.write(&Command{Verb: contract.VerbCreateResource, ObjectID: "n1/x"})
	p.write(&Command{Verb: contract.VerbCreateResource, ObjectID: "n1/y"})
	return p
}

func (p *allocProp) fail(format string, args ...any) {
	p.t.Helper()
	p.t.Fatalf("seed %d lsn %d after %s: %s\n(go test ./kernel -run 'AllocatorProperties/%d$' -kernel.seed=%d)",
		p.seed, p.k.LastLSN(), p.last, fmt.Sprintf(format, args...), p.seed, p.seed)
}

func (p *allocProp) apply(c *Command) {
	e := Entry{LSN: p.k.LastLSN() + 1, Slot: p.slot, Cmd: c}
	p.journal = append(p.journal, e)
	p.k.Apply(e, &p.out)
	if msg := eventBoundBroken(c, &p.out); msg != "" {
		p.fail("%s", msg)
	}
}

// write runs a client write as the runtime does: admission, the import's skip entries,
// the entry.
func (p *allocProp) write(c *Command) (applied bool) {
	c.Tenant = "t1"
	p.ops++
	c.OperationID = fmt.Sprintf("op%d", p.ops)
	if p.r.IntN(10) == 0 && p.ops > 8 {
		c.OperationID = fmt.Sprintf("op%d", p.ops-1-p.r.IntN(3)) // a retry, or a conflict
	}
	p.last = mFmtCmd(c)
	lim := p.cfg.Limits
	lim.MaxCommandBytes = math.MaxInt
	a := p.k.Admit(c, p.slot, &lim, p.k.LastLSN()+1, NoneInFlight{}, &p.out)
	if !a.Sequence() {
		return false
	}
	for range SkipsBefore(c) {
		p.apply(&Command{Verb: contract.VerbSkip})
	}
	p.apply(c)
	if d := echoDiff(p.k, c, p.slot, &p.out); d != "" {
		p.fail("%s: a retry at once answers otherwise than the first reply: %s", c.Verb, d)
	}
	p.stats[c.Verb.String()+" "+p.out.Code.String()]++
	if !Allowed(c.Verb, p.out.Code) {
		p.fail("%s answered %s", c.Verb, p.out.Code)
	}
	if p.out.Code == contract.CodeOK && p.out.Object == ObjectLease {
		p.leases = append(p.leases, p.out.Lease.LSN)
	}
	for _, ch := range p.out.Changes {
		p.leases = append(p.leases, ch.Lease.LSN)
	}
	return true
}

func (p *allocProp) rangeOf() (string, uint64, uint64) {
	rg := apRanges[p.r.IntN(len(apRanges))]
	p.k.GetRange("t1", rg.id, &p.out)
	return rg.id, p.out.Range.First, p.out.Range.Last
}

func (p *allocProp) member() Member {
	switch p.r.IntN(6) {
	case 0:
		return Member{Kind: MemberPool, ID: "n1/p", Quantity: 1 + p.r.Uint64N(3)}
	case 1:
		return Member{Kind: MemberResource, ID: []string{"n1/x", "n1/y"}[p.r.IntN(2)]}
	}
	id, first, last := p.rangeOf()
	m := Member{Kind: MemberRange, ID: id}
	if p.r.IntN(3) == 0 {
		m.Value, m.HasValue = first+p.r.Uint64N(last-first+2), true
	}
	return m
}

func (p *allocProp) labels() []Label {
	if p.r.IntN(4) == 0 {
		return nil
	}
	return []Label{{"owner_uuid", apOwners[p.r.IntN(len(apOwners))]}}
}

func (p *allocProp) anyLease() uint64 {
	if len(p.leases) == 0 {
		return 1
	}
	return p.leases[len(p.leases)-1-p.r.IntN(min(len(p.leases), 12))]
}

func (p *allocProp) step(n int) {
	p.slot += uint64(p.r.IntN(3))
	before := p.freeOutsideBand()
	c := &Command{}
	switch x := p.r.IntN(100); {
	case x < 28:
		c.Verb, c.HolderID, c.Labels = contract.VerbReserve, []string{"h1", "h2"}[p.r.IntN(2)], p.labels()
		for range 1 + p.r.IntN(3) {
			c.Members = append(c.Members, p.member())
		}
		c.Activate = p.r.IntN(2) == 0
		c.TTLMillis = 100 + uint64(p.r.IntN(2000))
	case x < 36:
		c.Verb, c.LeaseLSN = contract.VerbRelease, p.anyLease()
		p.fence(c)
	case x < 48:
		c.Verb = []Verb{contract.VerbReleaseValue, contract.VerbRevokeValue, contract.VerbReclaimValue}[p.r.IntN(3)]
		var first, last uint64
		c.ObjectID, first, last = p.rangeOf()
		c.Value = first + p.r.Uint64N(last-first+1)
		c.HolderID, c.WholeLease = []string{"h1", "h2"}[p.r.IntN(2)], p.r.IntN(2) == 0
		if c.Verb != contract.VerbReleaseValue {
			c.HolderID, c.WholeLease = "", false
		}
	case x < 56:
		c.Verb = []Verb{contract.VerbExclude, contract.VerbInclude}[p.r.IntN(2)]
		var first, last uint64
		c.ObjectID, first, last = p.rangeOf()
		c.First = first + p.r.Uint64N(last-first+1)
		c.Last = min(last, c.First+p.r.Uint64N(4))
	case x < 61:
		c.Verb = contract.VerbResizeRange
		var first, last uint64
		c.ObjectID, first, last = p.rangeOf()
		c.First = first - min(first, p.r.Uint64N(3))
		if p.r.IntN(2) == 0 {
			c.First = first + p.r.Uint64N(4)
		}
		c.Last = max(c.First, last+p.r.Uint64N(5)-2)
		c.Last = min(c.Last, c.First+150)
	case x < 70:
		c.Verb = contract.VerbImport
		for range 1 + p.r.IntN(4) {
			im := ImportLease{HolderID: []string{"h1", "h2", "h3"}[p.r.IntN(3)], Labels: p.labels(), Activate: p.r.IntN(3) > 0,
				TTLMillis: 500}
			for range 1 + p.r.IntN(2) {
				im.Members = append(im.Members, p.member())
			}
			c.Imports = append(c.Imports, im)
		}
	case x < 78:
		c.Verb = []Verb{contract.VerbReleaseAll, contract.VerbRevokeAll}[p.r.IntN(2)]
		c.Label = Label{"owner_uuid", apOwners[p.r.IntN(len(apOwners))]}
		c.Limit = 1 + uint32(p.r.IntN(3))
		c.Reclaim = p.r.IntN(2) == 0
		if c.Verb == contract.VerbReleaseAll {
			c.HolderID, c.Reclaim = []string{"h1", "h2", "h3"}[p.r.IntN(3)], false
		}
	case x < 84:
		c.Verb, c.LeaseLSN = contract.VerbConsume, p.anyLease()
		p.fence(c)
	case x < 88:
		c.Verb, c.ObjectID = contract.VerbResizePool, "n1/p"
		p.k.GetPool("t1", "n1/p", &p.out)
		c.Capacity = max(1, p.out.Pool.Capacity+p.r.Uint64N(5)-2)
	case x < 92:
		c.Verb, c.LeaseLSN = contract.VerbRevoke, p.anyLease()
	default:
		p.slot += uint64(p.r.IntN(20))
		for _, d := range p.k.DueExpirations(p.slot, 8, nil) {
			p.last = "expire"
			p.apply(&Command{Verb: contract.VerbExpire, Tenant: d.Tenant, LeaseLSN: d.LeaseLSN, Deadline: d.Deadline})
		}
		p.check(n)
		return
	}
	if p.write(c) && p.out.Code == contract.CodeOK && !p.out.FromRetryCache {
		p.checkBand(c, before)
	}
	p.check(n)
}

// fence gives a lease verb the lease's holder and epoch, mostly.
func (p *allocProp) fence(c *Command) {
	c.HolderID, c.Epoch = "h1", 1
	p.k.GetLease("t1", c.LeaseLSN, p.slot, &p.out)
	if p.out.Code == contract.CodeOK && p.r.IntN(5) > 0 {
		c.HolderID, c.Epoch = p.out.Lease.HolderID, p.out.Lease.Epoch
	}
}

// freeOutsideBand counts, per range, the values free for "any" outside the static band.
func (p *allocProp) freeOutsideBand() map[string]int {
	n := map[string]int{}
	for _, rg := range apRanges {
		p.k.GetRange("t1", rg.id, &p.out)
		v := p.out.Range
		for x := v.First; x <= v.Last; x++ {
			var o Output
			if p.k.LookupValue("t1", rg.id, x, &o) == contract.ValueFree && !(v.HasBand && x >= v.Band.First && x <= v.Band.Last) {
				n[rg.id]++
			}
		}
	}
	return n
}

// checkBand: a value "any" took from the static band means no other value was free.
func (p *allocProp) checkBand(c *Command, before map[string]int) {
	var members []Member
	var views []MemberView
	switch c.Verb {
	case contract.VerbReserve:
		members, views = c.Members, slices.Clone(p.out.Lease.Members)
	case contract.VerbImport:
		for i := range c.Imports {
			members = append(members, c.Imports[i].Members...)
			views = append(views, p.out.Changes[i].Lease.Members...)
		}
	default:
		return
	}
	// taken counts, per range, the values outside the band that earlier members of the
	// same command took (named or "any"): "any" never takes a value an earlier member
	// took, so those are not free for it.
	taken := map[string]int{}
	for i, m := range members {
		if m.Kind != MemberRange {
			continue
		}
		var o Output
		p.k.GetRange("t1", m.ID, &o)
		b := o.Range
		v := views[i].Value
		inBand := b.HasBand && v >= b.Band.First && v <= b.Band.Last
		if !m.HasValue && inBand && before[m.ID] > taken[m.ID] {
			p.fail("%s: any took band value %d while %d values outside the band were free", m.ID, v, before[m.ID]-taken[m.ID])
		}
		if !inBand {
			taken[m.ID]++
		}
	}
}

func (p *allocProp) check(n int) {
	if err := p.k.CheckInvariants(); err != nil {
		p.fail("invariants: %v", err)
	}
	for _, rg := range apRanges {
		p.checkRange(rg.id)
	}
	p.checkLabels()
	p.k.GetPool("t1", "n1/p", &p.out)
	if c := p.out.Pool.Consumed; c < p.eaten["n1/p"] {
		p.fail("pool n1/p: consumed went back from %d to %d", p.eaten["n1/p"], c)
	} else {
		p.eaten["n1/p"] = c
	}
	if n%50 == 49 {
		b := p.k.Snapshot(nil)
		k2, err := Restore(p.cfg, b)
		if err != nil {
			p.fail("restore: %v", err)
		}
		if b2 := k2.Snapshot(nil); string(b2) != string(b) {
			p.fail("the restored snapshot differs")
		}
		p.k = k2
	}
}

// checkRange pages through a range's allocations and exclusions with random page sizes
// and compares them with range.lookup of every value and the range's counts.
func (p *allocProp) checkRange(id string) {
	if p.k.GetRange("t1", id, &p.out); p.out.Code != contract.CodeOK {
		p.fail("range %s: %s", id, p.out.Code)
	}
	v := p.out.Range
	held := map[uint64]uint64{}
	var order []uint64
	q := ListQuery{Verb: contract.VerbListAllocations, Tenant: "t1", ID: id}
	for pages := 0; ; pages++ {
		q.Limit = 1 + p.r.IntN(5)
		var pg ListPage
		p.k.List(&q, &pg)
		for i, x := range pg.Values {
			if _, dup := held[x]; dup {
				p.fail("%s: value %d listed twice", id, x)
			}
			held[x] = pg.Leases[i].LSN
			order = append(order, x)
		}
		if !pg.More {
			break
		}
		if pg.Next <= order[len(order)-1] || pages > 1000 {
			p.fail("%s: next %d after %d", id, pg.Next, order[len(order)-1])
		}
		q.From = pg.Next
	}
	if !slices.IsSorted(order) {
		p.fail("%s: allocations out of order: %v", id, order)
	}
	var excl []Interval
	q = ListQuery{Verb: contract.VerbListAllocations, Tenant: "t1", ID: id, Excluded: true}
	for {
		q.Limit = 1 + p.r.IntN(3)
		var pg ListPage
		p.k.List(&q, &pg)
		excl = append(excl, pg.Excluded...)
		if !pg.More {
			break
		}
		q.From = pg.Next
	}
	var nex uint64
	for i, iv := range excl {
		if i > 0 && excl[i-1].Last >= iv.First {
			p.fail("%s: excluded intervals out of order or repeated: %v", id, excl)
		}
		nex += iv.Last - iv.First + 1
	}
	if uint64(len(held)) != v.Allocated || nex != v.Excluded || v.Last-v.First+1-v.Allocated-v.Excluded != v.Free {
		p.fail("%s: view %+v, listed %d held %d excluded", id, v, len(held), nex)
	}
	for x := v.First; x <= v.Last; x++ {
		var o Output
		state := p.k.LookupValue("t1", id, x, &o)
		inExcl := slices.ContainsFunc(excl, func(iv Interval) bool { return x >= iv.First && x <= iv.Last })
		lsn, isHeld := held[x]
		switch {
		case isHeld && (state != contract.ValueHeld || o.Lease.LSN != lsn):
			p.fail("%s: %d listed held by %d, lookup says %s %d", id, x, lsn, state, o.Lease.LSN)
		case !isHeld && inExcl && state != contract.ValueExcluded:
			p.fail("%s: %d excluded, lookup says %s", id, x, state)
		case !isHeld && !inExcl && state != contract.ValueFree:
			p.fail("%s: %d free, lookup says %s", id, x, state)
		case isHeld && inExcl:
			p.fail("%s: %d is held and excluded", id, x)
		}
		if isHeld && !slices.ContainsFunc(o.Lease.Members, func(m MemberView) bool { return m.ID == id && m.Value == x }) {
			p.fail("%s: %d: its lease %d does not hold it", id, x, lsn)
		}
	}
}

// checkLabels pages lease.list by each owner label and compares with the live leases
// carrying it (by state, unpaged).
func (p *allocProp) checkLabels() {
	want := map[string][]uint64{}
	for _, h := range []string{"h1", "h2", "h3"} {
		for _, st := range []string{contract.StateReserved, contract.StateActive, contract.StateRevoking} {
			var pg ListPage
			p.k.List(&ListQuery{Verb: contract.VerbListLeases, Tenant: "t1", ID: h, State: st, Limit: 1000}, &pg)
			for _, l := range pg.Leases {
				if l.State.String() != st || l.HolderID != h {
					p.fail("lease %d listed as %s's %s is %s's %s", l.LSN, h, st, l.HolderID, l.State)
				}
				for _, lb := range l.Labels {
					want[lb.Value] = append(want[lb.Value], l.LSN)
				}
			}
		}
	}
	for _, o := range apOwners {
		var got []uint64
		q := ListQuery{Verb: contract.VerbListLeases, Tenant: "t1", Label: Label{"owner_uuid", o}, HasLabel: true}
		for {
			q.Limit = 1 + p.r.IntN(4)
			var pg ListPage
			p.k.List(&q, &pg)
			for _, l := range pg.Leases {
				got = append(got, l.LSN)
			}
			if !pg.More {
				break
			}
			q.From = pg.Next
		}
		w := want[o]
		slices.Sort(w)
		if !slices.Equal(got, w) {
			p.fail("lease.list owner_uuid=%s: %v, live leases carrying it %v", o, got, w)
		}
	}
}

// replay rebuilds the state from the journal and compares the snapshots.
func (p *allocProp) replay() {
	k, err := New(p.cfg)
	if err != nil {
		p.t.Fatal(err)
	}
	var out Output
	for _, e := range p.journal {
		k.Apply(e, &out)
	}
	if string(k.Snapshot(nil)) != string(p.k.Snapshot(nil)) {
		p.fail("the journal replayed rebuilds another state")
	}
}
