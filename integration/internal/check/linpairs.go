package check

import (
	"sort"

	"github.com/anishathalye/porcupine"

	"github.com/holdfast/holdfast/contract"
)

// A bundle across placement keys is one step for the objects it touches (docs/api.md §2),
// and linearizability is not compositional for operations on several objects: each
// object's history can be linearizable on its own while no single order of the whole
// history is — a reader that saw one member held by a bundle, and a reader after it that
// saw another member still free, put the bundle after the second read for one object and
// before the first for the other. So besides each object's partition, every pair of
// objects that a reserve across keys names together (the first member's object with each
// other's) is checked as one partition: its state is the pair of the objects' states, and
// an operation on both — the bundle, a verb on its lease — is one step that each object's
// model must take. What a lease's change does to the members on another shard than its
// home is a step of its own (a follow): they learn it from the home — except an expiry's,
// which has no caller to answer early: its members are freed at one moment to readers
// (the end's two rounds), so a pair sees the expiry and its follow as one step, at any
// moment after the expiry (docs/api.md §2).

// maxPairs bounds the pair partitions checked in one history (each is a product of two
// objects' histories); past it the rest are counted in a note.
const maxPairs = 64

// pairKey names a pair partition: two object partitions.
type pairKey struct{ a, b partKey }

func (k pairKey) String() string { return k.a.String() + " with " + k.b.String() }

// pairOp is one operation as a pair partition sees it: its view from either object (nil
// where it does not touch that object), and an expiry's follow on either side, taken in
// the same step.
type pairOp struct{ a, b, af, bf *linOp }

// timing is the operation whose call and return bound the pair's step: its view from
// either object, or for an expiry with a follow, from the expiry's call on, for as long
// as the follow may take.
func (o *pairOp) timing() *linOp {
	if o.af == nil && o.bf == nil {
		return o.one()
	}
	t := *o.one()
	t.ret = farFuture
	return &t
}

func (o *pairOp) one() *linOp {
	if o.a != nil {
		return o.a
	}
	return o.b
}

func (o *pairOp) String() string { return o.one().String() }

type pairState struct{ a, b *mState }

// pairsOf builds the pair partitions of the reserves across keys in parts.
func pairsOf(w *World, parts map[partKey][]*linOp) (map[pairKey][]*pairOp, int) {
	var keys []pairKey
	seen := map[pairKey]bool{}
	for _, op := range w.H.Ops {
		if op.Verb != VReserve || op.Status != Committed || op.Intent != "" || len(op.Req.Members) < 2 {
			continue
		}
		first := memberPart(op.Tenant, op.Req.Members[0])
		for _, m := range op.Req.Members[1:] {
			k := pairKey{first, memberPart(op.Tenant, m)}
			if contract.PlacementKey(k.a.id) == contract.PlacementKey(k.b.id) || seen[k] {
				continue
			}
			seen[k] = true
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	left := 0
	if len(keys) > maxPairs {
		keys, left = keys[:maxPairs], len(keys)-maxPairs
	}
	out := map[pairKey][]*pairOp{}
	for _, k := range keys {
		byOp := map[any]*pairOp{}
		var ops []*pairOp
		for side, lops := range [2][]*linOp{parts[k.a], parts[k.b]} {
			for _, o := range lops {
				var id any = o.op
				follows := o.follow != "" && o.ev != nil
				switch {
				case follows:
					id = o.ev // an expiry's follow: in the expiry's step
				case o.follow != "":
					// A remote side's members follow their lease by a step of their own.
					id = o
				case o.op == nil:
					id = o.ev // an expiry: one step of the lease on both sides
				}
				p := byOp[id]
				if p == nil {
					p = &pairOp{}
					byOp[id] = p
					ops = append(ops, p)
				}
				switch {
				case side == 0 && follows:
					p.af = o
				case side == 0:
					p.a = o
				case follows:
					p.bf = o
				default:
					p.b = o
				}
			}
		}
		out[k] = ops
	}
	return out, left
}

func pairModel(k pairKey) porcupine.Model {
	return porcupine.Model{
		Init: func() interface{} {
			return &pairState{&mState{leases: map[string]lrec{}}, &mState{leases: map[string]lrec{}}}
		},
		Step: func(st, in, _ interface{}) (bool, interface{}) {
			s, o := st.(*pairState), in.(*pairOp)
			n := *s
			for _, side := range [2]struct {
				k       partKey
				st      **mState
				op, fol *linOp
			}{{k.a, &n.a, o.a, o.af}, {k.b, &n.b, o.b, o.bf}} {
				for _, lo := range [2]*linOp{side.op, side.fol} {
					if lo == nil {
						continue
					}
					ok, next, _ := step(side.k, *side.st, lo)
					if !ok {
						return false, s
					}
					*side.st = next
				}
			}
			return true, &n
		},
		Equal: func(a, b interface{}) bool {
			x, y := a.(*pairState), b.(*pairState)
			return x.a.equal(y.a) && x.b.equal(y.b)
		},
		Hash: func(st interface{}) uint64 {
			s := st.(*pairState)
			return s.a.hash()*1_000_003 ^ s.b.hash()
		},
		DescribeOperation: func(in, _ interface{}) string { return in.(*pairOp).String() },
		DescribeState: func(st interface{}) string {
			s := st.(*pairState)
			return s.a.describe(k.a.kind) + " | " + s.b.describe(k.b.kind)
		},
	}
}

// checkPair checks one pair partition.
func checkPair(k pairKey, ops []*pairOp, opt LinOptions) porcupine.CheckResult {
	return porcupine.CheckOperationsTimeout(pairModel(k), operations(ops, (*pairOp).timing), opt.Timeout)
}
