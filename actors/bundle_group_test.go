package actors

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
)

// importOf is a lease.import of one lease per list of resource ids (each on its shard),
// its home the first lease's first member's shard.
func importOf(op string, leases ...[]string) *kernel.Command {
	c := &kernel.Command{Verb: contract.VerbImport, Tenant: "t", OperationID: op}
	for i, ids := range leases {
		im := kernel.ImportLease{HolderID: fmt.Sprintf("h%d", i), TTLMillis: 600_000}
		for _, id := range ids {
			im.Members = append(im.Members, kernel.Member{Kind: kernel.MemberResource, ID: id})
			c.Shards = append(c.Shards, shardOfID(id))
		}
		c.Imports = append(c.Imports, im)
	}
	return c
}

// An import across shards grants every lease or none: each lease its own id, its members
// held by it on every shard; a retry shows the same leases; a lease refused anywhere
// leaves every other lease of the import ungranted; and each lease ends alone.
func TestImportAcrossShardsGrantsEveryLeaseOrNone(t *testing.T) {
	sys := startSystem(t, bundleOptions(t.TempDir()))
	defer sys.Stop()
	createOn(t, sys, "s0/x", "s1/y", "s2/z", "s0/w", "s1/v", "s2/u")
	leases := [][]string{{"s0/x", "s1/y"}, {"s2/z"}, {"s0/w"}}
	r := do(t, sys, 0, importOf("imp", leases...))
	wantCode(t, r, contract.CodeOK)
	if len(r.Changes) != 3 {
		t.Fatalf("an import of 3 leases answered %d", len(r.Changes))
	}
	for i, ids := range leases {
		l := r.Changes[i].Lease
		if l.Shard != 0 || len(l.Members) != len(ids) || l.HolderID != fmt.Sprintf("h%d", i) {
			t.Fatalf("lease %d: %+v", i, l)
		}
		if got := settled(t, sys, ids...); got != (kernel.TxnRef{Shard: 0, LSN: l.LSN}) {
			t.Fatalf("lease %d's members held by %+v, want 0-%d", i, got, l.LSN)
		}
		g := read(t, sys, 0, ReadRequest{Verb: contract.VerbGetLease, Tenant: "t", Lease: l.LSN})
		if g.Code != contract.CodeOK || len(g.Lease.Members) != len(ids) {
			t.Fatalf("lease.get of lease %d: %s %+v", i, g.Code, g.Lease)
		}
	}
	retry := do(t, sys, 0, importOf("imp", leases...))
	if !retry.FromRetryCache || len(retry.Changes) != 3 || retry.Changes[0].Lease.LSN != r.Changes[0].Lease.LSN ||
		retry.Changes[2].Lease.LSN != r.Changes[2].Lease.LSN {
		t.Fatalf("retry: %+v", retry)
	}

	// A lease of the second import meets a held member: none of its leases is granted.
	busy := do(t, sys, 1, importOf("imp2", []string{"s1/v", "s2/u"}, []string{"s2/z"}))
	if busy.Code != contract.CodeResourceBusy || busy.ItemIndex != 1 || busy.MemberIndex != 0 {
		t.Fatalf("an import over a held member: %s lease %d member %d", busy.Code, busy.ItemIndex, busy.MemberIndex)
	}
	if got := settled(t, sys, "s1/v", "s2/u"); got.LSN != 0 {
		t.Fatalf("a refused import's free lease is held by %+v", got)
	}

	// Each lease ends alone.
	wantCode(t, do(t, sys, 0, release("rel", "h0", r.Changes[0].Lease.LSN, 1)), contract.CodeOK)
	if got := settled(t, sys, leases[0]...); got.LSN != 0 {
		t.Fatalf("lease 0 released, its members held by %+v", got)
	}
	if got := settled(t, sys, "s2/z"); got.LSN != r.Changes[1].Lease.LSN {
		t.Fatalf("lease 1 after lease 0's end: held by %+v", got)
	}
	wantCode(t, do(t, sys, 0, release("rel1", "h1", r.Changes[1].Lease.LSN, 1)), contract.CodeOK)
	if got := settled(t, sys, "s2/z"); got.LSN != 0 {
		t.Fatalf("lease 1 released, its member held by %+v", got)
	}
}

