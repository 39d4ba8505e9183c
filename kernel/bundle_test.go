package kernel

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/holdfast/holdfast/contract"
)

// bshard is one shard of a bundle test: a kernel driven entry by entry, its invariants
// checked after each, and its journal kept to be replayed.
type bshard struct {
	t       *testing.T
	k       *Kernel
	slot    uint64
	journal [][]byte
}

func newBShard(t *testing.T, shard uint32) *bshard {
	cfg := DefaultConfig()
	cfg.Shard = shard
	k, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &bshard{t: t, k: k, slot: 1000}
}

func (s *bshard) apply(c *Command) Output {
	s.t.Helper()
	Normalize(&s.k.shape, c)
	for range SkipsBefore(c) { // as the runtime sequences them (a parallel begin's lease id)
		s.applyNormalized(&Command{Verb: contract.VerbSkip})
	}
	return s.applyNormalized(c)
}

// applyOneRound applies a reserve begun across shards as the first build journaled it,
// in command format 6: its lease ends in one round.
func (s *bshard) applyOneRound(c *Command) Output {
	s.t.Helper()
	Normalize(&s.k.shape, c)
	c.Phase, c.Parallel = PhaseNone, false
	return s.applyNormalized(c)
}

// applyTwoRounds applies a reserve begun across shards as v0.1.0's successor journaled
// it, in command format 7: its lease ends in two rounds, and it commits in two.
func (s *bshard) applyTwoRounds(c *Command) Output {
	s.t.Helper()
	Normalize(&s.k.shape, c)
	c.Parallel = false
	return s.applyNormalized(c)
}

func (s *bshard) applyNormalized(c *Command) Output {
	s.t.Helper()
	b := c.AppendBinary(nil)
	var dc Command
	if err := DecodeCommand(b, &dc); err != nil {
		s.t.Fatalf("%s: decode: %v", c.Verb, err)
	}
	if again := dc.AppendBinary(nil); !bytes.Equal(again, b) {
		s.t.Fatalf("%s: encoding not canonical", c.Verb)
	}
	s.journal = append(s.journal, b)
	var out Output
	s.k.Apply(Entry{LSN: s.k.LastLSN() + 1, Slot: s.slot, Cmd: &dc}, &out)
	if msg := eventBoundBroken(&dc, &out); msg != "" {
		s.t.Fatal(msg)
	}
	if err := s.k.CheckInvariants(); err != nil {
		s.t.Fatalf("after %s: %v", c.Verb, err)
	}
	// Every state survives a snapshot: restored, it snapshots to the same bytes.
	snap := s.k.Snapshot(nil)
	cfg := DefaultConfig()
	cfg.Shard = s.k.Shard()
	r, err := Restore(cfg, snap)
	if err != nil {
		s.t.Fatalf("after %s: restore: %v", c.Verb, err)
	}
	if !bytes.Equal(r.Snapshot(nil), snap) {
		s.t.Fatalf("after %s: a restored snapshot differs", c.Verb)
	}
	return out
}

func (s *bshard) create(ids ...string) {
	s.t.Helper()
	for _, id := range ids {
		if out := s.apply(&Command{Verb: contract.VerbCreateResource, Tenant: "t", OperationID: "c-" + id, ObjectID: id}); out.Code != contract.CodeOK {
			s.t.Fatalf("create %s: %s", id, out.Code)
		}
	}
}

func (s *bshard) resource(id string) ResourceView {
	var out Output
	s.k.GetResource("t", id, &out)
	return out.Resource
}

// replayed rebuilds the shard from its journal and checks it answers the same reads.
func (s *bshard) replayed(ids ...string) {
	s.t.Helper()
	r := newBShard(s.t, s.k.Shard())
	for i, b := range s.journal {
		var c Command
		if err := DecodeCommand(b, &c); err != nil {
			s.t.Fatal(err)
		}
		var out Output
		r.k.Apply(Entry{LSN: uint64(i + 1), Slot: s.slot, Cmd: &c}, &out)
	}
	for _, id := range ids {
		if got, want := r.resource(id), s.resource(id); got != want {
			s.t.Fatalf("replayed %s: %+v, want %+v", id, got, want)
		}
	}
}

func resources(ids ...string) []Member {
	ms := make([]Member, len(ids))
	for i, id := range ids {
		ms[i] = Member{Kind: MemberResource, ID: id}
	}
	return ms
}

func begin(op string, shards []uint32, ids ...string) *Command {
	return &Command{Verb: contract.VerbReserve, Tenant: "t", OperationID: op, HolderID: "h", TTLMillis: 30_000,
		Members: resources(ids...), Shards: shards, Priority: 7}
}

// A bundle that commits in parallel (command format 8): its lease is the skip's position
// before its begin, its life counted from the begin.
func TestBundleCommitsAcrossShards(t *testing.T) { bundleAcrossShards(t, "parallel") }

// A bundle begun in command format 7 commits in two rounds: its lease is the commit's.
func TestBundleOfTheSecondBuildCommitsInTwoRounds(t *testing.T) { bundleAcrossShards(t, "two rounds") }

// A bundle begun by the first build (command format 6) ends as it did then, in one round:
// a journal means what it meant.
func TestBundleOfTheFirstBuildEndsInOneRound(t *testing.T) { bundleAcrossShards(t, "one round") }

