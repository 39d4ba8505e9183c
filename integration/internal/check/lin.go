package check

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/messages"
)

// memberPart is the partition of a member's object.
func memberPart(tenant string, m *messages.Member) partKey {
	switch {
	case m.ResourceId != "":
		return partKey{kind: pkResource, tenant: tenant, id: m.ResourceId}
	case m.PoolId != "":
		return partKey{kind: pkPool, tenant: tenant, id: m.PoolId}
	}
	return partKey{kind: pkRange, tenant: tenant, id: m.RangeId}
}

// partitions splits the history into per-object and per-(holder, shard) histories.
func partitions(w *World, rep *Report) map[partKey][]*linOp {
	h := w.H
	parts := map[partKey][]*linOp{}
	add := func(k partKey, o *linOp) { parts[k] = append(parts[k], o) }
	objKey := memberPart
	leaseParts := func(l *LeaseInfo) []partKey {
		seen := map[partKey]bool{}
		var out []partKey
		for _, m := range l.Members {
			k := objKey(l.Tenant, m)
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
		return append(out, partKey{kind: pkHolder, tenant: l.Tenant, id: l.Holder, shard: l.Shard})
	}
	unresolved := 0
	for _, op := range h.Ops {
		if op.Intent != "" {
			continue
		}
		if op.Status != Committed {
			if op.Status == Unresolved {
				unresolved++
			}
			continue
		}
		base := linOp{op: op, call: op.Invoke, ret: op.Return}
		switch op.Verb {
		case VResourceCreate, VResourceGet, VResourceDelete:
			o := base
			add(partKey{kind: pkResource, tenant: op.Tenant, id: op.Req.ResourceID}, &o)
		case VPoolCreate, VPoolGet, VPoolDelete:
			o := base
			add(partKey{kind: pkPool, tenant: op.Tenant, id: op.Req.PoolID}, &o)
		case VRangeCreate, VRangeGet, VRangeDelete:
			o := base
			add(partKey{kind: pkRange, tenant: op.Tenant, id: op.Req.RangeID}, &o)
		case VReserve:
			var li *LeaseInfo
			if op.OK() {
				li = w.Leases[contract.FormatLeaseID(op.Shard, op.Result.Lsn)]
				if li == nil || !li.Values {
					rep.Notes = append(rep.Notes, "reserve ok without a view of its values: left out of the linearizability check: "+op.String())
					continue
				}
			}
			byPart := map[partKey][]int{}
			var order []partKey
			for i, m := range op.Req.Members {
				k := objKey(op.Tenant, m)
				if _, ok := byPart[k]; !ok {
					order = append(order, k)
				}
				byPart[k] = append(byPart[k], i)
			}
			for _, k := range order {
				o := base
				o.lease, o.members = li, byPart[k]
				add(k, &o)
			}
			if li != nil {
				o := base
				o.lease = li
				add(partKey{kind: pkHolder, tenant: op.Tenant, id: li.Holder, shard: li.Shard}, &o)
			}
		case VActivate, VRenew, VRelease, VRevoke, VReclaim, VLeaseGet:
			li := w.Leases[op.Req.LeaseID]
			if li == nil || li.Tenant != op.Tenant || !li.Values {
				continue
			}
			to := changedTo(op)
			rounds := endsInRounds(h, li, to)
			for _, k := range leaseParts(li) {
				o := base
				o.lease = li
				add(k, &o)
				switch {
				case remote(h, k, li):
					o.remote = true
					if to != "" {
						// The answer waits for every shard to apply the change, unless it
						// took past the bound that wait has (or a failover may have
						// answered it from the retry memory): then the members follow
						// at some later moment.
						f := &linOp{lease: li, follow: to, call: op.Invoke, ret: op.Return}
						if len(op.Attempts) > 1 || op.Return-op.Invoke >= int64(followWait) {
							f.ret = farFuture
						}
						add(k, f)
					}
				case rounds && k.kind != pkHolder:
					// The home's own members of a lease across shards are freed in the
					// end's second round, after every part is marked ending: the lease
					// has ended (a revoke answers invalid_state) while they are still
					// held, and a least_recently_freed range queues them when they are
					// freed, behind values freed meanwhile. No answer bounds that round.
					o.remote = true
					add(k, &linOp{lease: li, follow: to, call: op.Invoke, ret: farFuture})
				}
			}
		case VList:
			r := op.Result
			byShard := map[uint32][]*messages.Lease{}
			lastShard := uint32(0)
			for _, l := range r.Leases {
				sh, _, _ := contract.ParseLeaseID(l.LeaseId)
				byShard[sh] = append(byShard[sh], l)
				lastShard = sh
			}
			for _, p := range r.AppliedLsns {
				complete := !r.Truncated || p.Shard < lastShard
				if r.Truncated && p.Shard > lastShard {
					continue // cut off by limit: no information
				}
				o := base
				o.part, o.complete = byShard[p.Shard], complete
				add(partKey{kind: pkHolder, tenant: op.Tenant, id: op.Req.HolderID, shard: p.Shard}, &o)
			}
		}
	}
	if unresolved > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d unresolved writes are left out of the linearizability check", unresolved))
	}
	// Expiries, in the window the log allows.
	win := expiryWindows(h)
	for _, e := range h.Events {
		if e.Ev.Event != "lease.expired" || e.Ev.Lease == nil || e.N < 0 {
			continue
		}
		li := w.Leases[e.Ev.Lease.LeaseId]
		if li == nil || li.Tenant != e.Ev.Tenant || !li.Values {
			continue
		}
		call, ret := win(e.Shard, e.LSN)
		rounds := endsInRounds(h, li, "expired")
		for _, k := range leaseParts(li) {
			o := &linOp{ev: e, lease: li, call: call, ret: ret}
			add(k, o)
			if remote(h, k, li) || (rounds && k.kind != pkHolder) {
				// A member of a bundle across shards is freed when the end's rounds
				// reach it (docs/api.md §2) — on the home too, in the second round: no
				// earlier than the expiry, at no moment the history bounds — and, seen
				// with a member on another shard (a pair partition: linpairs.go), at
				// the same moment as that one.
				o.remote = true
				add(k, &linOp{ev: e, lease: li, follow: "expired", call: call, ret: farFuture})
			}
		}
	}
	return parts
}

