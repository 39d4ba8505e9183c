package kernel

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/holdfast/holdfast/contract"
)

// TestModelWork drives random work coordination — runs created and registered, claims
// (next and named), renewals, checkpoints, completions, parks and unparks, both splits,
// runs ended, time passing with expiries committed — through the kernel and through a
// reference model written from docs/api.md Part III with plain maps and scans. After every
// step the codes agree, a claim takes the work shard the model says is fairest, the
// kernel's invariants hold (a work shard held by at most one live lease, done, split and
// parked ones never held, cursors inside their ranges), every work shard reads as the
// model has it, and a split's pieces cover exactly what the parent gave up.
func TestModelWork(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := DefaultConfig()
		cfg.SlotMillis, cfg.DedupeWindowSlots, cfg.HistoryWindowSlots = 100, 1000, 20
		cfg.MaxWork = rapid.IntRange(4, 40).Draw(rt, "max-work")
		k, err := New(cfg)
		if err != nil {
			rt.Fatal(err)
		}
		m := &mwModel{runs: map[string]*mwRun{}, works: map[string]*mwWork{}, leases: map[uint64]*mwLease{}, cfg: cfg}
		steps := rapid.IntRange(1, 150).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			m.step(rt, k, i)
			if err := k.CheckInvariants(); err != nil {
				rt.Fatalf("step %d: invariant: %v", i, err)
			}
			m.compareWork(rt, k, i)
		}
		b := k.Snapshot(nil)
		k2, err := Restore(cfg, b)
		if err != nil {
			rt.Fatalf("restore: %v", err)
		}
		if string(k2.Snapshot(nil)) != string(b) {
			rt.Fatal("snapshot of the restored state differs")
		}
		// Replay: the journal's bytes, decoded and applied to a fresh shard, rebuild the
		// same state byte for byte.
		k3, err := New(cfg)
		if err != nil {
			rt.Fatal(err)
		}
		var out Output
		for _, e := range m.journal {
			var c Command
			if err := DecodeCommand(e.bytes, &c); err != nil {
				rt.Fatalf("decode lsn %d: %v", e.lsn, err)
			}
			k3.Apply(Entry{LSN: e.lsn, Slot: e.slot, Cmd: &c}, &out)
		}
		if string(k3.Snapshot(nil)) != string(b) {
			rt.Fatal("replaying the journal gives another state")
		}
	})
}

var mwKeys = []string{"", "b", "d", "f", "h", "k", "m", "p", "s", "v"}

type mwRun struct {
	status RunStatus
	works  []string // keys "run/name", in creation order
}

type mwWork struct {
	run, name, start, end string
	status                WorkStatus
	lease                 uint64
	claims                uint64
	cursor                *string
	splits                int
	endedBy               uint64 // the claim that completed, parked or split it
}

type mwLease struct {
	work     string
	holder   string
	deadline uint64
	epoch    uint64
	ended    bool
	endSlot  uint64
}

type mwModel struct {
	cfg     Config
	runs    map[string]*mwRun
	works   map[string]*mwWork
	leases  map[uint64]*mwLease
	slot    uint64
	ops     int
	out     Output
	journal []mwEntry // every applied entry, encoded as the journal holds it
	// A deleted run's work shards hold their slots until every lease that ended before
	// the delete has retired (retireAfter of each ended lease, in the order they ended).
	ended           []uint64
	endedN, retired int
	graves          []mwGrave
}

type mwGrave struct{ works, freeAfter int }

// graveWork is how many work slots deleted runs still hold.
func (m *mwModel) graveWork() int {
	n := 0
	for _, g := range m.graves {
		n += g.works
	}
	return n
}

type mwEntry struct {
	lsn, slot uint64
	bytes     []byte
}

