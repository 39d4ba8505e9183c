package kernel

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast/contract"
)

// Replay equivalence: the kernel is a deterministic state machine, so a run must give the
// same replies, events and final state however it is reached — straight through, through
// snapshots restored at arbitrary points, or from the journal (the commands' encodings)
// replayed into a fresh shard. The command streams come from the model test's generator
// (model_test.go), recorded as scripts of concrete steps with absolute slots. Subtests are
// named by their seed: -run 'TestReplayJournal/S' -kernel.seed=S replays one.

// replayScript records n generated steps. The model only steers the generator here; the
// model test does the comparing.
func replayScript(t testing.TB, sc mScenario, seed uint64, n int) []mScriptStep {
	t.Helper()
	h := newMHarness(t, sc, rand.New(rand.NewPCG(seed, 0xD1CE)))
	h.compare, h.cross, h.record = false, false, true
	h.repro = fmt.Sprintf("recording the script of seed %d", seed)
	for range n {
		h.run(h.g.next())
	}
	return h.script
}

// rItem is one observable answer of a run: a write, an expire, a due list or a read.
type rItem struct {
	step  int
	what  string
	out   Output
	dues  []Due
	list  []LeaseView
	trunc bool
}

// rEntry is one journal entry as the runtime would store it, with the reply it produced.
type rEntry struct {
	lsn, slot uint64
	enc       []byte
	out       Output
}

type rTrace struct {
	items   []rItem
	journal []rEntry
	snaps   [][]byte // the snapshot after each step
	marks   []int    // journal length after each step
}

type replayer struct {
	t     testing.TB
	cfg   Config
	k     *Kernel
	trace *rTrace
	step  int
	out   Output
}

func (r *replayer) add(it rItem) {
	it.step = r.step
	it.out = mNormOut(it.out)
	r.trace.items = append(r.trace.items, it)
}

// roundTrip checks that c encodes and decodes to an equal command. A command the journal
// cannot hold (no such verb or strategy; Validate rejects it before sequencing) must be
// refused by the decoder instead.
func roundTrip(t testing.TB, c *Command) []byte {
	t.Helper()
	enc := c.AppendBinary(nil)
	var d Command
	if !c.Verb.IsWrite() && !c.Verb.IsInternal() || c.Strategy > StrategyLeastRecentlyFreed {
		if err := DecodeCommand(enc, &d); err == nil {
			t.Fatalf("DecodeCommand accepted %s", mFmtCmd(c))
		}
		return enc
	}
	if err := DecodeCommand(enc, &d); err != nil {
		t.Fatalf("DecodeCommand(AppendBinary(%s)): %v", mFmtCmd(c), err)
	}
	if want := mCloneCmd(c); !reflect.DeepEqual(&d, want) {
		t.Fatalf("command round trip:\n got  %+v\n want %+v", d, *want)
	}
	if again := d.AppendBinary(nil); !bytes.Equal(again, enc) {
		t.Fatalf("re-encoding differs:\n %x\n %x", again, enc)
	}
	return enc
}

// apply applies one entry at the next lsn and journals it.
func (r *replayer) apply(slot uint64, c *Command) {
	enc := roundTrip(r.t, c)
	e := Entry{LSN: r.k.LastLSN() + 1, Slot: slot, Cmd: c}
	r.k.Apply(e, &r.out)
	r.trace.journal = append(r.trace.journal, rEntry{lsn: e.LSN, slot: slot, enc: enc, out: mNormOut(r.out)})
	r.add(rItem{what: "apply " + mFmtCmd(c), out: r.out})
}

// snapshotRoundTrip checks Snapshot(Restore(Snapshot(s))) == Snapshot(s) and returns the
// restored shard.
func snapshotRoundTrip(t testing.TB, cfg Config, k *Kernel) (*Kernel, []byte) {
	t.Helper()
	b := k.Snapshot(nil)
	k2, err := Restore(cfg, b)
	if err != nil {
		t.Fatalf("Restore(Snapshot) at lsn %d: %v", k.LastLSN(), err)
	}
	if b2 := k2.Snapshot(nil); !bytes.Equal(b, b2) {
		t.Fatalf("Snapshot(Restore(Snapshot)) differs at lsn %d:\n %x\n %x", k.LastLSN(), b, b2)
	}
	if err := k2.CheckInvariants(); err != nil {
		t.Fatalf("restored shard: %v", err)
	}
	if k2.LastLSN() != k.LastLSN() || k2.LastSlot() != k.LastSlot() {
		t.Fatalf("restored at lsn %d slot %d, was %d/%d", k2.LastLSN(), k2.LastSlot(), k.LastLSN(), k.LastSlot())
	}
	return k2, b
}