func bundleAcrossShards(t *testing.T, build string) {
	home, part := newBShard(t, 0), newBShard(t, 1)
	home.create("a")
	part.create("b", "c")

	beginAt, oneRound, parallel := home.apply, build == "one round", build == "parallel"
	switch build {
	case "one round":
		beginAt = home.applyOneRound
	case "two rounds":
		beginAt = home.applyTwoRounds
	}
	out := beginAt(begin("op1", []uint32{0, 1, 1}, "a", "b", "c"))
	if out.Code != contract.CodeOK || !out.Pending || out.Event != EventNone {
		t.Fatalf("begin: %s pending=%v event=%s", out.Code, out.Pending, out.Event)
	}
	txn := TxnRef{Shard: 0, LSN: out.Lease.LSN}
	// Undecided: the lease is nobody's to see or name yet, its member nobody's to take.
	var got Output
	home.k.GetLease("t", txn.LSN, home.slot, &got)
	if got.Code != contract.CodeLeaseNotFound {
		t.Fatalf("lease.get of an undecided bundle: %s", got.Code)
	}
	plain := home.apply(&Command{Verb: contract.VerbReserve, Tenant: "t", OperationID: "other", HolderID: "x",
		TTLMillis: 1000, Members: resources("a")})
	if !plain.Undecided || plain.Txn != txn || plain.TxnPriority != 7 {
		t.Fatalf("a reserve of an intent: undecided=%v txn=%+v", plain.Undecided, plain.Txn)
	}
	if again := beginAt(begin("op1", []uint32{0, 1, 1}, "a", "b", "c")); !again.Pending || again.Lease.LSN != txn.LSN {
		t.Fatalf("begin again: pending=%v lease %d", again.Pending, again.Lease.LSN)
	}

	prep := part.apply(&Command{Verb: contract.VerbPrepare, Tenant: "t", HolderID: "h", Members: resources("b", "c"),
		Txn: txn, Priority: 7})
	if prep.Code != contract.CodeOK || !prep.Pending {
		t.Fatalf("prepare: %s pending=%v", prep.Code, prep.Pending)
	}
	if r := part.resource("b"); r.LeaseShard != 0 || r.LeaseLSN != txn.LSN {
		t.Fatalf("participant's member names lease %d-%d, want the home's", r.LeaseShard, r.LeaseLSN)
	}
	shows := func(s *bshard) (one, page bool) {
		var o Output
		s.k.GetResource("t", "b", &o)
		if o.Object != ObjectResource {
			s.k.GetResource("t", "a", &o)
		}
		var p ListPage
		s.k.List(&ListQuery{Verb: contract.VerbListResources, Tenant: "t", Limit: 10}, &p)
		return s.k.ShowsIntents(&o), s.k.PageShowsIntents(&p)
	}
	if one, page := shows(part); !one || !page {
		t.Fatalf("an undecided member is shown by a read (%v) or a listing (%v)", !one, !page)
	}

	begun := home.slot
	home.slot += 5
	dec := home.apply(&Command{Verb: contract.VerbDecide, Txn: txn, Commit: true, Members: resources("a", "b", "c")})
	if dec.Code != contract.CodeOK || dec.Event != EventLeaseReserved || !dec.Mirror || len(dec.Lease.Members) != 3 {
		t.Fatalf("commit: %s event=%s mirror=%v members=%d", dec.Code, dec.Event, dec.Mirror, len(dec.Lease.Members))
	}
	if ids := []string{dec.Lease.Members[0].ID, dec.Lease.Members[1].ID, dec.Lease.Members[2].ID}; ids[0] != "a" || ids[1] != "b" || ids[2] != "c" {
		t.Fatalf("members in the reserve's order: %v", ids)
	}
	// A lease id is its committing entry's position, or the skip's before a parallel
	// begin; the answer's lsn is the id either way.
	lease, at := dec.Lease.LSN, home.k.LastLSN()
	if (parallel && lease != txn.LSN-1) || (!parallel && lease != at) || at <= txn.LSN || dec.LSN != lease {
		t.Fatalf("committed at %d as lease %d (answered lsn %d), begun at %d", at, lease, dec.LSN, txn.LSN)
	}
	// The lease's life counts from its begin when it commits in parallel (the answer,
	// before the commit, showed that deadline), else from its commit.
	if want := map[bool]uint64{true: begun, false: home.slot}[parallel] + 300; dec.Lease.DeadlineSlot != want {
		t.Fatalf("deadline slot %d, want %d (begun at slot %d, committed at %d)", dec.Lease.DeadlineSlot, want, begun, home.slot)
	}
	if sh := home.k.BundleShards(lease, nil); len(sh) != 1 || sh[0] != 1 {
		t.Fatalf("participants: %v", sh)
	}
	// The retry is answered from the outcome, with every member.
	retry := beginAt(begin("op1", []uint32{0, 1, 1}, "a", "b", "c"))
	if !retry.FromRetryCache || retry.Lease.LSN != lease || retry.LSN != lease || len(retry.Lease.Members) != 3 {
		t.Fatalf("retry: cache=%v lease %d members %d", retry.FromRetryCache, retry.Lease.LSN, len(retry.Lease.Members))
	}
	if one, page := shows(home); one || page {
		t.Fatal("a committed bundle's member waits for a decision")
	}
	part.apply(&Command{Verb: contract.VerbMirror, Txn: txn, State: LeaseReserved, Deadline: dec.Lease.DeadlineSlot, LeaseLSN: lease})
	if r := part.resource("b"); r.LeaseShard != 0 || r.LeaseLSN != lease {
		t.Fatalf("participant's member names lease %d-%d after the commit, want 0-%d", r.LeaseShard, r.LeaseLSN, lease)
	}
	if part.k.MirrorChanges(txn, 7, LeaseReserved, dec.Lease.DeadlineSlot, lease, PhaseNone) || !part.k.MirrorChanges(txn, 7, LeaseActive, 0, lease, PhaseNone) ||
		part.k.MirrorChanges(TxnRef{Shard: 0, LSN: 1}, 0, LeaseReleased, 0, 0, PhaseNone) || part.k.MirrorChanges(txn, 8, LeaseActive, 0, lease, PhaseNone) {
		t.Fatal("MirrorChanges: the same state again changes nothing, another does, an unknown transaction (or another of that position) does not")
	}
	if one, page := shows(part); one || page {
		t.Fatal("a mirrored member waits for a decision")
	}
	if r := part.resource("c"); r.State != ResourceReserved {
		t.Fatalf("participant after commit: %s", r.State)
	}

	// Activate and release at the home; the participant follows by mirrors.
	act := home.apply(&Command{Verb: contract.VerbActivate, Tenant: "t", OperationID: "act", HolderID: "h", LeaseLSN: lease, Epoch: 1})
	if act.Code != contract.CodeOK || !act.Mirror {
		t.Fatalf("activate: %s mirror=%v", act.Code, act.Mirror)
	}
	part.apply(&Command{Verb: contract.VerbMirror, Txn: txn, State: act.Lease.State, LeaseLSN: lease})
	if r := part.resource("b"); r.State != ResourceActive {
		t.Fatalf("participant after activate: %s", r.State)
	}
	rel := home.apply(&Command{Verb: contract.VerbRelease, Tenant: "t", OperationID: "rel", HolderID: "h", LeaseLSN: lease, Epoch: 1})
	if rel.Code != contract.CodeOK || !rel.Mirror || rel.Lease.State != LeaseReleased || len(rel.Lease.Members) != 3 {
		t.Fatalf("release: %s mirror=%v %s members %d", rel.Code, rel.Mirror, rel.Lease.State, len(rel.Lease.Members))
	}
	if !oneRound {
		endInTwoRounds(t, home, part, txn, lease)
	} else {
		part.apply(&Command{Verb: contract.VerbMirror, Txn: txn, State: LeaseReleased})
	}
	for _, id := range []string{"b", "c"} {
		if r := part.resource(id); r.State != ResourceAvailable || r.LeaseLSN != 0 {
			t.Fatalf("participant's %s after release: %+v", id, r)
		}
	}
	if r := home.resource("a"); r.State != ResourceAvailable {
		t.Fatalf("home's a after release: %+v", r)
	}
	// A mirror again, or a stale one, changes nothing.
	if o := part.apply(&Command{Verb: contract.VerbMirror, Txn: txn, State: LeaseActive}); o.Code != contract.CodeNoop {
		t.Fatalf("mirror after the end: %s", o.Code)
	}
	home.replayed("a")
	part.replayed("b", "c")
}