// apply applies an entry as the shard does and keeps its journal encoding.
func (m *mwModel) apply(k *Kernel, c *Command) {
	for i := 0; i < retireBudget && len(m.ended) > 0 && m.ended[0] < m.slot; i++ {
		m.ended = m.ended[1:]
		m.retired++
	}
	for i := 0; i < retireBudget && len(m.graves) > 0 && m.graves[0].freeAfter <= m.retired; i++ {
		m.graves = m.graves[1:]
	}
	e := Entry{LSN: k.LastLSN() + 1, Slot: m.slot, Cmd: c}
	m.journal = append(m.journal, mwEntry{lsn: e.LSN, slot: e.Slot, bytes: c.AppendBinary(nil)})
	k.Apply(e, &m.out)
	if msg := eventBoundBroken(c, &m.out); msg != "" {
		panic(msg)
	}
}

func (m *mwModel) submit(rt *rapid.T, k *Kernel, c *Command) *Output {
	m.ops++
	c.Tenant, c.OperationID = "t1", fmt.Sprintf("op%d", m.ops)
	lim := m.cfg.Limits
	lim.MaxCommandBytes = math.MaxInt
	a := k.Admit(c, m.slot, &lim, k.LastLSN()+1, NoneInFlight{}, &m.out)
	if a.Rejection != nil {
		m.out = Output{Code: a.Rejection.Code}
		return &m.out
	}
	m.apply(k, c)
	if d := echoDiff(k, c, m.slot, &m.out); d != "" {
		rt.Fatalf("%s: a retry at once answers otherwise than the first reply: %s", c.Verb, d)
	}
	return &m.out
}

func (m *mwModel) want(rt *rapid.T, i int, c *Command, got *Output, want Code) {
	if got.Code != want {
		rt.Fatalf("step %d: %s: got %s, want %s", i, c.Verb, got.Code, want)
	}
}

func (m *mwModel) liveLeases() []uint64 {
	var ls []uint64
	for lsn, l := range m.leases {
		if !l.ended {
			ls = append(ls, lsn)
		}
	}
	slices.Sort(ls)
	return ls
}