// runScript executes a script the way the shard runtime does, recording every answer and
// the journal. After step i, if restore(i), it continues on a shard restored from a
// snapshot.
func runScript(t testing.TB, cfg Config, script []mScriptStep, restore func(int) bool) *rTrace {
	t.Helper()
	k, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &replayer{t: t, cfg: cfg, k: k, trace: &rTrace{}}
	for i, s := range script {
		r.step = i
		switch s.kind {
		case mStepWrite:
			c := mCloneCmd(s.cmd)
			roundTrip(t, c) // as sent
			path := mDriveWrite(r.k, r.cfg.Limits, s.slot, c, &r.out)
			if path == "apply" {
				j := r.trace.journal
				j = append(j, rEntry{lsn: r.out.LSN, slot: s.slot, enc: roundTrip(t, c), out: mNormOut(r.out)})
				r.trace.journal = j
			}
			r.add(rItem{what: path + " " + mFmtCmd(s.cmd), out: r.out})
		case mStepTick:
			dues := r.k.DueExpirations(s.slot, s.tickMax, nil)
			r.add(rItem{what: "due", dues: slices.Clone(dues)})
			for _, d := range dues {
				r.apply(s.slot, &Command{Verb: contract.VerbExpire, Tenant: d.Tenant, LeaseLSN: d.LeaseLSN, Deadline: d.Deadline})
			}
		case mStepExpire:
			r.apply(s.slot, mCloneCmd(s.cmd))
		case mStepConfigure:
			if r.apply(s.slot, mCloneCmd(s.cmd)); r.out.Code == contract.CodeOK {
				r.cfg.Limits = s.lim // admission's, from now on; the shape is the journal's
			}
		case mStepRead:
			r.read(s.read, s.slot)
		}
		r.sweep(s.slot)
		if err := r.k.CheckInvariants(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		k2, snap := snapshotRoundTrip(t, cfg, r.k)
		r.trace.snaps = append(r.trace.snaps, snap)
		r.trace.marks = append(r.trace.marks, len(r.trace.journal))
		if restore != nil && restore(i) {
			r.k = k2
		}
	}
	return r.trace
}

func (r *replayer) read(s mRead, slot uint64) {
	switch s.verb {
	case contract.VerbGetResource:
		r.k.GetResource(s.tenant, s.id, &r.out)
	case contract.VerbGetPool:
		r.k.GetPool(s.tenant, s.id, &r.out)
	case contract.VerbGetRange:
		r.k.GetRange(s.tenant, s.id, &r.out)
	case contract.VerbGetLease:
		r.k.GetLease(s.tenant, s.lsn, slot, &r.out)
	case contract.VerbListLeases:
		l, trunc := r.k.ListLeases(s.tenant, s.holder, s.limit, nil)
		r.add(rItem{what: fmt.Sprintf("list %s/%s %d", s.tenant, s.holder, s.limit), list: l, trunc: trunc})
		return
	}
	r.add(rItem{what: fmt.Sprintf("%s %s/%s %d", s.verb, s.tenant, s.id, s.lsn), out: r.out})
}

// sweep reads every object of the universe, the recent lease ids, every holder's list,
// the due list and the positions.
func (r *replayer) sweep(slot uint64) {
	last := r.k.LastLSN()
	var lsns []uint64
	for lsn := uint64(1); lsn <= last+2; lsn++ {
		if lsn+48 > last || lsn%16 == 0 {
			lsns = append(lsns, lsn)
		}
	}
	for _, tn := range append(slices.Clone(mTenants), "t3") {
		for _, id := range mResources {
			r.read(mRead{verb: contract.VerbGetResource, tenant: tn, id: id}, slot)
		}
		for _, p := range mPools {
			r.read(mRead{verb: contract.VerbGetPool, tenant: tn, id: p.id}, slot)
		}
		for _, s := range mRanges {
			r.read(mRead{verb: contract.VerbGetRange, tenant: tn, id: s.id}, slot)
		}
		for _, lsn := range lsns {
			r.read(mRead{verb: contract.VerbGetLease, tenant: tn, lsn: lsn}, slot)
		}
		for _, h := range mHolders {
			r.read(mRead{verb: contract.VerbListLeases, tenant: tn, holder: h, limit: 2}, slot)
			r.read(mRead{verb: contract.VerbListLeases, tenant: tn, holder: h, limit: 1000}, slot)
		}
	}
	r.add(rItem{what: "due", dues: r.k.DueExpirations(slot, 8, nil)})
	d, ok := r.k.NextDeadline()
	r.add(rItem{what: fmt.Sprintf("next deadline %d %v, at %d/%d", d, ok, r.k.LastLSN(), r.k.LastSlot())})
}

func fmtItem(it *rItem) string {
	s := fmt.Sprintf("step %d %s: %s", it.step, it.what, mFmtOut(&it.out))
	if it.dues != nil {
		s += fmt.Sprintf(" dues=%+v", it.dues)
	}
	for i := range it.list {
		s += " " + mFmtLease(&it.list[i])
	}
	if it.trunc {
		s += " truncated"
	}
	return s
}

func compareTraces(t *testing.T, what string, a, b *rTrace) {
	t.Helper()
	for i := range min(len(a.items), len(b.items)) {
		if !reflect.DeepEqual(a.items[i], b.items[i]) {
			t.Fatalf("%s: answer %d differs:\n straight %s\n replayed %s", what, i, fmtItem(&a.items[i]), fmtItem(&b.items[i]))
		}
	}
	if len(a.items) != len(b.items) {
		t.Fatalf("%s: %d answers, replay gave %d", what, len(a.items), len(b.items))
	}
	for i := range a.snaps {
		if !bytes.Equal(a.snaps[i], b.snaps[i]) {
			t.Fatalf("%s: snapshot after step %d differs", what, i)
		}
	}
}

func replaySeeds(n int) []uint64 {
	base := *flagModelSeed
	if base == 0 {
		base = uint64(time.Now().UnixNano())
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = base + uint64(i)
	}
	return seeds
}

func replayScenario(seed uint64) mScenario {
	return mGenScenario(rand.New(rand.NewPCG(seed, 0x5CE)))
}

// TestReplaySnapshotRestore runs scripts straight through and again continuing on
// restored snapshots (at random points, and at every step): every reply, event, read and
// the state after every step must be the same.
func TestReplaySnapshotRestore(t *testing.T) {
	for i, seed := range replaySeeds(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			sc := replayScenario(seed)
			script := replayScript(t, sc, seed, 400)
			straight := runScript(t, sc.cfg, script, nil)
			r := rand.New(rand.NewPCG(seed, 1))
			every := 5 // restore at random points, and for one script after every step
			if i == 0 {
				every = 1
			}
			compareTraces(t, "restored", straight, runScript(t, sc.cfg, script, func(int) bool { return r.IntN(every) == 0 }))
		})
	}
}