// endInTwoRounds runs the end of lease (transaction txn) released at home with one other
// shard, the short way: the home's member stays held and read by nobody from the end to
// the home's own free, which follows the other shard's free; the other shard's member
// reads held until its free comes (nothing else reads free before then).
func endInTwoRounds(t *testing.T, home, part *bshard, txn TxnRef, lease uint64) {
	t.Helper()
	if home.k.EndPhase(lease) != PhaseFree || !home.k.Freeing(lease) {
		t.Fatalf("the short end's round: %d, freeing %v; want free at once", home.k.EndPhase(lease), home.k.Freeing(lease))
	}
	var got Output
	home.k.GetLease("t", lease, home.slot, &got)
	if got.Lease.State != LeaseReleased || !home.k.LeaseEnding(&got.Lease) {
		t.Fatalf("lease.get during its end's rounds: %s, waits %v", got.Lease.State, home.k.LeaseEnding(&got.Lease))
	}
	readsEnding(t, home, "a")
	readsHeld(t, part, "b")
	if o := home.apply(&Command{Verb: contract.VerbReserve, Tenant: "t", OperationID: "grab", HolderID: "x", TTLMillis: 1000,
		Members: resources("a")}); !o.Undecided {
		t.Fatalf("a reserve of an ending member: %s, want to wait", o.Code)
	}
	part.apply(&Command{Verb: contract.VerbMirror, Txn: txn, Priority: 7, State: LeaseReleased, LeaseLSN: lease, Phase: PhaseFree})
	readsEnding(t, home, "a")
	home.apply(&Command{Verb: contract.VerbMirror, Txn: txn, Priority: 7, State: LeaseReleased, LeaseLSN: lease, Phase: PhaseFree})
	if r := home.resource("a"); r.State != ResourceAvailable || home.k.Freeing(lease) {
		t.Fatalf("home's a after its own free: %+v, freeing %v", r, home.k.Freeing(lease))
	}
	home.k.GetLease("t", lease, home.slot, &got)
	if home.k.LeaseEnding(&got.Lease) {
		t.Fatal("lease.get waits once the home's own part is free")
	}
}

// readsEnding checks that resource id is held still and read by nobody (a read waits).
func readsEnding(t *testing.T, s *bshard, id string) {
	t.Helper()
	var o Output
	s.k.GetResource("t", id, &o)
	if o.Resource.State == ResourceAvailable || !s.k.ShowsIntents(&o) {
		t.Fatalf("%s during the end's rounds: %+v, read at once: %v", id, o.Resource, !s.k.ShowsIntents(&o))
	}
}

// readsHeld checks that resource id reads held, at once.
func readsHeld(t *testing.T, s *bshard, id string) {
	t.Helper()
	var o Output
	s.k.GetResource("t", id, &o)
	if o.Resource.State == ResourceAvailable || s.k.ShowsIntents(&o) {
		t.Fatalf("%s: %+v, waits %v; want it read held", id, o.Resource, s.k.ShowsIntents(&o))
	}
}

// A bundle over three shards ends in both rounds: every part marked ending (held, read by
// nobody) before any is freed; the marks again, or a stale live state, change nothing.
func TestBundleEndsInTwoRoundsOverThreeShards(t *testing.T) {
	home, p1, p2 := newBShard(t, 0), newBShard(t, 1), newBShard(t, 2)
	home.create("a")
	p1.create("b")
	p2.create("c")
	out := home.apply(begin("op1", []uint32{0, 1, 2}, "a", "b", "c"))
	txn := TxnRef{Shard: 0, LSN: out.Lease.LSN}
	for i, p := range []*bshard{p1, p2} {
		p.apply(&Command{Verb: contract.VerbPrepare, Tenant: "t", HolderID: "h", Members: resources(string(rune('b' + i))), Txn: txn, Priority: 7})
	}
	dec := home.apply(&Command{Verb: contract.VerbDecide, Txn: txn, Commit: true, Members: resources("a", "b", "c")})
	lease := dec.Lease.LSN
	for _, p := range []*bshard{p1, p2} {
		p.apply(&Command{Verb: contract.VerbMirror, Txn: txn, Priority: 7, State: LeaseReserved, Deadline: dec.Lease.DeadlineSlot, LeaseLSN: lease})
	}
	rel := home.apply(&Command{Verb: contract.VerbRelease, Tenant: "t", OperationID: "rel", HolderID: "h", LeaseLSN: lease, Epoch: 1})
	if rel.Code != contract.CodeOK || home.k.EndPhase(lease) != PhaseEnding {
		t.Fatalf("release: %s, round %d; want ending", rel.Code, home.k.EndPhase(lease))
	}
	readsEnding(t, home, "a")
	readsHeld(t, p1, "b")
	ending := &Command{Verb: contract.VerbMirror, Txn: txn, Priority: 7, State: LeaseReleased, LeaseLSN: lease, Phase: PhaseEnding}
	p1.apply(ending)
	readsEnding(t, p1, "b")
	readsHeld(t, p2, "c")
	if p1.k.MirrorChanges(txn, 7, LeaseReleased, 0, lease, PhaseEnding) || !p1.k.MirrorChanges(txn, 7, LeaseReleased, 0, lease, PhaseFree) {
		t.Fatal("MirrorChanges of an ending part: only its free changes it")
	}
	if o := p1.apply(&Command{Verb: contract.VerbMirror, Txn: txn, Priority: 7, State: LeaseActive, LeaseLSN: lease}); o.Code != contract.CodeNoop {
		t.Fatalf("a stale live mirror of an ending part: %s", o.Code)
	}
	p2.apply(ending)
	free := &Command{Verb: contract.VerbMirror, Txn: txn, Priority: 7, State: LeaseReleased, LeaseLSN: lease, Phase: PhaseFree}
	p2.apply(free)
	if r := p2.resource("c"); r.State != ResourceAvailable {
		t.Fatalf("c after its free: %+v", r)
	}
	readsEnding(t, p1, "b")
	readsEnding(t, home, "a")
	home.apply(free)
	p1.apply(free)
	for _, c := range []struct {
		s  *bshard
		id string
	}{{home, "a"}, {p1, "b"}, {p2, "c"}} {
		if r := c.s.resource(c.id); r.State != ResourceAvailable {
			t.Fatalf("%s after every free: %+v", c.id, r)
		}
	}
	if home.k.EndPhase(lease) != PhaseFree || home.k.Freeing(lease) {
		t.Fatalf("after the frees: round %d, freeing %v", home.k.EndPhase(lease), home.k.Freeing(lease))
	}
	home.replayed("a")
	p1.replayed("b")
	p2.replayed("c")
}