// The import the crash test kills: two leases, each over the home and another shard.
var importCrashLeases = [][]string{{"s0/x", "s1/y"}, {"s2/z", "s1/v", "s0/w"}}

const importCrashMode = "HOLDFAST_IMPORT_CRASH"

func TestImportCrashChild(t *testing.T) {
	dir := os.Getenv(bundleCrashDir)
	if dir == "" || os.Getenv(importCrashMode) == "" {
		t.Skip("runs only as the import crash test's child process")
	}
	o := bundleOptions(dir)
	step := os.Getenv(bundleCrashStep)
	o.BundleStep = killOnStep(step)
	sys := startSystem(t, o)
	for _, ids := range importCrashLeases {
		createOn(t, sys, ids...)
	}
	r := do(t, sys, 0, importOf("crash", importCrashLeases...))
	if step == StepEnding || step == StepFreeing {
		do(t, sys, 0, release("end", "h0", r.Changes[0].Lease.LSN, 1))
	}
	time.Sleep(5 * time.Second) // the commit (in parallel) and the mirrors come after the answer
	t.Fatalf("never reached step %s", step)
}

// kill -9 at every step of an import across shards: after recovery from the journals
// both leases are granted or neither, each whole; the retry with the same operation_id
// runs once and, after a durable commit, gets the same leases.
func TestImportCrashAtEveryStep(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	for _, step := range BundleSteps {
		t.Run(step, func(t *testing.T) {
			dir := killedAt(t, "TestImportCrashChild", step, importCrashMode+"=1")
			sys := startSystem(t, bundleOptions(dir))
			defer sys.Stop()
			if durable[step] { // retried at once: may wait on the restarted home's decision
				r := do(t, sys, 0, importOf("crash", importCrashLeases...))
				if r.Code != contract.CodeOK || len(r.Changes) != 2 || r.LSN != r.Changes[1].Lease.LSN {
					t.Fatalf("killed at %s: the retry at restart got %s lsn %d for %d leases, want ok with the last one's id", step, r.Code, r.LSN, len(r.Changes))
				}
			}
			first, second := settled(t, sys, importCrashLeases[0]...), settled(t, sys, importCrashLeases[1]...)
			if step == StepEnding || step == StepFreeing { // lease 0 released before the kill: freed everywhere
				if first.LSN != 0 || second.LSN == 0 {
					t.Fatalf("killed as lease 0's release was told: lease 0 held by %+v, lease 1 by %+v", first, second)
				}
				return
			}
			if (first.LSN == 0) != (second.LSN == 0) {
				t.Fatalf("killed at %s: one lease granted, not the other: %+v, %+v", step, first, second)
			}
			committed := durable[step]
			if step == StepPrepared {
				committed = first.LSN != 0
			}
			if committed != (first.LSN != 0) {
				t.Fatalf("killed at %s: after recovery the leases are held by %+v, %+v", step, first, second)
			}
			r := do(t, sys, 0, importOf("crash", importCrashLeases...))
			wantCode(t, r, contract.CodeOK)
			if committed && (!r.FromRetryCache || r.Changes[0].Lease.LSN != first.LSN || r.Changes[1].Lease.LSN != second.LSN) {
				t.Fatalf("killed at %s: the retry of a durable commit got %+v", step, r)
			}
			for i, ids := range importCrashLeases {
				if got := settled(t, sys, ids...); got.LSN != r.Changes[i].Lease.LSN {
					t.Fatalf("killed at %s: after the retry lease %d's members are held by %+v, want %d", step, i, got, r.Changes[i].Lease.LSN)
				}
			}
			again := do(t, sys, 0, importOf("crash", importCrashLeases...))
			if !again.FromRetryCache || again.Changes[0].Lease.LSN != r.Changes[0].Lease.LSN {
				t.Fatalf("killed at %s: executed twice: %+v then %+v", step, r, again)
			}
		})
	}
}