// TestReplayJournal replays the journal of a run — the encoded commands, decoded again —
// into a fresh shard, now and then continuing on a restored snapshot, like recovery does:
// every entry's reply and the state at every step must match the original run, byte for
// byte. The replaying shard runs with other settings in every field (another slot
// length, windows, bounds and limits, as a restart with other flags or another node of
// a cluster would): the journal's configure entries decide, never the replaying
// process's configuration. (Before they did, a replay under a lowered --max-ttl or
// --max-resources dropped acknowledged leases and objects.)
func TestReplayJournal(t *testing.T) {
	for _, seed := range replaySeeds(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			sc := replayScenario(seed)
			script := replayScript(t, sc, seed, 400)
			orig := runScript(t, sc.cfg, script, nil)
			r := rand.New(rand.NewPCG(seed, 2))
			other := otherConfig(sc.cfg)
			k, err := New(other)
			if err != nil {
				t.Fatal(err)
			}
			var out Output
			next := 0
			for step, mark := range orig.marks {
				for ; next < mark; next++ {
					e := &orig.journal[next]
					var c Command
					if err := DecodeCommand(e.enc, &c); err != nil {
						t.Fatalf("entry %d: %v", e.lsn, err)
					}
					k.Apply(Entry{LSN: e.lsn, Slot: e.slot, Cmd: &c}, &out)
					if got := mNormOut(out); !reflect.DeepEqual(got, e.out) {
						t.Fatalf("entry %d (%s) replayed:\n got  %s\n want %s", e.lsn, mFmtCmd(&c), mFmtOut(&got), mFmtOut(&e.out))
					}
				}
				if snap := k.Snapshot(nil); !bytes.Equal(snap, orig.snaps[step]) {
					t.Fatalf("state after step %d (lsn %d) differs from the original run", step, k.LastLSN())
				}
				if r.IntN(7) == 0 {
					k, _ = snapshotRoundTrip(t, other, k)
				}
			}
		})
	}
}