func TestBundleAbortsOnARefusal(t *testing.T) {
	home, part := newBShard(t, 0), newBShard(t, 1)
	home.create("a")
	part.create("b")
	part.apply(&Command{Verb: contract.VerbReserve, Tenant: "t", OperationID: "taken", HolderID: "y", Activate: true,
		Members: resources("b")})

	before := home.resource("a").Version
	out := home.apply(begin("op1", []uint32{0, 1}, "a", "b"))
	txn := TxnRef{Shard: 0, LSN: out.Lease.LSN}
	prep := part.apply(&Command{Verb: contract.VerbPrepare, Tenant: "t", HolderID: "h", Members: resources("b"), Txn: txn, Priority: 7})
	if prep.Code != contract.CodeResourceBusy || prep.MemberIndex != 0 || prep.Undecided {
		t.Fatalf("prepare of a held member: %s member %d undecided %v", prep.Code, prep.MemberIndex, prep.Undecided)
	}
	dec := home.apply(&Command{Verb: contract.VerbDecide, Txn: txn, Refusal: prep.Code, RefusalMember: 2}) // member 1, plus one
	if dec.Code != contract.CodeOK || dec.Event != EventNone {
		t.Fatalf("abort: %s %s", dec.Code, dec.Event)
	}
	if r := home.resource("a"); r.State != ResourceAvailable || r.Version != before {
		t.Fatalf("home's intent after the abort: %+v (version %d before): a bundle never granted showed", r, before)
	}
	retry := home.apply(begin("op1", []uint32{0, 1}, "a", "b"))
	if !retry.FromRetryCache || retry.Code != contract.CodeResourceBusy || retry.MemberIndex != 1 {
		t.Fatalf("retry after a refusal: cache=%v %s member %d", retry.FromRetryCache, retry.Code, retry.MemberIndex)
	}
	// An abort without a refusal (the home never finished) is not remembered: the retry
	// runs the bundle again.
	out = home.apply(begin("op2", []uint32{0, 1}, "a", "b"))
	home.apply(&Command{Verb: contract.VerbDecide, Txn: TxnRef{Shard: 0, LSN: out.Lease.LSN}})
	if again := home.apply(begin("op2", []uint32{0, 1}, "a", "b")); again.FromRetryCache || !again.Pending {
		t.Fatalf("retry after an unremembered abort: cache=%v pending=%v", again.FromRetryCache, again.Pending)
	}
	// A participant's abort frees its intents.
	part2 := newBShard(t, 2)
	part2.create("z")
	z := TxnRef{Shard: 0, LSN: 99}
	part2.apply(&Command{Verb: contract.VerbPrepare, Tenant: "t", HolderID: "h", Members: resources("z"), Txn: z, Priority: 1})
	if u := part2.k.Undecided(nil); len(u) != 1 || u[0] != z {
		t.Fatalf("undecided: %v", u)
	}
	part2.apply(&Command{Verb: contract.VerbMirror, Txn: z})
	if r := part2.resource("z"); r.State != ResourceAvailable || r.Version != 0 || len(part2.k.Undecided(nil)) != 0 {
		t.Fatalf("after the abort: %+v", r)
	}
	home.replayed("a")
	part2.replayed("z")
}

func TestBundleCodecRejectsMismatchedShards(t *testing.T) {
	c := begin("op", []uint32{0, 1}, "a", "b")
	c.Shards = c.Shards[:1]
	var d Command
	if err := DecodeCommand(c.AppendBinary(nil), &d); err == nil {
		t.Fatal("a begin whose shards do not match its members decoded")
	}
}

// A bulk verb that ends a bundle's lease at its home (lease.revoke_all by label, with
// reclaim) tells its participants too.
func TestBundleBulkVerbMirrors(t *testing.T) {
	home := newBShard(t, 0)
	home.create("a")
	c := begin("op", []uint32{0, 1}, "a", "b")
	c.Activate, c.Labels = true, []Label{{Key: "owner", Value: "vm"}}
	txn := TxnRef{Shard: 0, LSN: home.apply(c).Lease.LSN}
	home.apply(&Command{Verb: contract.VerbDecide, Txn: txn, Commit: true, Members: resources("a", "b")})
	out := home.apply(&Command{Verb: contract.VerbRevokeAll, Tenant: "t", OperationID: "all", Label: Label{Key: "owner", Value: "vm"},
		Limit: 10, Reclaim: true})
	if out.Code != contract.CodeOK || out.Count != 1 || !out.Mirror {
		t.Fatalf("revoke_all: %s count %d mirror %v", out.Code, out.Count, out.Mirror)
	}
}

// An intent on a least_recently_freed range leaves no trace in its order: a bundle never
// granted takes the value the order names, a reserve of any value waits meanwhile, and
// after the abort the next reserve takes the same one.
func TestBundleIntentKeepsTheFreedOrder(t *testing.T) {
	part := newBShard(t, 1)
	part.apply(&Command{Verb: contract.VerbCreateRange, Tenant: "t", OperationID: "cr", ObjectID: "vx", First: 1, Last: 3,
		Strategy: StrategyLeastRecentlyFreed})
	any := func(op string) *Command {
		return &Command{Verb: contract.VerbReserve, Tenant: "t", OperationID: op, HolderID: "h", TTLMillis: 1000,
			Members: []Member{{Kind: MemberRange, ID: "vx"}}}
	}
	var leases []uint64
	for _, op := range []string{"a", "b", "c"} { // 1, 2, 3 taken; then freed 2, 3, 1
		leases = append(leases, part.apply(any(op)).Lease.LSN)
	}
	for i, j := range []int{1, 2, 0} {
		part.apply(&Command{Verb: contract.VerbRelease, Tenant: "t", OperationID: fmt.Sprint("rel", i), HolderID: "h", LeaseLSN: leases[j], Epoch: 1})
	}
	txn := TxnRef{Shard: 0, LSN: 50}
	prep := part.apply(&Command{Verb: contract.VerbPrepare, Tenant: "t", HolderID: "h", Txn: txn, Priority: 1,
		Members: []Member{{Kind: MemberRange, ID: "vx"}}})
	if prep.Lease.Members[0].Value != 2 {
		t.Fatalf("the intent took %d, least recently freed is 2", prep.Lease.Members[0].Value)
	}
	if out := part.apply(any("d")); !out.Undecided {
		t.Fatalf("beside the intent a reserve of any value answered %s without waiting", out.Code)
	}
	part.apply(&Command{Verb: contract.VerbMirror, Txn: txn}) // aborted
	if v := part.apply(any("e")).Lease.Members[0].Value; v != 2 {
		t.Fatalf("after the abort a reserve took %d, want 2: the intent moved the order", v)
	}
}