// Two imports over the same members from different homes, at once, many times, and a
// bundle racing them: exactly one of the three is granted and the others refused by what
// the winner holds — never all refused by each other's undecided intents, never a member
// left held by an import not granted.
func TestImportsInOppositeOrders(t *testing.T) {
	sys := startSystem(t, bundleOptions(t.TempDir()))
	defer sys.Stop()
	for i := 0; i < 20; i++ {
		a, b, c := fmt.Sprintf("s0/a%d", i), fmt.Sprintf("s1/b%d", i), fmt.Sprintf("s2/c%d", i)
		createOn(t, sys, a, b, c)
		cmds := []*kernel.Command{
			importOf(fmt.Sprintf("i%d-0", i), []string{a}, []string{b, c}),
			importOf(fmt.Sprintf("i%d-1", i), []string{c, b}, []string{a}),
			bundle(fmt.Sprintf("i%d-2", i), "h", b, a, c),
		}
		var wg sync.WaitGroup
		replies := make([]*Reply, len(cmds))
		for j, c := range cmds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				home := c.Shards[0]
				replies[j] = do(t, sys, home, c)
			}()
		}
		wg.Wait()
		won := -1
		for j, r := range replies {
			switch r.Code {
			case contract.CodeOK:
				if won >= 0 {
					t.Fatalf("round %d: %d and %d granted", i, won, j)
				}
				won = j
			case contract.CodeResourceBusy:
			default:
				t.Fatalf("round %d: %d answered %s (%s)", i, j, r.Code, r.Message)
			}
		}
		if won < 0 {
			t.Fatalf("round %d: every one refused", i)
		}
		for _, id := range []string{a, b, c} {
			if _, l := holderOf(t, sys, id); l.LSN == 0 {
				t.Fatalf("round %d: %s free after %d was granted", i, id, won)
			}
		}
	}
}

// Two leases of an import over one participant's pool are checked together: refused at
// once when they do not both fit (never a timeout), granted when they do; a lease with no
// member at its home expires at its deadline and its member is freed.
func TestImportAcrossShardsPoolsAndExpiry(t *testing.T) {
	sys := startSystem(t, bundleOptions(t.TempDir()))
	defer sys.Stop()
	createOn(t, sys, "s0/x", "s0/w")
	wantCode(t, do(t, sys, 1, &kernel.Command{Verb: contract.VerbCreatePool, Tenant: "t", OperationID: "pool", ObjectID: "s1/gpu", Capacity: 8}),
		contract.CodeOK)
	pool := func(q uint64) kernel.Member { return kernel.Member{Kind: kernel.MemberPool, ID: "s1/gpu", Quantity: q} }
	imp := func(op string, q uint64, ttl uint64) *kernel.Command {
		c := importOf(op, []string{"s0/x"}, nil)
		c.Imports[0].Members = append(c.Imports[0].Members, pool(q))
		c.Imports[1].Members = []kernel.Member{pool(q)}
		c.Imports[1].TTLMillis = ttl
		c.Shards = []uint32{0, 1, 1}
		return c
	}
	start := time.Now()
	r := do(t, sys, 0, imp("too-much", 5, 600_000))
	if r.Code != contract.CodeInsufficientCapacity || r.ItemIndex != 1 || r.MemberIndex != 0 || time.Since(start) > time.Second {
		t.Fatalf("10 units of 8: %s lease %d member %d after %v", r.Code, r.ItemIndex, r.MemberIndex, time.Since(start))
	}
	if _, l := holderOf(t, sys, "s0/x"); l.LSN != 0 {
		t.Fatalf("a refused import's member is held by %+v", l)
	}
	r = do(t, sys, 0, imp("fits", 4, 300))
	wantCode(t, r, contract.CodeOK)
	p := read(t, sys, 1, ReadRequest{Verb: contract.VerbGetPool, Tenant: "t", ID: "s1/gpu"})
	if p.Pool.Reserved != 8 {
		t.Fatalf("pool after the import: %+v", p.Pool)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		p = read(t, sys, 1, ReadRequest{Verb: contract.VerbGetPool, Tenant: "t", ID: "s1/gpu"})
		if p.Pool.Reserved == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease 1 never expired: %+v", p.Pool)
		}
	}
	g := read(t, sys, 0, ReadRequest{Verb: contract.VerbGetLease, Tenant: "t", Lease: r.Changes[1].Lease.LSN})
	if g.Code != contract.CodeOK || g.Lease.State != kernel.LeaseExpired {
		t.Fatalf("lease 1 after its deadline: %s %s", g.Code, g.Lease.State)
	}
	if _, l := holderOf(t, sys, "s0/x"); l.LSN != r.Changes[0].Lease.LSN {
		t.Fatalf("lease 0's member after lease 1 expired: %+v", l)
	}
}