// followWait is less than the longest a lease verb's answer waits for the other shards
// of its lease (a tick before the request's bound): an answer that came sooner came after
// they applied the change.
const followWait = time.Second

// remote reports whether object partition k is on another shard than lease l's home.
func remote(h *History, k partKey, l *LeaseInfo) bool {
	return k.kind != pkHolder && objectShard(h, k) != l.Shard
}

// endsInRounds reports whether lease l, moved to state to, ends in two rounds: a lease
// with members on several shards that ends (released, revoked, expired) frees the home's
// own members too only once every part is marked ending (docs/api.md §2).
func endsInRounds(h *History, l *LeaseInfo, to string) bool {
	if to != "released" && to != "revoked" && to != "expired" {
		return false
	}
	for _, m := range l.Members {
		if remote(h, memberPart(l.Tenant, m), l) {
			return true
		}
	}
	return false
}

// changedTo is the state a lease verb's ok moved its lease to ("" when it moves none).
func changedTo(op *Op) string {
	if !op.OK() {
		return ""
	}
	return map[string]string{VActivate: "active", VRelease: "released", VRevoke: "revoking", VReclaim: "revoked"}[op.Verb]
}

// objectShard is the shard an object partition's object lives on.
func objectShard(h *History, k partKey) uint32 {
	return contract.ShardOf(k.tenant, contract.PlacementKey(k.id), max(h.Meta.Shards, 1))
}