// otherConfig differs from cfg in every setting but the shard: what a process with other
// flags would replay a journal with.
func otherConfig(cfg Config) Config {
	o := cfg
	o.SlotMillis = cfg.SlotMillis*3 + 1
	o.MaxTTLMillis, o.MaxBundle, o.MaxCommandBytes = 1, 1, 1
	o.DedupeWindowSlots, o.HistoryWindowSlots = cfg.DedupeWindowSlots*7+1, 1
	o.MaxResources, o.MaxPools, o.MaxRanges, o.MaxLeases, o.MaxMembers = 1, 1, 1, 1, 1
	o.MaxOperations, o.MaxExpirations, o.MaxRangeValues, o.MaxRuns, o.MaxWork = 1, 1, 1, 1, 1
	o.Version = cfg.Version + 9
	return o
}

// The first contact that showed replay reading flags (a kernel test of the review's
// scratch copy): a lease of 50 minutes and three resources, acknowledged under the
// defaults, replayed by a process started with --max-ttl 30s and --max-resources 1. The
// journal starts with the settings it was written under, so the replay answers exactly
// as the first run did, and the new limits and bounds apply to new requests only.
func TestReplayUnderLoweredFlagsKeepsEverything(t *testing.T) {
	written := DefaultConfig()
	written.MaxResources = 4
	journal := []*Command{
		{Verb: contract.VerbConfigure, Settings: written.Shape},
		{Verb: contract.VerbCreateResource, Tenant: "t", OperationID: "c1", ObjectID: "n/a"},
		{Verb: contract.VerbCreateResource, Tenant: "t", OperationID: "c2", ObjectID: "n/b"},
		{Verb: contract.VerbCreateResource, Tenant: "t", OperationID: "c3", ObjectID: "n/c"},
		{Verb: contract.VerbReserve, Tenant: "t", OperationID: "r1", HolderID: "h", TTLMillis: 50 * 60 * 1000,
			Members: []Member{{Kind: MemberResource, ID: "n/a"}, {Kind: MemberResource, ID: "n/b"}}},
	}
	run := func(cfg Config) (outs []string, snap []byte, k *Kernel) {
		k, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var out Output
		for i, c := range journal {
			c := mCloneCmd(c)
			Normalize(&written.Shape, c)
			var dec Command
			if err := DecodeCommand(c.AppendBinary(nil), &dec); err != nil {
				t.Fatal(err)
			}
			k.Apply(Entry{LSN: uint64(i + 1), Slot: 10, Cmd: &dec}, &out)
			outs = append(outs, mFmtOut(&out))
		}
		return outs, k.Snapshot(nil), k
	}
	first, firstSnap, _ := run(written)
	if !strings.HasPrefix(first[4], "ok ") {
		t.Fatalf("the reserve: %s", first[4])
	}
	lowered := DefaultConfig()
	lowered.MaxTTLMillis, lowered.MaxResources = 30_000, 1
	again, againSnap, k := run(lowered)
	if !slices.Equal(first, again) || !bytes.Equal(firstSnap, againSnap) {
		t.Fatalf("replayed under lowered flags:\n%s\nfirst run:\n%s", strings.Join(again, "\n"), strings.Join(first, "\n"))
	}
	var out Output
	if k.GetLease("t", 5, 10, &out); out.Code != contract.CodeOK || out.Lease.DeadlineSlot != 10+30_000 {
		t.Fatalf("the 50-minute lease after the replay: %s\n%s", mFmtOut(&out), strings.Join(again, "\n"))
	}
	// The process's new limits judge new requests: a 50-minute ttl is refused at
	// admission, a fifth resource by the journaled bound of 4.
	lim := lowered.Limits
	if a := k.Admit(&Command{Verb: contract.VerbReserve, Tenant: "t", OperationID: "r2", HolderID: "h", TTLMillis: 50 * 60 * 1000,
		Members: []Member{{Kind: MemberResource, ID: "n/c"}}}, 10, &lim, 6, NoneInFlight{}, &out); a.Rejection == nil || a.Rejection.Code != contract.CodeTTLOutOfRange {
		t.Fatalf("a 50-minute reserve under --max-ttl 30s: %+v", a)
	}
}

