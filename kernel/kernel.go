// Package kernel is Holdfast's deterministic lease state machine: one Kernel is one shard.
//
// Its input is a journal entry (lsn, request_slot, command); its output is a result and the
// event of the state change. It does no I/O, reads no clock and no process setting: the
// same entries always rebuild the same state and the same answers, which is what lets the
// runtime replay a journal after a crash, under any command line and on any node. What
// shapes state (Shape: windows, table bounds) comes from the journal's configure entries;
// what judges requests (Limits) is checked only when a write is admitted. Every table is
// bounded by the shape in force and answers the contract's *_table_full code instead of
// growing.
package kernel

import (
	"fmt"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel/internal/valueset"
)

// Kernel is the state of one shard. It is not safe for concurrent use: one actor owns it.
type Kernel struct {
	shard uint32
	// shape is the configuration in force: the one New was given until the journal's
	// first configure entry, then the last one applied (or restored from a snapshot).
	shape      Shape
	configured bool // a configure entry was applied, or the shape came from a snapshot
	// ceil is, per bounded table, the largest fill the invariants allow: the bound, or
	// what the table held when a configure entry lowered the bound below it (a lowered
	// bound keeps what a table holds and refuses only new entries). Tests only read it.
	ceil ceilings

	lastLSN  uint64
	lastSlot uint64
	// retired is the retired watermark: the highest lease lsn whose record has been
	// dropped. Any id at or below it that is not in the lease table reads lease_retired.
	retired uint64

	resIdx   map[string]int32 // "tenant\x00resource_id" → index in res
	res      []resource
	poolIdx  map[string]int32
	pools    []pool
	rangeIdx map[string]int32
	ranges   []valueRange
	// rangeValues counts values held by range structures (allocated plus remembered as
	// freed for least_recently_freed), bounded by MaxRangeValues.
	rangeValues int

	leaseIdx  map[uint64]int32 // lease lsn → index in leases
	leases    []lease
	leaseFree []int32
	members   int // members over all leases in the table

	live [LeaseRevoking + 1]int // live leases by state, for metrics

	holderIdx  map[string]int32 // "tenant\x00holder_id" → index in holders
	holders    []holder
	holderFree []int32

	// Lease labels: interned sets (labelSets), referenced by live leases (lease.labels)
	// and by ended ones that carried any (endedLabels, by lsn).
	labelIdx    map[string]int32
	labelSets   []labelSet
	labelFree   []int32
	endedLabels map[uint64]int32

	// ix orders objects, live leases and allocated values for listings and lookups.
	ix index

	// Work coordination: runs and their work shards.
	runIdx  map[string]int32 // "tenant\x00run_id" → index in runs
	runs    []run
	workIdx map[string]int32 // "tenant\x00run_id/name" → index in works
	works   []work

	// Deleted objects' slots: graves until no ended lease names them, then free.
	graves fifo[grave]
	free   freeSlots

	expiry expiryHeap
	ended  endedTable // terminal leases within their history window
	ops    retryCache // remembered outcomes within the dedupe window

	// Bundles across shards (bundle.go): the bundle records by lease record lsn (at the
	// home: live and ended leases and undecided begins; at a participant: its parts), a
	// participant's records by transaction, the home's undecided begins by operation,
	// and every undecided record (at most MaxPendingBundles).
	bundles    map[uint64]*bundle
	begins     map[uint64]uint64 // the home's bundles: begin lsn → record lsn (the lease's once committed)
	txns       map[TxnRef]uint64
	pendingOps map[opKey]uint64
	pending    map[uint64]bool
	ending     map[uint64]bool // parts of ended leases not freed yet (ending.go)

	// fresh says the entry being applied is the first this kernel applies.
	fresh bool
	// skipRun counts the skip entries applied last, one after another (a lease.import
	// takes their lsns as its leases' ids); prevSkips is its value before this entry.
	// Snapshots keep skipRun: an import's skips and the import may span a snapshot.
	skipRun, prevSkips uint64

	// Scratch buffers reused across entries.
	blocked uint64 // check's: the earliest deadline of a claim in the way
	keyBuf  []byte
	hashBuf []byte
	picks   []pick
}

type resource struct {
	key     string // "tenant\x00id"
	state   ResourceState
	lease   uint64
	version uint64
}

type pool struct {
	key      string
	capacity uint64
	reserved uint64
	active   uint64
	consumed uint64 // units confirmed used up (lease.consume): only a resize brings them back
}

type valueRange struct {
	key       string
	first     uint64
	last      uint64
	strategy  Strategy
	allocated valueset.Set
	// used and freed serve least_recently_freed: used holds every value allocated now or
	// remembered in freed; freed lists released values in the order they were released.
	used  valueset.Set
	freed valueset.FreedQueue
	// excluded are values never handed out, sorted disjoint intervals (at most
	// contract.MaxExcluded); never allocated, never in used or freed.
	excluded []Interval
	// nExcluded counts the values of excluded, saturating at 2^64-1 (setExcluded keeps it).
	nExcluded uint64
	// band is the static band: values "any" takes only when none outside it is free.
	band    Interval
	hasBand bool
	format  string // how clients show values: "", "port", "ipv4", "mac"
}