// expiryWindows returns the real-time window in which the expire entry at (shard, lsn)
// was applied: after the invocation of every operation that made or saw a lower
// position (it was applied before the expiry), before the response of every operation
// that made a higher lsn or saw the expiry's.
func expiryWindows(h *History) func(uint32, uint64) (int64, int64) {
	type idx struct {
		pos    []uint64
		maxInv []int64 // prefix max of inv, by pos
		byPos  []position
	}
	all := positions(h)
	ix := map[uint32]*idx{}
	for s, ps := range all {
		sorted := append([]position(nil), ps...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i].pos < sorted[j].pos })
		x := &idx{byPos: sorted}
		var m int64
		for _, p := range sorted {
			x.pos = append(x.pos, p.pos)
			m = max(m, p.inv)
			x.maxInv = append(x.maxInv, m)
		}
		ix[s] = x
	}
	return func(shard uint32, lsn uint64) (int64, int64) {
		x := ix[shard]
		if x == nil {
			return 0, farFuture
		}
		call, ret := int64(0), farFuture
		i := sort.Search(len(x.pos), func(i int) bool { return x.pos[i] >= lsn })
		if i > 0 {
			call = x.maxInv[i-1]
		}
		for _, p := range x.byPos[i:] {
			if p.pos > lsn || !p.write {
				ret = min(ret, p.ret)
			}
		}
		if call > ret {
			call = ret // inconsistent with real time: the realtime checker reports it
		}
		return call, ret
	}
}

// LinOptions bounds the linearizability check.
type LinOptions struct {
	Timeout time.Duration // per partition; 0: 60s
}

func porcupineModel(k partKey) porcupine.Model {
	return porcupine.Model{
		Init: func() interface{} { return &mState{leases: map[string]lrec{}} },
		Step: func(st, in, _ interface{}) (bool, interface{}) {
			ok, n, _ := step(k, st.(*mState), in.(*linOp))
			return ok, n
		},
		Equal:             func(a, b interface{}) bool { return a.(*mState).equal(b.(*mState)) },
		Hash:              func(st interface{}) uint64 { return st.(*mState).hash() },
		DescribeOperation: func(in, _ interface{}) string { return in.(*linOp).String() },
		DescribeState:     func(st interface{}) string { return st.(*mState).describe(k.kind) },
	}
}

func toOps(ops []*linOp) []porcupine.Operation {
	return operations(ops, func(o *linOp) *linOp { return o })
}

// operations are porcupine's operations of a partition's inputs, each timed and owned as
// its view says.
func operations[T any](in []T, view func(T) *linOp) []porcupine.Operation {
	out := make([]porcupine.Operation, len(in))
	for i, x := range in {
		o, c := view(x), 0
		if o.op != nil {
			c = o.op.Client
		}
		out[i] = porcupine.Operation{ClientId: c, Input: x, Call: o.call, Return: o.ret}
	}
	return out
}

// checkLinear runs porcupine on every partition.
func checkLinear(w *World, rep *Report, opt LinOptions) {
	if opt.Timeout <= 0 {
		opt.Timeout = 60 * time.Second
	}
	parts := partitions(w, rep)
	keys := make([]partKey, 0, len(parts))
	for k := range parts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	pairs, unpaired := pairsOf(w, parts)
	pkeys := make([]pairKey, 0, len(pairs))
	for k := range pairs {
		pkeys = append(pkeys, k)
	}
	sort.Slice(pkeys, func(i, j int) bool { return pkeys[i].String() < pkeys[j].String() })
	rep.Stats.Partitions = len(keys) + len(pkeys)
	type result struct {
		res     porcupine.CheckResult
		excerpt []string
	}
	results := make([]result, len(keys)+len(pkeys))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	for i := range results {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if i < len(keys) {
				res, ex := checkPartition(keys[i], parts[keys[i]], opt.Timeout)
				results[i] = result{res, ex}
			} else {
				k := pkeys[i-len(keys)]
				results[i] = result{res: checkPair(k, pairs[k], opt)}
			}
		}()
	}
	wg.Wait()
	inconclusive := 0
	for i, r := range results {
		name, n := "", 0
		if i < len(keys) {
			name, n = keys[i].String(), len(parts[keys[i]])
		} else {
			k := pkeys[i-len(keys)]
			name, n = "the pair "+k.String(), len(pairs[k])
		}
		rep.count(CLinear, 1)
		switch r.res {
		case porcupine.Illegal:
			rep.add(CLinear, fmt.Sprintf("%s (%d operations) is not linearizable", name, n), r.excerpt...)
		case porcupine.Unknown:
			inconclusive++
			rep.Notes = append(rep.Notes, fmt.Sprintf("linearizability of %s (%d operations) inconclusive after %v", name, n, opt.Timeout))
		}
	}
	if unpaired > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d pairs of objects of bundles across keys past the first %d are left out of the pairwise check", unpaired, maxPairs))
	}
	if inconclusive > 0 {
		rep.Checked[CLinear+":inconclusive"] = inconclusive
	}
}