// Which value "any" takes depends on the values undecided bundles hold: a reserve of
// "any" value of such a range waits for the decision (Undecided), then takes what the
// range gives as if the bundle had never been, when it is aborted.
func TestBundleAnyValueWaitsForTheDecision(t *testing.T) {
	part := newBShard(t, 1)
	part.apply(&Command{Verb: contract.VerbCreateRange, Tenant: "t", OperationID: "cr", ObjectID: "vx", First: 1, Last: 3})
	txn := TxnRef{Shard: 0, LSN: 50}
	part.apply(&Command{Verb: contract.VerbPrepare, Tenant: "t", HolderID: "h", Txn: txn, Priority: 1,
		Members: []Member{{Kind: MemberRange, ID: "vx"}}})
	any := &Command{Verb: contract.VerbReserve, Tenant: "t", OperationID: "any", HolderID: "h", TTLMillis: 1000,
		Members: []Member{{Kind: MemberRange, ID: "vx"}}}
	if out := part.apply(any); !out.Undecided {
		t.Fatalf("beside an undecided value, 'any' answered %s (%v) without waiting", out.Code, out.Lease.Members)
	}
	part.apply(&Command{Verb: contract.VerbMirror, Txn: txn}) // aborted
	if out := part.apply(any); out.Code != contract.CodeOK || out.Lease.Members[0].Value != 1 {
		t.Fatalf("after the abort: %s %v, want value 1", out.Code, out.Lease.Members)
	}
}

// HeldByUndecided answers, without an entry, what a reserve of the same members would be
// told: held by an undecided bundle (which one, or none told apart for a pool's units and
// a range's "any" value), or not.
func TestHeldByUndecidedAgreesWithAReserve(t *testing.T) {
	part := newBShard(t, 1)
	part.create("b", "c")
	part.apply(&Command{Verb: contract.VerbCreatePool, Tenant: "t", OperationID: "cp", ObjectID: "gpu", Capacity: 10})
	part.apply(&Command{Verb: contract.VerbCreateRange, Tenant: "t", OperationID: "cr", ObjectID: "vx", First: 1, Last: 9})
	z := TxnRef{Shard: 0, LSN: 40}
	part.apply(&Command{Verb: contract.VerbPrepare, Tenant: "t", HolderID: "h", Txn: z, Priority: 3, Members: []Member{
		{Kind: MemberResource, ID: "b"}, {Kind: MemberPool, ID: "gpu", Quantity: 8}, {Kind: MemberRange, ID: "vx", Value: 5, HasValue: true}}})
	for i, c := range []struct {
		member Member
		held   bool
		txn    TxnRef
	}{
		{Member{Kind: MemberResource, ID: "b"}, true, z},
		{Member{Kind: MemberResource, ID: "c"}, false, TxnRef{}},
		{Member{Kind: MemberResource, ID: "nope"}, false, TxnRef{}},
		{Member{Kind: MemberRange, ID: "vx", Value: 5, HasValue: true}, true, z},
		{Member{Kind: MemberRange, ID: "vx", Value: 6, HasValue: true}, false, TxnRef{}},
		{Member{Kind: MemberRange, ID: "vx"}, true, TxnRef{}},
		{Member{Kind: MemberPool, ID: "gpu", Quantity: 5}, true, TxnRef{}},
		{Member{Kind: MemberPool, ID: "gpu", Quantity: 2}, false, TxnRef{}},
	} {
		txn, prio, held := part.k.HeldByUndecided("t", []Member{c.member}, nil, TxnRef{})
		if held != c.held || txn != c.txn || (txn != (TxnRef{}) && prio != 3) {
			t.Fatalf("%d %+v: held %v by %+v (priority %d), want %v by %+v", i, c.member, held, txn, prio, c.held, c.txn)
		}
		out := part.apply(&Command{Verb: contract.VerbReserve, Tenant: "t", OperationID: fmt.Sprintf("r%d", i), HolderID: "x",
			TTLMillis: 1000, Members: []Member{c.member}})
		if out.Undecided != c.held || out.Txn != c.txn {
			t.Fatalf("%d %+v: a reserve was told undecided=%v by %+v, HeldByUndecided %v", i, c.member, out.Undecided, out.Txn, held)
		}
		if out.Code == contract.CodeOK {
			part.apply(&Command{Verb: contract.VerbRelease, Tenant: "t", OperationID: fmt.Sprintf("f%d", i), HolderID: "x",
				LeaseLSN: out.Lease.LSN, Epoch: out.Lease.Epoch})
		}
	}
	if _, _, held := part.k.HeldByUndecided("t", resources("b"), nil, z); held {
		t.Fatal("a bundle's own intents stand in its way")
	}
	if _, _, held := part.k.HeldByUndecided("t", resources("c", "b"), func(i int) bool { return i == 0 }, TxnRef{}); held {
		t.Fatal("a member of another shard was looked at")
	}
	part.apply(&Command{Verb: contract.VerbMirror, Txn: z})
	if _, _, held := part.k.HeldByUndecided("t", resources("b"), nil, TxnRef{}); held {
		t.Fatal("held after the abort")
	}
}