// TestReplayCommandCodec: the encoding is canonical and lossless for every command the
// generator produces (valid or not), before and after Validate fills the derived fields.
func TestReplayCommandCodec(t *testing.T) {
	sc := replayScenario(3)
	for _, s := range replayScript(t, sc, 3, 2000) {
		if s.cmd == nil {
			continue
		}
		c := mCloneCmd(s.cmd)
		roundTrip(t, c)
		Normalize(&sc.cfg.Shape, c)
		roundTrip(t, c)
	}
}

// fuzzScenario is the fixed configuration of the fuzz targets.
func fuzzScenario() mScenario {
	cfg := DefaultConfig()
	cfg.Shard = 1
	cfg.SlotMillis = 10
	cfg.MaxTTLMillis = 200
	cfg.DedupeWindowSlots, cfg.HistoryWindowSlots = 20, 10
	cfg.MaxBundle = 5
	cfg.MaxResources, cfg.MaxPools, cfg.MaxRanges = 64, 64, 64
	cfg.MaxLeases, cfg.MaxMembers, cfg.MaxOperations, cfg.MaxExpirations = 64, 256, 128, 64
	return mScenario{cfg: cfg, tickPct: 24}
}

// fuzzSeeds records a script under the fuzz configuration: its snapshots and commands
// seed the corpora, and its commands are the retries FuzzRestore looks up.
func fuzzSeeds(t testing.TB) ([]mScriptStep, *rTrace) {
	sc := fuzzScenario()
	script := replayScript(t, sc, 42, 300)
	return script, runScript(t, sc.cfg, script, nil)
}

// FuzzRestore: Restore never panics on arbitrary bytes; whatever it accepts satisfies the
// invariants, snapshots back to the same bytes, and can be read, retried against and
// applied to without panicking or breaking an invariant.
func FuzzRestore(f *testing.F) {
	script, tr := fuzzSeeds(f)
	for i := 0; i < len(tr.snaps); i += 37 {
		f.Add(tr.snaps[i])
	}
	last := tr.snaps[len(tr.snaps)-1]
	f.Add(last)
	f.Add(last[:len(last)/2])
	f.Add([]byte{})
	f.Add([]byte{snapshotFormat})
	f.Add(append(slices.Clone(last), 0))
	cfg := fuzzScenario().cfg
	var cmds []*Command
	for _, s := range script {
		if s.kind == mStepWrite {
			cmds = append(cmds, s.cmd)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := Restore(cfg, b)
		if err != nil {
			return
		}
		if err := k.CheckInvariants(); err != nil {
			t.Fatalf("Restore accepted a shard that breaks an invariant: %v", err)
		}
		s := k.Snapshot(nil)
		k2, err := Restore(cfg, s)
		if err != nil {
			t.Fatalf("Restore(Snapshot(Restore(b))): %v", err)
		}
		if s2 := k2.Snapshot(nil); !bytes.Equal(s, s2) {
			t.Fatalf("snapshot of the restored shard differs")
		}
		var out Output
		slot := k.LastSlot()
		for _, tn := range mTenants {
			for lsn := uint64(1); lsn <= min(k.LastLSN()+1, 512); lsn++ {
				k.GetLease(tn, lsn, slot, &out)
			}
			for _, h := range mHolders {
				k.ListLeases(tn, h, 100, nil)
			}
			for _, id := range mResources {
				k.GetResource(tn, id, &out)
			}
			for _, p := range mPools {
				k.GetPool(tn, p.id, &out)
			}
			for _, r := range mRanges {
				k.GetRange(tn, r.id, &out)
			}
		}
		for _, c := range cmds {
			c = mCloneCmd(c)
			if Validate(c) == nil && CheckLimits(&cfg.Limits, c) == nil {
				Normalize(&cfg.Shape, c)
				k.LookupOperation(c, slot, &out)
			}
		}
		if k.LastLSN() < 1<<62 && slot < 1<<62 { // expire what is due, then retire what can retire
			later := slot + cfg.HistoryWindowSlots
			for _, d := range k.DueExpirations(later, 16, nil) {
				k.Apply(Entry{LSN: k.LastLSN() + 1, Slot: later,
					Cmd: &Command{Verb: contract.VerbExpire, Tenant: d.Tenant, LeaseLSN: d.LeaseLSN, Deadline: d.Deadline}}, &out)
			}
			k.Apply(Entry{LSN: k.LastLSN() + 1, Slot: later + 2*(cfg.HistoryWindowSlots+cfg.DedupeWindowSlots),
				Cmd: &Command{Verb: contract.VerbExpire, Tenant: "t1", LeaseLSN: 1}}, &out)
		}
		if err := k.CheckInvariants(); err != nil {
			t.Fatalf("restored shard breaks an invariant after applying: %v", err)
		}
	})
}