func (m *mwModel) step(rt *rapid.T, k *Kernel, i int) {
	runID := rapid.SampledFrom([]string{"r1", "r2"}).Draw(rt, "run")
	switch rapid.IntRange(0, 14).Draw(rt, "op") {
	case 0: // create a run: a partition of the key space
		n := rapid.IntRange(1, 3).Draw(rt, "n")
		cuts := rapid.SliceOfNDistinct(rapid.IntRange(1, len(mwKeys)-1), n-1, n-1, rapid.ID[int]).Draw(rt, "cuts")
		slices.Sort(cuts)
		bounds := append([]string{""}, func() []string {
			var s []string
			for _, c := range cuts {
				s = append(s, mwKeys[c])
			}
			return s
		}()...)
		c := &Command{Verb: contract.VerbCreateRun, ObjectID: runID}
		for j := range bounds {
			end := ""
			if j+1 < len(bounds) {
				end = bounds[j+1]
			}
			c.Work = append(c.Work, WorkSpec{Name: fmt.Sprintf("s%d", j), Start: bounds[j], End: end})
		}
		out := m.submit(rt, k, c)
		switch {
		case m.runs[runID] != nil:
			m.want(rt, i, c, out, contract.CodeAlreadyExists)
		case len(m.works)+m.graveWork()+len(c.Work) > m.cfg.MaxWork:
			m.want(rt, i, c, out, contract.CodeWorkTableFull)
		default:
			m.want(rt, i, c, out, contract.CodeOK)
			r := &mwRun{status: RunActive}
			m.runs[runID] = r
			for _, w := range c.Work {
				m.addWork(runID, w.Name, w.Start, w.End)
			}
		}
	case 1: // register one more work shard
		name := rapid.SampledFrom([]string{"x", "y"}).Draw(rt, "name")
		c := &Command{Verb: contract.VerbRegisterRun, ObjectID: runID, Work: []WorkSpec{{Name: name, Start: "a", End: "c"}}}
		out := m.submit(rt, k, c)
		r := m.runs[runID]
		switch {
		case r == nil:
			m.want(rt, i, c, out, contract.CodeRunNotFound)
		case r.status.Terminal():
			m.want(rt, i, c, out, contract.CodeRunTerminal)
		case m.works[runID+"/"+name] != nil:
			m.want(rt, i, c, out, contract.CodeAlreadyExists)
		case len(m.works)+m.graveWork()+1 > m.cfg.MaxWork:
			m.want(rt, i, c, out, contract.CodeWorkTableFull)
		default:
			m.want(rt, i, c, out, contract.CodeOK)
			m.addWork(runID, name, "a", "c")
		}
	case 2, 3: // claim next, or a named work shard
		holder := rapid.SampledFrom([]string{"w1", "w2", "w3"}).Draw(rt, "holder")
		ttl := uint64(rapid.IntRange(1, 6).Draw(rt, "ttl")) * 100
		mb := Member{Kind: MemberWork, ID: runID}
		var named *mwWork
		if rapid.Bool().Draw(rt, "named") {
			if keys := m.runWorks(runID); len(keys) > 0 {
				key := rapid.SampledFrom(keys).Draw(rt, "work")
				named = m.works[key]
				mb.Name = named.name
			}
		}
		c := &Command{Verb: contract.VerbReserve, HolderID: holder, TTLMillis: ttl, Members: []Member{mb}}
		out := m.submit(rt, k, c)
		pick, code := m.claimable(runID, named)
		m.want(rt, i, c, out, code)
		if code == contract.CodeOK {
			if got := out.Work.RunID + "/" + out.Work.Name; got != pick {
				rt.Fatalf("step %d: claimed %s, the fairest is %s", i, got, pick)
			}
			w := m.works[pick]
			w.lease, w.claims = out.LSN, w.claims+1
			m.leases[out.LSN] = &mwLease{work: pick, holder: holder, deadline: m.slot + ttl/100, epoch: 1}
		}
	case 4, 5, 6, 7, 8, 9: // a fenced verb on a claim
		ls := m.liveLeases()
		if len(ls) == 0 {
			return
		}
		lsn := rapid.SampledFrom(ls).Draw(rt, "lease")
		l := m.leases[lsn]
		c := &Command{LeaseLSN: lsn, HolderID: l.holder, Epoch: l.epoch}
		if rapid.IntRange(0, 9).Draw(rt, "fence") == 0 {
			c.Epoch++
		}
		key := rapid.SampledFrom(mwKeys[1:]).Draw(rt, "key")
		switch rapid.IntRange(0, 5).Draw(rt, "verb") {
		case 0:
			c.Verb, c.CursorKey, c.CursorToken, c.HasCursor = contract.VerbCheckpoint, key, "tok-"+key, true
		case 1:
			c.Verb = contract.VerbCompleteWork
		case 2:
			c.Verb = contract.VerbParkWork
		case 3:
			c.Verb, c.SplitKey = contract.VerbSplitResidual, key
		case 4:
			c.Verb = contract.VerbSplitReplace
			w := m.works[l.work]
			c.Work = []WorkSpec{{Start: w.resume(), End: key}, {Start: key, End: w.end}}
		default:
			c.Verb = contract.VerbRenew
			c.TTLMillis = uint64(rapid.IntRange(1, 6).Draw(rt, "ttl")) * 100
		}
		out := m.submit(rt, k, c)
		m.fenced(rt, i, c, out, lsn)
	case 10: // an operator unparks
		keys := m.runWorks(runID)
		if len(keys) == 0 {
			return
		}
		w := m.works[rapid.SampledFrom(keys).Draw(rt, "work")]
		c := &Command{Verb: contract.VerbUnparkWork, ObjectID: runID, Name: w.name}
		out := m.submit(rt, k, c)
		switch {
		case m.runs[runID].status.Terminal():
			m.want(rt, i, c, out, contract.CodeRunTerminal)
		case w.status != WorkParked:
			m.want(rt, i, c, out, contract.CodeInvalidState)
		default:
			m.want(rt, i, c, out, contract.CodeOK)
			w.status = WorkActive
		}
	case 11: // the run ends
		verb := rapid.SampledFrom([]Verb{contract.VerbCompleteRun, contract.VerbFailRun, contract.VerbCancelRun}).Draw(rt, "end")
		c := &Command{Verb: verb, ObjectID: runID}
		out := m.submit(rt, k, c)
		r := m.runs[runID]
		switch {
		case r == nil:
			m.want(rt, i, c, out, contract.CodeRunNotFound)
		case r.status.Terminal():
			m.want(rt, i, c, out, contract.CodeRunTerminal)
		case verb == contract.VerbCompleteRun && slices.ContainsFunc(r.works, func(key string) bool {
			s := m.works[key].status
			return s != WorkDone && s != WorkSplit
		}):
			m.want(rt, i, c, out, contract.CodeInvalidState)
		default:
			m.want(rt, i, c, out, contract.CodeOK)
			r.status = map[Verb]RunStatus{contract.VerbCompleteRun: RunDone, contract.VerbFailRun: RunFailed, contract.VerbCancelRun: RunCancelled}[verb]
		}
	case 14: // a late complete or park of an ended claim, with the fence it had, after its retry window
		var ended []uint64
		for lsn, l := range m.leases {
			if w := m.works[l.work]; l.ended && w != nil && l.endSlot+m.cfg.HistoryWindowSlots > m.slot+2 {
				ended = append(ended, lsn)
			}
		}
		if len(ended) == 0 {
			return
		}
		slices.Sort(ended)
		lsn := rapid.SampledFrom(ended).Draw(rt, "ended")
		l, w := m.leases[lsn], m.works[m.leases[lsn].work]
		c := &Command{Verb: rapid.SampledFrom([]Verb{contract.VerbCompleteWork, contract.VerbParkWork}).Draw(rt, "late"),
			LeaseLSN: lsn, HolderID: l.holder, Epoch: l.epoch - 1}
		if rapid.IntRange(0, 4).Draw(rt, "who") == 0 {
			c.HolderID = "w9"
		}
		out := m.submit(rt, k, c)
		done := map[Verb]WorkStatus{contract.VerbCompleteWork: WorkDone, contract.VerbParkWork: WorkParked}[c.Verb]
		switch {
		case c.HolderID != l.holder:
			m.want(rt, i, c, out, contract.CodeHolderMismatch)
		case w.endedBy == lsn && w.status == done:
			// The claim learns that its verb happened; nothing changes.
			m.want(rt, i, c, out, contract.CodeOK)
			if out.Event != 0 || out.Lease.Epoch != l.epoch || out.Work.Status != done {
				rt.Fatalf("step %d: late %s: event %v, lease epoch %d (want %d), work %s", i, c.Verb, out.Event, out.Lease.Epoch, l.epoch, out.Work.Status)
			}
		default:
			m.want(rt, i, c, out, contract.CodeStaleEpoch)
		}
	case 13: // delete the run: only once it has ended and nothing of it is claimed
		c := &Command{Verb: contract.VerbDeleteRun, ObjectID: runID}
		out := m.submit(rt, k, c)
		r := m.runs[runID]
		switch {
		case r == nil:
			m.want(rt, i, c, out, contract.CodeRunNotFound)
		case !r.status.Terminal() || slices.ContainsFunc(r.works, func(key string) bool { return m.works[key].lease != 0 }):
			m.want(rt, i, c, out, contract.CodeObjectInUse)
		default:
			m.want(rt, i, c, out, contract.CodeOK)
			for _, key := range r.works {
				delete(m.works, key)
			}
			delete(m.runs, runID)
			m.graves = append(m.graves, mwGrave{works: len(r.works), freeAfter: m.endedN})
			if k.GetRun("t1", runID, &m.out); m.out.Code != contract.CodeRunNotFound {
				rt.Fatalf("step %d: deleted run reads %s", i, m.out.Code)
			}
		}
	case 12: // time passes; due expiries commit
		m.slot += uint64(rapid.IntRange(0, 4).Draw(rt, "dt"))
		for _, due := range k.DueExpirations(m.slot, 100, nil) {
			c := &Command{Verb: contract.VerbExpire, Tenant: due.Tenant, LeaseLSN: due.LeaseLSN, Deadline: due.Deadline}
			m.apply(k, c)
			l := m.leases[due.LeaseLSN]
			if m.out.Code != contract.CodeOK || l == nil || l.ended || l.deadline > m.slot {
				rt.Fatalf("step %d: expiry of %d: %s (model: %+v)", i, due.LeaseLSN, m.out.Code, l)
			}
			m.endLease(due.LeaseLSN)
		}
		for lsn, l := range m.leases {
			if !l.ended && l.deadline <= m.slot && !slices.ContainsFunc(k.DueExpirations(m.slot, 100, nil), func(d Due) bool { return d.LeaseLSN == lsn }) {
				rt.Fatalf("step %d: lease %d past its deadline %d at %d and not due", i, lsn, l.deadline, m.slot)
			}
		}
	}
}