// New returns an empty shard state. cfg.Shape is the shape in force until the journal's
// first configure entry (a journal written before configure entries existed has none);
// cfg.Limits is not kept: admission takes its limits with each write (Admit).
func New(cfg Config) (*Kernel, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	k := &Kernel{
		shard:     cfg.Shard,
		shape:     cfg.Shape,
		resIdx:    make(map[string]int32),
		poolIdx:   make(map[string]int32),
		rangeIdx:  make(map[string]int32),
		leaseIdx:  make(map[uint64]int32),
		holderIdx: make(map[string]int32),
		runIdx:    make(map[string]int32),
		workIdx:   make(map[string]int32),
		labelIdx:  make(map[string]int32),
		ix:        newIndex(),

		endedLabels: make(map[uint64]int32),
		bundles:     make(map[uint64]*bundle),
		begins:      make(map[uint64]uint64),
		txns:        make(map[TxnRef]uint64),
		pendingOps:  make(map[opKey]uint64),
		pending:     make(map[uint64]bool),
		ending:      make(map[uint64]bool),
	}
	k.raiseCeilings()
	return k, nil
}

// Shard is the shard's number.
func (k *Kernel) Shard() uint32 { return k.shard }

// Shape is the shape in force: what the journal (or the snapshot) says, or New's until
// the journal's first configure entry.
func (k *Kernel) Shape() Shape { return k.shape }

// Configured reports whether the shape in force came from the journal (a configure
// entry) or a snapshot, rather than from New: a runtime journals one when it is not.
func (k *Kernel) Configured() bool { return k.configured }

// LastLSN is the lsn of the last applied entry.
func (k *Kernel) LastLSN() uint64 { return k.lastLSN }

// LastSlot is the request_slot of the last applied entry.
func (k *Kernel) LastSlot() uint64 { return k.lastSlot }

// Apply applies one journal entry and writes its result into out. Entries must come with
// consecutive lsns and non-decreasing slots; anything else is a runtime bug and panics, so
// the shard halts instead of diverging from its journal.
func (k *Kernel) Apply(e Entry, out *Output) {
	if e.LSN != k.lastLSN+1 && !(k.lastLSN == 0 && e.LSN > 0) {
		panic(fmt.Sprintf("kernel: entry lsn %d after %d", e.LSN, k.lastLSN))
	}
	if e.Slot < k.lastSlot {
		panic(fmt.Sprintf("kernel: entry slot %d before %d", e.Slot, k.lastSlot))
	}
	k.fresh = k.lastLSN == 0 // nothing applied before this entry (configure asks)
	k.prevSkips, k.skipRun = k.skipRun, 0
	k.lastLSN, k.lastSlot = e.LSN, e.Slot
	k.retire(e.Slot, retireBudget)
	out.reset(e.LSN)
	c := e.Cmd
	apply := applierOf(c.Verb)
	if c.Verb.IsInternal() {
		apply(k, e, out)
		k.noteMirror(out)
		return
	}
	// The request-shape rules again, so a journal can never smuggle in a command they
	// forbid; the admission limits are not among them (CheckLimits): it was admitted.
	if r := Validate(c); r != nil {
		out.Code = r.Code
		return
	}
	if r := CheckSlots(&k.shape, c, e.Slot); r != nil {
		out.Code = r.Code
		return
	}
	if (c.Verb == contract.VerbImport || c.Parallel) && !k.afterSkips(e) {
		out.Code = contract.CodeInvalidRequest // a journal fault: the import's (or bundle's) ids are not its own
		return
	}
	key := makeOpKey(c.Tenant, c.OperationID)
	var hash uint64
	hash, k.hashBuf = commandHash(c, k.hashBuf)
	if k.answerRetry(c, key, hash, e.Slot, out) {
		return
	}
	if !k.opRoom(e.Slot) {
		out.Code = contract.CodeOperationTableFull
		return
	}
	apply(k, e, out)
	k.noteMirror(out)
	if out.Elsewhere {
		// A verb by value whose lease's home answers: remembered as that (the lease's id
		// in ref and member), so a retry goes to the same lease at its home under the same
		// operation_id, where the first answer is remembered — not to whatever the value
		// holds by then.
		k.ops.push(outcome{keyHi: key.hi, keyLo: key.lo, hash: hash, code: contract.CodeNoop, member: int16(out.Txn.Shard),
			lsn: e.LSN, ref: out.Txn.LSN, retireAfter: satAdd(e.Slot, k.shape.DedupeWindowSlots)})
		return
	}
	if out.Pending || out.Undecided {
		// A bundle begun but not decided (bundle.decide remembers it), or a member that an
		// undecided bundle holds (the caller waits and tries again): nothing to remember.
		return
	}
	if out.Code.IsRejection() {
		// A request-shape rule only the shard can decide (a range.resize whose kept bound
		// crosses the given one): rejected, definite, no effect and not remembered, as
		// the same rule would be before the journal (docs/api.md §4).
		return
	}
	var epoch uint8
	if out.ShowsLease() {
		epoch = uint8(out.Lease.Epoch) // the fencing token a retry must carry again
	}
	var ref uint64 // what a retry names that the command does not (outcome.ref)
	if f := rowOf(c.Verb).ref; f != nil {
		ref = f(out)
	}
	k.ops.push(outcome{keyHi: key.hi, keyLo: key.lo, hash: hash, code: out.Code, member: int16(out.MemberIndex),
		lsn: e.LSN, epoch: epoch, ref: ref, retireAfter: satAdd(e.Slot, k.shape.DedupeWindowSlots)})
}

// tenantKey builds "tenant\x00id" in the scratch buffer; index a map with
// string(k.keyBuf) directly so the lookup does not allocate.
func (k *Kernel) tenantKey(tenant, id string) []byte {
	k.keyBuf = append(append(append(k.keyBuf[:0], tenant...), 0), id...)
	return k.keyBuf
}

// splitKey returns the tenant and id parts of a stored "tenant\x00id" key.
func splitKey(key string) (tenant, id string) {
	for i := 0; i < len(key); i++ {
		if key[i] == 0 {
			return key[:i], key[i+1:]
		}
	}
	return "", key
}