// FuzzDecodeCommand: DecodeCommand never panics; whatever it accepts re-encodes
// canonically to a command that decodes equal, and validating and applying it to a fresh
// shard neither panics nor breaks an invariant.
func FuzzDecodeCommand(f *testing.F) {
	script, _ := fuzzSeeds(f)
	for i, s := range script {
		if s.cmd != nil && i%5 == 0 {
			f.Add(s.cmd.AppendBinary(nil))
		}
	}
	imp := anImport("fz") // a group's steps (command format 9)
	imp.Group, imp.Phase = true, PhaseEnding
	f.Add(imp.AppendBinary(nil))
	f.Add(groupPrepare(20, 7).AppendBinary(nil))
	f.Add((&Command{Verb: contract.VerbDecide, Txn: TxnRef{LSN: 20}, Commit: true, Group: true, Limit: 1}).AppendBinary(nil))
	f.Add([]byte{})
	f.Add([]byte{commandFormat})
	f.Add([]byte{commandFormat, byte(contract.VerbExpire)})
	f.Add(binary.AppendUvarint([]byte{commandFormat, byte(contract.VerbReserve), 1, 't'}, 1<<40))
	cfg := fuzzScenario().cfg
	f.Fuzz(func(t *testing.T, b []byte) {
		var c Command
		if DecodeCommand(b, &c) != nil {
			return
		}
		enc := c.AppendBinary(nil)
		var d Command
		if err := DecodeCommand(enc, &d); err != nil {
			t.Fatalf("re-encoded command does not decode: %v", err)
		}
		if !reflect.DeepEqual(mCloneCmd(&c), mCloneCmd(&d)) {
			t.Fatalf("decode(encode(c)) != c:\n %+v\n %+v", c, d)
		}
		if again := d.AppendBinary(nil); !bytes.Equal(again, enc) {
			t.Fatalf("encoding not canonical")
		}
		k, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var out Output
		cc := mCloneCmd(&c)
		if Validate(cc) == nil && CheckLimits(&cfg.Limits, cc) == nil && CheckSlots(&cfg.Shape, cc, 5) == nil {
			k.LookupOperation(cc, 5, &out)
		}
		k.Apply(Entry{LSN: 1, Slot: 5, Cmd: mCloneCmd(&c)}, &out)
		if !Allowed(c.Verb, out.Code) && c.Verb != contract.VerbInvalid && c.Verb.IsWrite() {
			t.Fatalf("%s applied to an empty shard returned %s", c.Verb, out.Code)
		}
		if err := k.CheckInvariants(); err != nil {
			t.Fatalf("after applying %s: %v", mFmtCmd(&c), err)
		}
	})
}