func (m *mwModel) addWork(runID, name, start, end string) {
	key := runID + "/" + name
	m.works[key] = &mwWork{run: runID, name: name, start: start, end: end, status: WorkActive}
	m.runs[runID].works = append(m.runs[runID].works, key)
}

func (m *mwModel) runWorks(runID string) []string {
	if r := m.runs[runID]; r != nil {
		return r.works
	}
	return nil
}

func (w *mwWork) resume() string {
	if w.cursor != nil {
		return *w.cursor
	}
	return w.start
}

// claimable is what a claim on runID (of named, if not nil) answers, and the work shard it
// takes: the active, unclaimed one with the fewest claims, then the lowest name.
func (m *mwModel) claimable(runID string, named *mwWork) (string, Code) {
	r := m.runs[runID]
	switch {
	case r == nil:
		return "", contract.CodeRunNotFound
	case r.status.Terminal():
		return "", contract.CodeRunTerminal
	case named != nil && named.status != WorkActive:
		return "", contract.CodeWorkTerminal
	case named != nil && named.lease != 0:
		return "", contract.CodeResourceBusy
	case named != nil:
		return runID + "/" + named.name, contract.CodeOK
	}
	best := ""
	for _, key := range r.works {
		w := m.works[key]
		if w.status != WorkActive || w.lease != 0 {
			continue
		}
		if b := m.works[best]; best == "" || w.claims < b.claims || (w.claims == b.claims && w.name < b.name) {
			best = key
		}
	}
	if best == "" {
		return "", contract.CodeNoneAvailable
	}
	return best, contract.CodeOK
}