// A verb by value that finds a participant's part of a bundle names the lease at its
// home, and remembers that: its retry goes to the same lease under the same operation,
// even once the value is free or held by another lease.
func TestVerbByValueAtAParticipantIsRemembered(t *testing.T) {
	part := newBShard(t, 1)
	part.apply(&Command{Verb: contract.VerbCreateRange, Tenant: "t", OperationID: "cr", ObjectID: "vx", First: 1, Last: 9})
	z := TxnRef{Shard: 0, LSN: 40}
	part.apply(&Command{Verb: contract.VerbPrepare, Tenant: "t", HolderID: "h", Txn: z, Priority: 3,
		Members: []Member{{Kind: MemberRange, ID: "vx", Value: 5, HasValue: true}}})
	part.apply(&Command{Verb: contract.VerbMirror, Txn: z, State: LeaseReserved, Deadline: 5000, LeaseLSN: 42})
	release := func() Output {
		return part.apply(&Command{Verb: contract.VerbReleaseValue, Tenant: "t", OperationID: "rv", ObjectID: "vx", Value: 5,
			HolderID: "h", WholeLease: true})
	}
	home := TxnRef{Shard: 0, LSN: 42} // the lease's id: the commit's lsn, not the begin's
	if out := release(); !out.Elsewhere || out.Txn != home {
		t.Fatalf("release by value: elsewhere=%v %+v, want the lease %+v", out.Elsewhere, out.Txn, home)
	}
	part.apply(&Command{Verb: contract.VerbMirror, Txn: z, State: LeaseReleased, Deadline: 5000, LeaseLSN: 42})
	part.apply(&Command{Verb: contract.VerbReserve, Tenant: "t", OperationID: "other", HolderID: "x", TTLMillis: 1000,
		Members: []Member{{Kind: MemberRange, ID: "vx", Value: 5, HasValue: true}}})
	if out := release(); !out.Elsewhere || out.Txn != home {
		t.Fatalf("its retry, the value held by another lease: elsewhere=%v %+v code %s", out.Elsewhere, out.Txn, out.Code)
	}
	var out Output
	c := &Command{Verb: contract.VerbReleaseValue, Tenant: "t", OperationID: "rv", ObjectID: "vx", Value: 5, HolderID: "h", WholeLease: true}
	Normalize(&part.k.shape, c)
	if !part.k.LookupOperation(c, part.slot, &out) || !out.Elsewhere || out.Txn != home {
		t.Fatalf("looked up before sequencing: elsewhere=%v %+v", out.Elsewhere, out.Txn)
	}
	part.replayed()
}

// A participant may learn its part's commit only with a later state of the lease (the
// commit's mirror lost, then resent as the lease is by then): it counts the grant as a
// change of its own and takes the grant's values in their range's order of use, as a
// shard that granted and then changed the lease itself — same resource versions, same
// next value of a least_recently_freed range.
func TestMirrorThatSkipsTheCommit(t *testing.T) {
	members := []Member{{Kind: MemberResource, ID: "n/r"}, {Kind: MemberRange, ID: "n/vx"}}
	setup := func(s *bshard) {
		s.create("n/r")
		s.apply(&Command{Verb: contract.VerbCreateRange, Tenant: "t", OperationID: "cr", ObjectID: "n/vx", First: 1, Last: 4,
			Strategy: StrategyLeastRecentlyFreed})
	}
	next := func(s *bshard) uint64 {
		out := s.apply(&Command{Verb: contract.VerbReserve, Tenant: "t", OperationID: "next", HolderID: "n", TTLMillis: 1000,
			Members: []Member{{Kind: MemberRange, ID: "n/vx"}}})
		return out.Lease.Members[0].Value
	}
	for _, c := range []struct {
		name     string
		activate bool
		verbs    []contract.Verb // what the one-shard lease goes through
		state    LeaseState      // what the participant's one mirror says
	}{
		{"reserved, then released", false, []contract.Verb{contract.VerbRelease}, LeaseReleased},
		{"reserved, then activated", false, []contract.Verb{contract.VerbActivate}, LeaseActive},
		{"granted active, then released", true, []contract.Verb{contract.VerbRelease}, LeaseReleased},
		{"granted active", true, nil, LeaseActive},
		{"granted active, then revoking", true, []contract.Verb{contract.VerbRevoke}, LeaseRevoking},
	} {
		t.Run(c.name, func(t *testing.T) {
			one, part := newBShard(t, 1), newBShard(t, 1)
			setup(one)
			setup(part)
			l := one.apply(&Command{Verb: contract.VerbReserve, Tenant: "t", OperationID: "b", HolderID: "h", TTLMillis: 30_000,
				Activate: c.activate, Members: members}).Lease
			for i, v := range c.verbs {
				if out := one.apply(&Command{Verb: v, Tenant: "t", OperationID: fmt.Sprint("v", i), HolderID: "h", LeaseLSN: l.LSN, Epoch: 1}); out.Code != contract.CodeOK {
					t.Fatalf("one shard's %s: %s", v, out.Code)
				}
			}
			txn := TxnRef{Shard: 0, LSN: 50}
			part.apply(&Command{Verb: contract.VerbPrepare, Tenant: "t", HolderID: "h", Txn: txn, Priority: 1, Activate: c.activate,
				Members: members})
			part.apply(&Command{Verb: contract.VerbMirror, Txn: txn, State: c.state, Deadline: 5000, LeaseLSN: 60})
			if got, want := part.resource("n/r").Version, one.resource("n/r").Version; got != want {
				t.Errorf("resource version %d after the one mirror, %d at a shard that made the changes", got, want)
			}
			if !c.state.Live() {
				if got, want := next(part), next(one); got != want {
					t.Errorf("the next value taken is %d, %d at a shard that made the changes", got, want)
				}
			}
			part.replayed("n/r")
		})
	}
}

// A shard without bundle records snapshots in format 8, the previous build's, which that
// build loads (a cluster upgraded node by node moves shards both ways); one with a bundle
// record of the first build's kind (ending in one round), in format 9; one whose bundle
// ends in two rounds, in format 10; one that commits in parallel, in format 11.
func TestSnapshotFormatFollowsBundles(t *testing.T) {
	home := newBShard(t, 0)
	home.create("a", "c")
	if f := home.k.Snapshot(nil)[0]; f != 8 {
		t.Fatalf("no bundle: format %d, want 8", f)
	}
	out := home.applyOneRound(begin("op1", []uint32{0, 1}, "a", "b"))
	if f := home.k.Snapshot(nil)[0]; f != 9 {
		t.Fatalf("an undecided bundle ending in one round: format %d, want 9", f)
	}
	home.apply(&Command{Verb: contract.VerbDecide, Txn: TxnRef{Shard: 0, LSN: out.Lease.LSN}})
	if f := home.k.Snapshot(nil)[0]; f != 8 {
		t.Fatalf("the bundle aborted, nothing left of it: format %d, want 8", f)
	}
	out = home.applyTwoRounds(begin("op2", []uint32{0, 1}, "c", "d"))
	if f := home.k.Snapshot(nil)[0]; f != 10 {
		t.Fatalf("an undecided bundle ending in two rounds: format %d, want 10", f)
	}
	home.apply(&Command{Verb: contract.VerbDecide, Txn: TxnRef{Shard: 0, LSN: out.Lease.LSN}})
	home.apply(begin("op3", []uint32{0, 1}, "c", "d"))
	if f := home.k.Snapshot(nil)[0]; f != 11 {
		t.Fatalf("an undecided bundle committing in parallel: format %d, want 11", f)
	}
}