// Restore must refuse a snapshot whose remembered outcome sits in the wrong queue: a
// failure among the kept outcomes would never be forgotten first, and a success among the
// forgettable ones could be forgotten inside its window. (Format 2 kept one queue with a
// verb and an object reference, and accepted a reference past the object table.)
func TestReplayBugRestoreAcceptsOutcomeInWrongQueue(t *testing.T) {
	cfg := DefaultConfig()
	k, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	create := &Command{Verb: contract.VerbCreateResource, Tenant: "t1", OperationID: "o1", ObjectID: "r"}
	var out Output
	if mDriveWrite(k, cfg.Limits, 0, mCloneCmd(create), &out); out.Code != contract.CodeOK {
		t.Fatalf("create: %s", mFmtOut(&out))
	}
	// The snapshot ends with the one kept outcome: ... code ok, member+1 0, epoch 0, lsn 1,
	// retire slot. Make it already_exists.
	snap := k.Snapshot(nil)
	tail := append(binary.AppendUvarint([]byte{byte(contract.CodeOK), 0, 0, 1}, cfg.DedupeWindowSlots), 0) // ref 0
	if !bytes.HasSuffix(snap, tail) {
		t.Fatalf("snapshot does not end with the outcome record %x: %x", tail, snap)
	}
	bad := slices.Clone(snap)
	bad[len(snap)-len(tail)] = byte(contract.CodeAlreadyExists)
	if _, err := Restore(cfg, bad); err == nil {
		t.Errorf("Restore accepted an already_exists outcome among the kept ones")
	}
}

// Restore must refuse a snapshot whose retirement queue names a terminal lease twice (and
// another not at all): the counts agree, so CheckInvariants passes, but retiring frees the
// first lease twice — the second time through leaseIdx's zero value, index 0 — and the
// other lease is never retired. (snapshot.go, Restore pushes the ended lsns unchecked.)
func TestReplayBugRestoreAcceptsDuplicateRetirement(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DedupeWindowSlots, cfg.HistoryWindowSlots = 1, 100
	k, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out Output
	for _, c := range []*Command{
		{Verb: contract.VerbCreateResource, Tenant: "t1", OperationID: "o1", ObjectID: "r"},
		{Verb: contract.VerbReserve, Tenant: "t1", OperationID: "o2", HolderID: "h1", Members: []Member{{Kind: MemberResource, ID: "r"}}, Activate: true},
		{Verb: contract.VerbRelease, Tenant: "t1", OperationID: "o3", HolderID: "h1", LeaseLSN: 2, Epoch: 1},
		{Verb: contract.VerbReserve, Tenant: "t1", OperationID: "o4", HolderID: "h2", Members: []Member{{Kind: MemberResource, ID: "r"}}, Activate: true},
		{Verb: contract.VerbRelease, Tenant: "t1", OperationID: "o5", HolderID: "h2", LeaseLSN: 4, Epoch: 1},
	} {
		if mDriveWrite(k, cfg.Limits, 0, c, &out); out.Code != contract.CodeOK {
			t.Fatalf("%s: %s", mFmtCmd(c), mFmtOut(&out))
		}
	}
	// Lease 4's ended record starts with its lsn and holder: make it a second lease 2.
	snap := k.Snapshot(nil)
	rec := append([]byte{4}, appendString(nil, "t1\x00h2")...)
	at := bytes.Index(snap, rec)
	if at < 0 || bytes.Count(snap, rec) != 1 {
		t.Fatalf("lease 4's ended record not found once in %x", snap)
	}
	bad := slices.Clone(snap)
	bad[at] = 2
	k2, err := Restore(cfg, bad)
	if err != nil {
		return // refused: fixed
	}
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("Restore accepted the retirement queue [2, 2]; retiring panics: %v", r)
		}
	}()
	k2.Apply(Entry{LSN: 6, Slot: 200, Cmd: &Command{Verb: contract.VerbExpire, Tenant: "t1", LeaseLSN: 99, Deadline: 1}}, &out)
	t.Errorf("Restore accepted the retirement queue [2, 2] for leases 2 and 4; after retiring: invariants %v",
		k2.CheckInvariants())
}