func (m *mwModel) endLease(lsn uint64) {
	l := m.leases[lsn]
	l.ended, l.epoch, l.endSlot = true, l.epoch+1, m.slot
	m.ended = append(m.ended, m.slot+m.cfg.HistoryWindowSlots)
	m.endedN++
	if w := m.works[l.work]; w.lease == lsn {
		w.lease = 0
	}
}

// fenced checks a work verb (or a renew) on live claim lsn against the model.
func (m *mwModel) fenced(rt *rapid.T, i int, c *Command, out *Output, lsn uint64) {
	l := m.leases[lsn]
	w := m.works[l.work]
	if c.Verb == contract.VerbSplitReplace {
		// An empty child range is a shape the request itself gets wrong.
		if a, b := c.Work[0], c.Work[1]; (a.End != "" && a.Start >= a.End) || (b.End != "" && b.Start >= b.End) {
			m.want(rt, i, c, out, contract.CodeInvalidRequest)
			return
		}
	}
	switch {
	case c.Epoch != l.epoch:
		m.want(rt, i, c, out, contract.CodeStaleEpoch)
		return
	case m.slot >= l.deadline:
		m.want(rt, i, c, out, contract.CodeLeaseExpired)
		return
	}
	if c.Verb == contract.VerbRenew {
		m.want(rt, i, c, out, contract.CodeOK)
		l.deadline = max(l.deadline, m.slot+c.TTLMillis/100)
		if out.Lease.DeadlineSlot != l.deadline {
			rt.Fatalf("step %d: renew: deadline %d, want %d (never shortened)", i, out.Lease.DeadlineSlot, l.deadline)
		}
		return
	}
	if m.runs[w.run].status.Terminal() {
		m.want(rt, i, c, out, contract.CodeRunTerminal)
		return
	}
	inRange := func(key string) bool { return key >= w.start && (w.end == "" || key < w.end) }
	switch c.Verb {
	case contract.VerbCheckpoint:
		switch {
		case !inRange(c.CursorKey):
			m.want(rt, i, c, out, contract.CodeCursorOutOfBounds)
		case w.cursor != nil && c.CursorKey < *w.cursor:
			m.want(rt, i, c, out, contract.CodeCursorRegression)
		default:
			m.want(rt, i, c, out, contract.CodeOK)
			key := c.CursorKey
			w.cursor = &key
		}
	case contract.VerbCompleteWork, contract.VerbParkWork:
		m.want(rt, i, c, out, contract.CodeOK)
		w.status = map[Verb]WorkStatus{contract.VerbCompleteWork: WorkDone, contract.VerbParkWork: WorkParked}[c.Verb]
		w.endedBy = lsn
		m.endLease(lsn)
	case contract.VerbSplitResidual:
		name := fmt.Sprintf("%s:r%d", w.name, w.splits)
		switch {
		case c.SplitKey <= w.resume() || c.SplitKey <= w.start || (w.end != "" && c.SplitKey >= w.end) || m.works[w.run+"/"+name] != nil:
			m.want(rt, i, c, out, contract.CodeSplitInvalid)
		case len(m.works)+m.graveWork()+1 > m.cfg.MaxWork:
			m.want(rt, i, c, out, contract.CodeWorkTableFull)
		default:
			m.want(rt, i, c, out, contract.CodeOK)
			m.addWork(w.run, name, c.SplitKey, w.end)
			if got := out.Children; len(got) != 1 || got[0].Start != c.SplitKey || got[0].End != w.end || out.Work.End != c.SplitKey {
				rt.Fatalf("step %d: residual does not cover [%q,%q): %+v", i, c.SplitKey, w.end, got)
			}
			w.end = c.SplitKey
			w.splits++
		}
	case contract.VerbSplitReplace:
		a, b := c.Work[0], c.Work[1]
		valid := a.Start == w.resume() && b.End == w.end && a.End == b.Start && a.Start < a.End && (b.End == "" || b.Start < b.End)
		switch {
		case !valid:
			if out.Code != contract.CodeSplitInvalid && out.Code != contract.CodeInvalidRequest {
				rt.Fatalf("step %d: split_replace %+v of [%q,%q) resume %q: %s", i, c.Work, w.start, w.end, w.resume(), out.Code)
			}
		case m.works[w.run+"/"+w.name+":c0"] != nil || m.works[w.run+"/"+w.name+":c1"] != nil:
			m.want(rt, i, c, out, contract.CodeSplitInvalid)
		case len(m.works)+m.graveWork()+2 > m.cfg.MaxWork:
			m.want(rt, i, c, out, contract.CodeWorkTableFull)
		default:
			m.want(rt, i, c, out, contract.CodeOK)
			// The children cover exactly what the parent had not passed, in order.
			if got := out.Children; len(got) != 2 || got[0].Start != w.resume() || got[0].End != got[1].Start || got[1].End != w.end {
				rt.Fatalf("step %d: children %+v do not cover [%q,%q)", i, got, w.resume(), w.end)
			}
			m.addWork(w.run, w.name+":c0", a.Start, a.End)
			m.addWork(w.run, w.name+":c1", b.Start, b.End)
			w.status, w.endedBy = WorkSplit, lsn
			m.endLease(lsn)
		}
	}
}

// compareWork reads every work shard the model knows and compares what matters.
func (m *mwModel) compareWork(rt *rapid.T, k *Kernel, i int) {
	var out Output
	for key, w := range m.works {
		k.GetWork("t1", w.run, w.name, &out)
		if out.Code != contract.CodeOK {
			rt.Fatalf("step %d: %s: %s", i, key, out.Code)
		}
		v := &out.Work
		var cursorOK bool
		if w.cursor == nil {
			cursorOK = !v.HasCursor
		} else {
			cursorOK = v.HasCursor && v.CursorKey == *w.cursor
		}
		if v.Status != w.status || v.LeaseLSN != w.lease || v.Claims != w.claims || v.Start != w.start || v.End != w.end || !cursorOK {
			rt.Fatalf("step %d: %s reads %+v, model %+v", i, key, *v, *w)
		}
	}
}