// Imports and bundles over random members of three shards, from eight clients at once,
// with releases among them: every answer is all or nothing — each member reads held by
// the one granted lease that names it, by no lease never granted, and free once its lease
// is released.
func TestImportsAndBundlesAtRandom(t *testing.T) {
	sys := startSystem(t, bundleOptions(t.TempDir()))
	defer sys.Stop()
	var ids []string
	for s := range 3 {
		for i := range 8 {
			ids = append(ids, fmt.Sprintf("s%d/r%d", s, i))
		}
	}
	createOn(t, sys, ids...)
	type grant struct {
		lease   kernel.TxnRef // (home shard, id)
		members []string
	}
	var mu sync.Mutex
	var live []grant
	released := 0
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 1))
			pick := func(taken map[string]bool) []string { return pickMembers(rng, ids, taken) }
			for i := range 30 {
				op := fmt.Sprintf("c%d-%d", c, i)
				taken := map[string]bool{}
				if rng.IntN(2) == 0 {
					leases := [][]string{pick(taken), pick(taken)}
					home := shardOfID(leases[0][0])
					r := do(t, sys, home, importOf(op, leases...))
					switch r.Code {
					case contract.CodeOK:
						first := 0
						if rng.IntN(2) == 0 { // lease 0 ends alone; lease 1 keeps its members
							wantCode(t, do(t, sys, home, release(op+"-rel", "h0", r.Changes[0].Lease.LSN, 1)), contract.CodeOK)
							first = 1
						}
						mu.Lock()
						released += first
						for j, ch := range r.Changes[first:] {
							live = append(live, grant{kernel.TxnRef{Shard: home, LSN: ch.Lease.LSN}, leases[first+j]})
						}
						mu.Unlock()
					case contract.CodeResourceBusy:
					default:
						t.Errorf("import %s: %s (%s)", op, r.Code, r.Message)
					}
					continue
				}
				ms := pick(taken)
				home := shardOfID(ms[0])
				r := do(t, sys, home, bundle(op, "hb", ms...))
				switch {
				case r.Code == contract.CodeResourceBusy:
				case r.Code != contract.CodeOK:
					t.Errorf("bundle %s: %s (%s)", op, r.Code, r.Message)
				case rng.IntN(2) == 0:
					wantCode(t, do(t, sys, home, release(op+"-rel", "hb", r.Lease.LSN, 1)), contract.CodeOK)
					mu.Lock()
					released++
					mu.Unlock()
				default:
					mu.Lock()
					live = append(live, grant{kernel.TxnRef{Shard: home, LSN: r.Lease.LSN}, ms})
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	holder := map[string]kernel.TxnRef{}
	for _, g := range live {
		for _, id := range g.members {
			if other, twice := holder[id]; twice {
				t.Fatalf("%s granted to leases %+v and %+v", id, other, g.lease)
			}
			holder[id] = g.lease
		}
	}
	for _, id := range ids {
		if got := settled(t, sys, id); got != holder[id] {
			t.Fatalf("%s held by %+v, want %+v (%d leases granted and kept, %d released)", id, got, holder[id], len(live), released)
		}
	}
	if len(live) == 0 {
		t.Fatal("nothing was granted")
	}
	t.Logf("%d leases granted and kept, %d released", len(live), released)
}