// An end in two rounds over members of every kind — a resource, pool units and a
// least_recently_freed range's value on each shard — keeps every table whole at every step
// (the invariants after each entry): the home's own part and an ending part hold committed
// values, units and resources, freed by their frees into the range's order of use.
func TestBundleEndOfEveryKindKeepsTheTables(t *testing.T) {
	home, part := newBShard(t, 0), newBShard(t, 1)
	for _, s := range []*bshard{home, part} {
		s.apply(&Command{Verb: contract.VerbCreateRange, Tenant: "t", OperationID: "cr", ObjectID: "vx", First: 1, Last: 9,
			Strategy: StrategyLeastRecentlyFreed})
		s.apply(&Command{Verb: contract.VerbCreatePool, Tenant: "t", OperationID: "cp", ObjectID: "mem", Capacity: 10})
	}
	home.create("a")
	part.create("b")
	// The home holds a, a value of its vx and units of its mem; the participant b, a value
	// of its own vx and units of its own mem (the kernel test's shards share ids).
	c := &Command{Verb: contract.VerbReserve, Tenant: "t", OperationID: "op", HolderID: "h", TTLMillis: 30_000, Priority: 7,
		Members: []Member{{Kind: MemberResource, ID: "a"}, {Kind: MemberRange, ID: "vx"}, {Kind: MemberPool, ID: "mem", Quantity: 4},
			{Kind: MemberResource, ID: "b"}}, Shards: []uint32{0, 0, 0, 1}}
	out := home.apply(c)
	txn := TxnRef{Shard: 0, LSN: out.Lease.LSN}
	prep := part.apply(&Command{Verb: contract.VerbPrepare, Tenant: "t", HolderID: "h", Txn: txn, Priority: 7,
		Members: []Member{{Kind: MemberResource, ID: "b"}, {Kind: MemberRange, ID: "vx"}, {Kind: MemberPool, ID: "mem", Quantity: 3}}})
	if prep.Code != contract.CodeOK {
		t.Fatalf("prepare: %s", prep.Code)
	}
	dec := home.apply(&Command{Verb: contract.VerbDecide, Txn: txn, Commit: true, Members: c.Members})
	lease := dec.Lease.LSN
	part.apply(&Command{Verb: contract.VerbMirror, Txn: txn, Priority: 7, State: LeaseReserved, Deadline: dec.Lease.DeadlineSlot, LeaseLSN: lease})
	var look Output
	if home.k.LookupValue("t", "vx", 1, &look); look.Undecided || look.Lease.LSN != lease {
		t.Fatalf("range.lookup of the granted lease's value: lease %d, waits %v", look.Lease.LSN, look.Undecided)
	}
	home.apply(&Command{Verb: contract.VerbRelease, Tenant: "t", OperationID: "rel", HolderID: "h", LeaseLSN: lease, Epoch: 1})
	if home.k.LookupValue("t", "vx", 1, &look); !look.Undecided || look.Lease.LSN != lease {
		t.Fatalf("range.lookup of an ending lease's value: lease %d, waits %v", look.Lease.LSN, look.Undecided)
	}
	free := &Command{Verb: contract.VerbMirror, Txn: txn, Priority: 7, State: LeaseReleased, LeaseLSN: lease, Phase: PhaseFree}
	part.apply(free)
	home.apply(free)
	var pool Output
	home.k.GetPool("t", "mem", &pool)
	if pool.Pool.Reserved != 0 || home.resource("a").State != ResourceAvailable {
		t.Fatalf("after the frees: pool %+v, a %+v", pool.Pool, home.resource("a"))
	}
	home.replayed("a")
	part.replayed("b")
}

// A delete of an object held only by an undecided bundle, or by an ending lease's part,
// waits for the decision or the free (Undecided) rather than answer object_in_use for a
// hold that may never be granted, or is over; held by a granted lease it is in use.
func TestDeleteWaitsForWhatAnUndecidedBundleHolds(t *testing.T) {
	home := newBShard(t, 0)
	home.create("a")
	del := func(op string) Output {
		t.Helper()
		return home.apply(&Command{Verb: contract.VerbDeleteResource, Tenant: "t", OperationID: op, ObjectID: "a"})
	}
	out := home.apply(begin("op1", []uint32{0, 1}, "a", "b"))
	txn := TxnRef{Shard: 0, LSN: out.Lease.LSN}
	if d := del("d1"); d.Code != contract.CodeObjectInUse || !d.Undecided {
		t.Fatalf("delete of an intent's resource: %s, waits %v", d.Code, d.Undecided)
	}
	dec := home.apply(&Command{Verb: contract.VerbDecide, Txn: txn, Commit: true, Members: resources("a", "b")})
	if d := del("d2"); d.Code != contract.CodeObjectInUse || d.Undecided {
		t.Fatalf("delete of a granted lease's resource: %s, waits %v", d.Code, d.Undecided)
	}
	home.apply(&Command{Verb: contract.VerbRelease, Tenant: "t", OperationID: "rel", HolderID: "h", LeaseLSN: dec.Lease.LSN, Epoch: 1})
	if d := del("d3"); d.Code != contract.CodeObjectInUse || !d.Undecided {
		t.Fatalf("delete of an ending lease's resource: %s, waits %v", d.Code, d.Undecided)
	}
	home.apply(&Command{Verb: contract.VerbMirror, Txn: txn, Priority: 7, State: LeaseReleased, LeaseLSN: dec.Lease.LSN, Phase: PhaseFree})
	if d := del("d4"); d.Code != contract.CodeOK {
		t.Fatalf("delete once freed: %s", d.Code)
	}
}

// The answer a parallel commit gives before it is applied (CommitView) is the view its
// commit gives: lease id, state, deadline and keep-alive, members with the values the
// participants chose — reserved, active, and active with a keep-alive.
func TestCommitViewIsTheCommitsView(t *testing.T) {
	for _, c := range []struct {
		name      string
		activate  bool
		keepalive uint64
	}{{"reserved", false, 0}, {"active", true, 0}, {"active with a keep-alive", true, 5_000}} {
		t.Run(c.name, func(t *testing.T) {
			home := newBShard(t, 0)
			home.create("a")
			cmd := begin("op", []uint32{0, 1, 1}, "a", "b", "v")
			cmd.Members[2] = Member{Kind: MemberRange, ID: "v"} // any value of the participant's range
			cmd.Activate, cmd.KeepAliveMillis = c.activate, c.keepalive
			out := home.apply(cmd)
			txn := TxnRef{Shard: 0, LSN: out.Lease.LSN}
			home.slot += 7 // the commit comes later: the lease's life counts from the begin
			voted := resources("a", "b", "v")
			voted[2] = Member{Kind: MemberRange, ID: "v", Value: 42, HasValue: true}
			var view Output
			if !home.k.CommitView(txn, voted, &view) {
				t.Fatal("no view of a parallel bundle's commit")
			}
			answer := view.Lease
			answer.Members = append([]MemberView(nil), answer.Members...)
			dec := home.apply(&Command{Verb: contract.VerbDecide, Txn: txn, Commit: true, Members: voted})
			if got := fmt.Sprintf("%+v", dec.Lease); got != fmt.Sprintf("%+v", answer) || view.LSN != dec.Lease.LSN || dec.LSN != view.LSN {
				t.Fatalf("the early answer %+v (lsn %d)\nthe commit's view %+v (lsn %d: a restarted home's answer)", answer, view.LSN, dec.Lease, dec.LSN)
			}
			if home.k.CommitView(txn, voted, &view) {
				t.Fatal("a view of a committed bundle's commit")
			}
		})
	}
}