// Restore must refuse a snapshot in which two live leases hold the same range value: the
// per-range count of allocated values agrees when the set holds one stray value instead,
// so CheckInvariants passes (resources get an owner check, range values only a count).
// Once one of the two leases ends the value is free while the other still holds it, and
// the next reserve hands it out a second time. (invariants.go: no distinctness check for
// range values; snapshot.go, Restore relies on it.)
func TestReplayBugRestoreAcceptsSharedRangeValue(t *testing.T) {
	cfg := DefaultConfig()
	k, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out Output
	w := func(c *Command) {
		t.Helper()
		if mDriveWrite(k, cfg.Limits, 0, c, &out); out.Code != contract.CodeOK {
			t.Fatalf("%s: %s", mFmtCmd(c), mFmtOut(&out))
		}
	}
	anyVX := []Member{{Kind: MemberRange, ID: "vx"}}
	w(&Command{Verb: contract.VerbCreateRange, Tenant: "t1", OperationID: "o1", ObjectID: "vx", First: 0, Last: 7})
	w(&Command{Verb: contract.VerbReserve, Tenant: "t1", OperationID: "o2", HolderID: "hA", Members: anyVX, Activate: true}) // value 0
	w(&Command{Verb: contract.VerbReserve, Tenant: "t1", OperationID: "o3", HolderID: "hB", Members: anyVX, Activate: true}) // value 1
	// Lease 3 (holder hB, active, epoch 1, no deadline, no keep-alive, one member: range
	// 0, quantity 0, value 1): make it hold value 0 as well.
	rec := slices.Concat(appendString(nil, "t1\x00hB"), []byte{byte(LeaseActive), 1, 0, 0, 1, byte(MemberRange), 0, 0})
	snap := k.Snapshot(nil)
	at := bytes.Index(snap, append(slices.Clone(rec), 1))
	if at < 0 || bytes.Count(snap, rec) != 1 {
		t.Fatalf("lease 3's record not found once in %x", snap)
	}
	bad := slices.Clone(snap)
	bad[at+len(rec)] = 0
	k2, err := Restore(cfg, bad)
	if err != nil {
		return // refused: fixed
	}
	k2.Apply(Entry{LSN: 4, Slot: 0, Cmd: &Command{Verb: contract.VerbRelease, Tenant: "t1", OperationID: "o4", HolderID: "hA", LeaseLSN: 2, Epoch: 1}}, &out)
	k2.Apply(Entry{LSN: 5, Slot: 0, Cmd: &Command{Verb: contract.VerbReserve, Tenant: "t1", OperationID: "o5", HolderID: "hC", Members: anyVX, Activate: true}}, &out)
	t.Errorf("Restore accepted leases 2 and 3 both holding value 0 of range vx; after lease 2 ends, "+
		"a new reserve is granted %s while lease 3 still holds 0 (invariants: %v)", mFmtOut(&out), k2.CheckInvariants())
}

// Apply takes a journaled command's derived slots as they were journaled: a reserve
// normalized with 100 ms slots keeps its deadline when a shard with another slot length
// replays it. (Apply used to derive TTLSlots again from its own configuration.)
func TestReplayKeepsJournaledTTLSlots(t *testing.T) {
	at100 := DefaultConfig()
	at10 := DefaultConfig()
	at10.SlotMillis = 10
	k, err := New(at10)
	if err != nil {
		t.Fatal(err)
	}
	var out Output
	k.Apply(Entry{LSN: 1, Slot: 1, Cmd: &Command{Verb: contract.VerbCreateResource, Tenant: "t", OperationID: "c", ObjectID: "r"}}, &out)
	reserve := &Command{Verb: contract.VerbReserve, Tenant: "t", OperationID: "o", HolderID: "h", TTLMillis: 1000,
		Members: []Member{{Kind: MemberResource, ID: "r"}}}
	Normalize(&at100.Shape, reserve)
	k.Apply(Entry{LSN: 2, Slot: 1, Cmd: reserve}, &out)
	if out.Code != contract.CodeOK || out.Lease.DeadlineSlot != 11 {
		t.Fatalf("replayed reserve: %s deadline %d, want ok 11 (1 + 10 slots of 100 ms)", out.Code, out.Lease.DeadlineSlot)
	}
}
