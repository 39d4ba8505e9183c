package actors

import (
	"time"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
)

// Bundles across shards (docs/design.md "Bundles across shards"): a reserve whose members
// fall on several shards is begun at its home shard, prepared at the others, and decided
// in the home's journal alone. These files are the shard actor's part, over actor
// messages between the shards of this process and, in a cluster, between nodes
// (peers.go); the kernel (kernel/bundle.go) holds the state. This one: the messages, the shard's bundle state and its routing; the home's
// coordinator is bundle_home.go, the participant's replies bundle_participant.go, the
// mirrors of a lease's changes and their acknowledgements bundle_mirrors.go, and what
// waits for an undecided bundle bundle_waits.go. Every message is idempotent by
// transaction and may be lost with a shard: participants that hold intents past the
// prepare bound ask the home, which answers from its journal; the home resends mirrors
// until they are acknowledged.

// maxParked bounds the writes and reads waiting for undecided bundles; past it: overloaded.
const maxParked = 4096

// The steps of a bundle a test can stop a process at (Options.BundleStep).
const (
	StepBegun     = "begun"     // home: the begin sequenced, prepares not sent yet
	StepPrepared  = "prepared"  // participant: its prepare applied, its vote not sent yet
	StepVoted     = "voted"     // home: every vote in, the commit not sequenced yet
	StepAnswered  = "answered"  // home: a bundle committing in parallel answered, its commit sequenced, not durable
	StepCommitted = "committed" // home: the commit applied, client and participants not told yet
	StepMirrored  = "mirrored"  // participant: a mirror applied
	StepEnding    = "ending"    // home: a bundle's lease ended, its participants not told yet
	StepFreeing   = "freeing"   // home: every other part of an ended lease ending (or, a short end, freed), its own free not journaled
)

// BundleSteps are the steps in the order a bundle (or an import across shards) passes
// them: what the crash tests stop a process at, each in turn.
var BundleSteps = []string{StepBegun, StepPrepared, StepVoted, StepAnswered, StepCommitted, StepMirrored, StepEnding, StepFreeing}

// step tells the test hook a bundle reached step.
func (s *shard) step(name string) {
	if f := s.h.sys.opts.BundleStep; f != nil {
		f(name, s.h.shard)
	}
}

// prepareBound is how long a home waits for its participants' votes before it aborts,
// and how long a participant holds intents before it asks the home.
func (s *shard) prepareBound() time.Duration { return s.h.sys.opts.PrepareBound }

// undecidedBound is how long a write or read waits for an undecided bundle holding what
// it names before it is answered timeout (indefinite): Options.WaitBound.
func (s *shard) undecidedBound() time.Duration { return s.h.sys.opts.WaitBound }

// prepareMsg asks a participant to hold its members of a transaction.
type prepareMsg struct {
	txn      kernel.TxnRef
	priority uint64
	tenant   string
	holder   string
	activate bool
	members  []kernel.Member
	// imports is an import's prepare (bundle_group.go): each lease with its members here,
	// members then those in order; txn the import's.
	imports []kernel.ImportLease
}

// voteMsg is a participant's answer: prepared (its members as held), or refused — a code
// and the member (an index into the prepare's members), or die (an older bundle holds one).
type voteMsg struct {
	txn      kernel.TxnRef
	shard    uint32
	prepared bool
	die      bool
	code     contract.Code
	member   int
	members  []kernel.MemberView
}

// mirrorMsg tells a participant the state of a transaction's lease (0: aborted, free),
// and the lease's lsn at the home (its commit's).
type mirrorMsg struct {
	txn      kernel.TxnRef
	priority uint64 // with txn, names the transaction (a lost begin's position is reused)
	state    kernel.LeaseState
	deadline uint64
	lease    uint64
	phase    kernel.Phase // a two-round end's round (kernel.EndPhase); none otherwise
	second   bool         // the home's: a free its second round sends (not on the wire)
}

// queryMsg is a participant asking the home about a transaction it holds intents for.
type queryMsg struct {
	txn      kernel.TxnRef
	priority uint64
	shard    uint32
}

// bundleState is a shard's coordinator and participant state.
type bundleState struct {
	coords    map[uint64]*coord // the home's transactions by begin lsn
	parked    []parkedWrite
	waiting   []*prepareMsg               // prepares waiting for a younger bundle's decision
	asked     map[kernel.TxnRef]time.Time // undecided intents held here: when first seen or last asked
	reads     []*readMsg                  // reads waiting for an undecided bundle
	answers   []heldAnswer                // write answers waiting for an undecided bundle
	waitedAt  map[*prepareMsg]time.Time   // when each waiting prepare began to wait
	mirrors   []mirrorMsg                 // mirrors of the batch being applied, to send after it
	owed      map[uint64]*owed            // the home's mirrors not acknowledged yet, by lease
	preparing map[kernel.TxnRef]bool      // prepares sequenced and not applied yet
	decided   bool                        // the batch being applied decided a bundle here
	lastAge   uint64                      // the last priority given to a bundle begun here (bundleAge)
	// waitedSince keeps, for a parked write sequenced again, when it first waited, until
	// its answer: parked again, it waits within the same bound (one entry a parked write).
	waitedSince map[*kernel.Command]time.Time
	txnBuf      []kernel.TxnRef
	// barrier is the position of the last commit of a bundle answered before it was
	// applied (answerEarly): a read here waits until it is applied (readApplied).
	barrier uint64
	// recovering counts the coordinators a restarted home made for its undecided parallel
	// begins (recoverBundles) and not yet decided (answerCoord, their one way out).
	recovering int
}

func (b *bundleState) init() {
	if b.coords == nil {
		b.coords = make(map[uint64]*coord)
		b.owed = make(map[uint64]*owed)
		b.preparing = make(map[kernel.TxnRef]bool)
		b.asked = make(map[kernel.TxnRef]time.Time)
		b.waitedAt = make(map[*prepareMsg]time.Time)
		b.waitedSince = make(map[*kernel.Command]time.Time)
	}
}

// sendShard sends msg to shard k's actor: in this process when k is open here, else
// through Options.Peers to its owner in the cluster; without peers it is dropped, as a
// message lost on the way.
func (s *shard) sendShard(k uint32, msg any) {
	if int(k) >= len(s.h.sys.hosts) {
		return
	}
	if pid := s.h.sys.hosts[k].pid.Load(); pid != nil {
		s.h.sys.root.Send(pid, msg)
	} else if p := s.h.sys.opts.Peers; p != nil {
		p.Send(k, encodePeer(msg))
	}
}

// flushLater hands what the bundle steps sequenced to the journal after the mailbox's
// current messages.
func (s *shard) flushLater() {
	if s.self != nil && !s.flushQueued && s.q != nil && s.q.Pending() {
		s.flushQueued = true
		s.h.sys.root.Send(s.self, &flushNow{gen: s.gen})
	}
}

// bundleMessage handles a bundle message between shards.
func (s *shard) bundleMessage(msg any) bool {
	switch m := msg.(type) {
	case *prepareMsg:
		s.prepareIntents(m)
	case *voteMsg:
		s.vote(m)
	case *mirrorMsg:
		s.mirror(m)
	case *queryMsg:
		s.query(m)
	case *parkedDue:
		s.retryParked(time.Now())
	case *ackMsg:
		s.acked(m)
	default:
		return false
	}
	return true
}