// A restarted home rebuilds a parallel bundle's reserve from its record (BeginCommand) to
// prepare it again: every member in order with its shard, a specific value kept as one,
// also from a snapshot.
func TestBeginCommandRebuildsTheReserve(t *testing.T) {
	home := newBShard(t, 0)
	home.create("a")
	cmd := begin("op", []uint32{0, 1, 1, 1}, "a", "b", "v", "w")
	cmd.Members[2] = Member{Kind: MemberRange, ID: "v"}                           // any value
	cmd.Members[3] = Member{Kind: MemberRange, ID: "w", Value: 0, HasValue: true} // the value 0
	out := home.apply(cmd)
	cfg := DefaultConfig()
	restored, err := Restore(cfg, home.k.Snapshot(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []*Kernel{home.k, restored} {
		c := k.BeginCommand(out.Lease.LSN)
		if c == nil || c.Tenant != "t" || c.HolderID != "h" || c.Priority != 7 || !c.Parallel {
			t.Fatalf("rebuilt: %+v", c)
		}
		if fmt.Sprint(c.Shards) != fmt.Sprint(cmd.Shards) {
			t.Fatalf("shards %v, want %v", c.Shards, cmd.Shards)
		}
		for i, m := range c.Members {
			if w := cmd.Members[i]; m.Kind != w.Kind || m.ID != w.ID || m.Value != w.Value || m.HasValue != w.HasValue {
				t.Fatalf("member %d: %+v, want %+v", i, m, w)
			}
		}
	}
}

// A write remembered between a parallel bundle's begin and its commit keeps the retry
// cache in lsn order (the bundle's outcome stays at its commit's position, naming its
// lease apart), so every snapshot restores; and a holder's live leases stay in lsn order
// though the bundle's lease is older than the write's. The retry shows the lease and its
// lsn, the position before the begin.
func TestParallelCommitAfterLaterWrites(t *testing.T) {
	home := newBShard(t, 0)
	home.create("a", "c")
	out := home.apply(begin("op", []uint32{0, 1}, "a", "b"))
	txn := TxnRef{Shard: 0, LSN: out.Lease.LSN}
	plain := home.apply(&Command{Verb: contract.VerbReserve, Tenant: "t", OperationID: "plain", HolderID: "h", TTLMillis: 1000,
		Members: resources("c")})
	if plain.Code != contract.CodeOK {
		t.Fatalf("the later reserve: %s", plain.Code)
	}
	dec := home.apply(&Command{Verb: contract.VerbDecide, Txn: txn, Commit: true, Members: resources("a", "b")})
	if dec.Lease.LSN != txn.LSN-1 || dec.Lease.LSN >= plain.Lease.LSN {
		t.Fatalf("the bundle's lease %d, begun at %d, the later reserve's %d", dec.Lease.LSN, txn.LSN, plain.Lease.LSN)
	}
	retry := home.apply(begin("op", []uint32{0, 1}, "a", "b"))
	if !retry.FromRetryCache || retry.Lease.LSN != dec.Lease.LSN || retry.LSN != dec.Lease.LSN {
		t.Fatalf("retry: cache %v lease %d lsn %d, want %d", retry.FromRetryCache, retry.Lease.LSN, retry.LSN, dec.Lease.LSN)
	}
}

// A lease verb or lease.get naming the id an undecided bundle begun in parallel will take
// — its client holds the id from the early answer; a restarted home decides it again —
// waits for the decision (Undecided, naming the transaction) rather than answer
// lease_not_found; another tenant naming it is told lease_not_found. Once committed the
// same verb finds the lease. So for a lease of an import across shards.
func TestVerbsNamingAnUndecidedIdWait(t *testing.T) {
	named := func(s *bshard, tenant string, lease uint64) Output {
		return s.apply(&Command{Verb: contract.VerbRelease, Tenant: tenant, OperationID: fmt.Sprintf("rel-%s-%d-%d", tenant, lease, s.k.LastLSN()),
			HolderID: "h", LeaseLSN: lease, Epoch: 1})
	}
	home := newBShard(t, 0)
	home.create("a", "d")
	out := home.apply(begin("op", []uint32{0, 1}, "a", "b"))
	txn := TxnRef{Shard: 0, LSN: out.Lease.LSN}
	id := txn.LSN - 1
	if r := named(home, "t", id); !r.Undecided || r.Txn != txn || r.Code != contract.CodeOK {
		t.Fatalf("release of the undecided id: %s undecided=%v txn %+v, want it to wait on %+v", r.Code, r.Undecided, r.Txn, txn)
	}
	var get Output
	if home.k.GetLease("t", id, home.slot, &get); !get.Undecided {
		t.Fatalf("lease.get of the undecided id: %s, want it to wait", get.Code)
	}
	if r := named(home, "other", id); r.Undecided || r.Code != contract.CodeLeaseNotFound {
		t.Fatalf("another tenant's release of the id: %s undecided=%v", r.Code, r.Undecided)
	}
	if r := named(home, "t", id+7); r.Undecided || r.Code != contract.CodeLeaseNotFound {
		t.Fatalf("a release of an id nobody takes: %s undecided=%v", r.Code, r.Undecided)
	}
	home.apply(&Command{Verb: contract.VerbDecide, Txn: txn, Commit: true, Members: resources("a", "b")})
	if r := named(home, "t", id); r.Undecided || r.Code != contract.CodeOK {
		t.Fatalf("release once committed: %s undecided=%v", r.Code, r.Undecided)
	}

	home = newBShard(t, 0)
	home.create("a", "d")
	out = home.apply(anImport("imp"))
	g := out.Lease.LSN
	for i, holder := range []string{"h0", "h1", "h2"} {
		lease := g - 5 + uint64(i)
		r := home.apply(&Command{Verb: contract.VerbRelease, Tenant: "t", OperationID: fmt.Sprintf("imp-rel-%d", i), HolderID: holder, LeaseLSN: lease, Epoch: 1})
		if !r.Undecided || r.Txn.LSN != lease+3 {
			t.Fatalf("release of the import's undecided lease %d: %s undecided=%v txn %+v", lease, r.Code, r.Undecided, r.Txn)
		}
	}
}