// checkPartition checks one partition; on failure it shrinks the history soundly (reads
// change nothing, so a history that stays illegal without some reads proves the
// original illegal) and renders the longest linearizable prefix, the state it leads to,
// and the operations none of which can come next.
func checkPartition(k partKey, ops []*linOp, timeout time.Duration) (porcupine.CheckResult, []string) {
	model := porcupineModel(k)
	res := porcupine.CheckOperationsTimeout(model, toOps(ops), timeout)
	if res != porcupine.Illegal {
		return res, nil
	}
	ops = shrinkReads(model, ops, 20*time.Second)
	return res, explain(k, model, ops, timeout)
}

func isRead(o *linOp) bool {
	if o.op == nil {
		return false
	}
	switch o.op.Verb {
	case VResourceGet, VPoolGet, VRangeGet, VLeaseGet, VList:
		return true
	}
	return false
}

// shrinkReads drops reads while the history stays illegal (a small ddmin over reads).
func shrinkReads(model porcupine.Model, ops []*linOp, budget time.Duration) []*linOp {
	deadline := time.Now().Add(budget)
	illegal := func(c []*linOp) bool {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		return porcupine.CheckOperationsTimeout(model, toOps(c), left) == porcupine.Illegal
	}
	without := func(cur []*linOp, drop map[*linOp]bool) []*linOp {
		var out []*linOp
		for _, o := range cur {
			if !drop[o] {
				out = append(out, o)
			}
		}
		return out
	}
	var reads []*linOp
	for _, o := range ops {
		if isRead(o) {
			reads = append(reads, o)
		}
	}
	cur := ops
	chunk := len(reads)
	for chunk >= 1 && time.Now().Before(deadline) {
		var kept []*linOp
		for i := 0; i < len(reads); i += chunk {
			end := min(i+chunk, len(reads))
			drop := map[*linOp]bool{}
			for _, o := range reads[i:end] {
				drop[o] = true
			}
			if c := without(cur, drop); illegal(c) {
				cur = c
			} else {
				kept = append(kept, reads[i:end]...)
			}
		}
		reads = kept
		chunk /= 2
	}
	return cur
}

// explain renders an illegal partition: the longest linearizable prefix found, the state
// after it, and why each operation that could come next cannot.
func explain(k partKey, model porcupine.Model, ops []*linOp, timeout time.Duration) []string {
	_, info := porcupine.CheckOperationsVerbose(model, toOps(ops), timeout)
	out := []string{fmt.Sprintf("partition %s, %d operations after dropping reads that do not matter", k, len(ops))}
	partials := info.PartialLinearizationsOperations()
	var best []porcupine.Operation
	if len(partials) > 0 {
		for _, p := range partials[0] {
			if len(p) > len(best) {
				best = p
			}
		}
	}
	st := model.Init().(*mState)
	done := map[*linOp]bool{}
	for _, p := range best {
		o := p.Input.(*linOp)
		_, n, _ := step(k, st, o)
		st = n
		done[o] = true
	}
	from := max(0, len(best)-6)
	if from > 0 {
		out = append(out, fmt.Sprintf("… %d operations linearized before these:", from))
	}
	for _, p := range best[from:] {
		out = append(out, "ok   "+p.Input.(*linOp).String())
	}
	out = append(out, "state: "+st.describe(k.kind))
	minRet := farFuture
	for _, o := range ops {
		if !done[o] {
			minRet = min(minRet, o.ret)
		}
	}
	shown := 0
	for _, o := range ops {
		if done[o] || o.call > minRet {
			continue
		}
		_, _, why := step(k, st, o)
		if shown < 8 {
			out = append(out, "FAIL "+o.String()+": "+why)
		}
		shown++
	}
	if shown > 8 {
		out = append(out, fmt.Sprintf("… and %d more operations that could come next", shown-8))
	}
	return out
}
