package actors

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/persistence"
)

// Bundles across shards, in one process: resources "s<k>/<name>" live on shard k.

func bundleOptions(dir string) Options {
	o := testOptions(dir)
	o.Shards = 3
	o.PrepareBound = 300 * time.Millisecond
	return o
}

func shardOfID(id string) uint32 { return uint32(id[1] - '0') }

// bundle is a reserve of the resources ids, each on its shard; its home is the first's.
func bundle(op, holder string, ids ...string) *kernel.Command {
	c := &kernel.Command{Verb: contract.VerbReserve, Tenant: "t", OperationID: op, HolderID: holder, TTLMillis: 600_000}
	for _, id := range ids {
		c.Members = append(c.Members, kernel.Member{Kind: kernel.MemberResource, ID: id})
		c.Shards = append(c.Shards, shardOfID(id))
	}
	return c
}

func createOn(t testing.TB, sys *System, ids ...string) {
	t.Helper()
	for _, id := range ids {
		wantCode(t, do(t, sys, shardOfID(id), createResource("create-"+id, id)), contract.CodeOK)
	}
}

// holderOf reads resource id: the lease holding it as (shard, lsn), zero when free.
func holderOf(t testing.TB, sys *System, id string) (kernel.Code, kernel.TxnRef) {
	r := read(t, sys, shardOfID(id), ReadRequest{Verb: contract.VerbGetResource, Tenant: "t", ID: id})
	return r.Code, kernel.TxnRef{Shard: r.Resource.LeaseShard, LSN: r.Resource.LeaseLSN}
}

// settled waits until the members of a bundle are all held by one lease, or all free,
// and returns that lease (zero: free).
func settled(t testing.TB, sys *System, ids ...string) kernel.TxnRef {
	t.Helper()
	var last []kernel.TxnRef
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		last = last[:0]
		ok := true
		for _, id := range ids {
			code, l := holderOf(t, sys, id)
			ok = ok && code == contract.CodeOK
			last = append(last, l)
		}
		same := ok
		for _, l := range last {
			same = same && l == last[0]
		}
		if same {
			return last[0]
		}
	}
	t.Fatalf("members of %v never held by one lease or all free: %v", ids, last)
	return kernel.TxnRef{}
}

func TestBundleGrantsEveryMemberOrNone(t *testing.T) {
	sys := startSystem(t, bundleOptions(t.TempDir()))
	defer sys.Stop()
	createOn(t, sys, "s0/x", "s1/y", "s2/z", "s0/w")

	r := do(t, sys, 0, bundle("b1", "h", "s0/x", "s1/y", "s2/z"))
	wantCode(t, r, contract.CodeOK)
	lease := kernel.TxnRef{Shard: r.Lease.Shard, LSN: r.Lease.LSN}
	// The lease id is its committing entry's position, as for any lease.
	if len(r.Lease.Members) != 3 || lease.Shard != 0 || r.LSN != lease.LSN {
		t.Fatalf("granted at %d: %+v", r.LSN, r.Lease)
	}
	if got := settled(t, sys, "s0/x", "s1/y", "s2/z"); got != lease {
		t.Fatalf("members held by %+v, want %+v", got, lease)
	}
	wantCode(t, do(t, sys, 1, reserve("plain", "o", "s1/y", 1000)), contract.CodeResourceBusy)
	busy := do(t, sys, 0, bundle("b2", "o", "s0/w", "s1/y"))
	if busy.Code != contract.CodeResourceBusy || busy.MemberIndex != 1 {
		t.Fatalf("a bundle over a held member: %s member %d", busy.Code, busy.MemberIndex)
	}
	if _, l := holderOf(t, sys, "s0/w"); l.LSN != 0 {
		t.Fatalf("a refused bundle's free member is held by %+v", l)
	}
	again := do(t, sys, 0, bundle("b2", "o", "s0/w", "s1/y"))
	if again.Code != contract.CodeResourceBusy || !again.FromRetryCache || again.MemberIndex != 1 {
		t.Fatalf("the refusal's retry: %s cache %v", again.Code, again.FromRetryCache)
	}
	retry := do(t, sys, 0, bundle("b1", "h", "s0/x", "s1/y", "s2/z"))
	if !retry.FromRetryCache || retry.Lease.LSN != lease.LSN || retry.LSN != r.LSN || len(retry.Lease.Members) != 3 {
		t.Fatalf("retry: %+v", retry)
	}
	got := read(t, sys, 0, ReadRequest{Verb: contract.VerbGetLease, Tenant: "t", Lease: lease.LSN})
	if got.Code != contract.CodeOK || len(got.Lease.Members) != 3 {
		t.Fatalf("lease.get at the home: %s %+v", got.Code, got.Lease)
	}
	wantCode(t, do(t, sys, 0, release("rel", "h", lease.LSN, 1)), contract.CodeOK)
	if got := settled(t, sys, "s0/x", "s1/y", "s2/z"); got.LSN != 0 {
		t.Fatalf("after release, held by %+v", got)
	}
}

// Two bundles over the same members in opposite orders, at once, many times: exactly one
// is granted and the other refused by the member the winner holds — never both refused
// by each other's undecided intents, never a member left held by a bundle not granted.
func TestBundlesInOppositeOrders(t *testing.T) {
	sys := startSystem(t, bundleOptions(t.TempDir()))
	defer sys.Stop()
	for i := 0; i < 20; i++ {
		a, b := fmt.Sprintf("s0/a%d", i), fmt.Sprintf("s1/b%d", i)
		createOn(t, sys, a, b)
		var wg sync.WaitGroup
		replies := make([]*Reply, 2)
		for j, ids := range [][]string{{a, b}, {b, a}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				replies[j] = do(t, sys, shardOfID(ids[0]), bundle(fmt.Sprintf("o%d-%d", i, j), fmt.Sprintf("h%d", j), ids...))
			}()
		}
		wg.Wait()
		won := -1
		for j, r := range replies {
			switch r.Code {
			case contract.CodeOK:
				if won >= 0 {
					t.Fatalf("round %d: both granted", i)
				}
				won = j
			case contract.CodeResourceBusy:
			default:
				t.Fatalf("round %d: bundle %d answered %s (%s)", i, j, r.Code, r.Message)
			}
		}
		if won < 0 {
			t.Fatalf("round %d: both refused", i)
		}
		w := replies[won].Lease
		if got := settled(t, sys, a, b); got != (kernel.TxnRef{Shard: w.Shard, LSN: w.LSN}) {
			t.Fatalf("round %d: members held by %+v, the winner is %d-%d", i, got, w.Shard, w.LSN)
		}
	}
}

// The crash test of bundles: a child process runs one bundle over three shards and is
// killed exactly at a step of the protocol (Options.BundleStep). After a restart from
// the journals alone the bundle is wholly granted or wholly absent within the bound, and
// its retry with the same operation_id ends granted once: the same lease when the
// commit was durable.

const (
	bundleCrashDir  = "HOLDFAST_BUNDLE_CRASH_DIR"
	bundleCrashStep = "HOLDFAST_BUNDLE_CRASH_STEP"
)

var bundleCrashIDs = []string{"s0/x", "s1/y", "s2/z"}

func TestBundleCrashChild(t *testing.T) {
	dir := os.Getenv(bundleCrashDir)
	if dir == "" {
		t.Skip("runs only as the bundle crash test's child process")
	}
	o := bundleOptions(dir)
	step := os.Getenv(bundleCrashStep)
	o.BundleStep = killOnStep(step)
	sys := startSystem(t, o)
	createOn(t, sys, bundleCrashIDs...)
	r := do(t, sys, 0, bundle("crash", "h", bundleCrashIDs...))
	if step == StepEnding || step == StepFreeing {
		do(t, sys, 0, release("end", "h", r.Lease.LSN, 1))
	}
	if step == StepCommitted || step == StepMirrored || step == StepEnding || step == StepFreeing {
		time.Sleep(5 * time.Second) // the commit (committing in parallel) and the mirror come after the answer
	}
	t.Fatalf("never reached step %s", step)
}

func TestBundleCrashAtEveryStep(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	for _, step := range BundleSteps {
		t.Run(step, func(t *testing.T) {
			dir := killedAt(t, "TestBundleCrashChild", step)
			sys := startSystem(t, bundleOptions(dir))
			defer sys.Stop()
			if durable[step] { // retried at once: may wait on the restarted home's decision
				r := do(t, sys, 0, bundle("crash", "h", bundleCrashIDs...))
				if r.Code != contract.CodeOK || r.LSN != r.Lease.LSN {
					t.Fatalf("killed at %s: the retry at restart got %s lsn %d for lease %d, want ok with its id", step, r.Code, r.LSN, r.Lease.LSN)
				}
			}
			before := settled(t, sys, bundleCrashIDs...)
			if step == StepEnding || step == StepFreeing { // released at the home before the kill: freed everywhere
				if before.LSN != 0 {
					t.Fatalf("killed as the release was told: members still held by %+v", before)
				}
				return
			}
			// From voted on, the bundle is committed (it commits in parallel: every prepare
			// and its begin are durable, and a restarted home prepares it again); killed at
			// prepared, it is when the home's begin was durable by then, else absent.
			committed := durable[step]
			if step == StepPrepared {
				committed = before.LSN != 0
			}
			if committed != (before.LSN != 0) {
				t.Fatalf("killed at %s: after recovery the members are held by %+v", step, before)
			}
			r := do(t, sys, 0, bundle("crash", "h", bundleCrashIDs...))
			wantCode(t, r, contract.CodeOK)
			if committed && (!r.FromRetryCache || r.Lease.LSN != before.LSN) {
				t.Fatalf("killed at %s: the retry of a durable commit got %+v", step, r)
			}
			if got := settled(t, sys, bundleCrashIDs...); got.LSN != r.Lease.LSN {
				t.Fatalf("killed at %s: after the retry the members are held by %+v, want %d", step, got, r.Lease.LSN)
			}
			again := do(t, sys, 0, bundle("crash", "h", bundleCrashIDs...))
			if !again.FromRetryCache || again.Lease.LSN != r.Lease.LSN {
				t.Fatalf("killed at %s: executed twice: %+v then %+v", step, r, again)
			}
		})
	}
}

// durable are the steps a bundle across shards is committed at, whatever happens next
// (it commits in parallel: its begin and every prepare are durable).
var durable = map[string]bool{StepVoted: true, StepAnswered: true, StepCommitted: true, StepMirrored: true}

// killedAt runs the child test child in a process of its own until it is killed at step
// (Options.BundleStep), with env added, and returns the data directory it left.
func killedAt(t *testing.T, child, step string, env ...string) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^"+child+"$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), bundleCrashDir+"="+dir, bundleCrashStep+"="+step), env...)
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "KILLED AT "+step) {
		t.Fatalf("the child did not stop at %s:\n%s", step, out)
	}
	return dir
}

// killOnStep is the child's hook: the process ends at once at the step its parent named.
func killOnStep(step string) func(string, uint32) {
	return func(s string, _ uint32) {
		if s == step {
			fmt.Println("KILLED AT", s)
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
}

// Every lease verb acts at the home and the participants follow: activate, revoke and
// reclaim move every member; expiry frees them all, never before the deadline; consume
// uses up the pool units on every shard.
func TestBundleLeaseVerbsMoveEveryMember(t *testing.T) {
	sys := startSystem(t, bundleOptions(t.TempDir()))
	defer sys.Stop()
	createOn(t, sys, "s0/x", "s1/y", "s0/e", "s1/f")
	state := func(id string) kernel.ResourceState {
		r := read(t, sys, shardOfID(id), ReadRequest{Verb: contract.VerbGetResource, Tenant: "t", ID: id})
		return r.Resource.State
	}
	until := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("never: %s", what)
			}
		}
	}
	r := do(t, sys, 0, bundle("b", "h", "s0/x", "s1/y"))
	wantCode(t, r, contract.CodeOK)
	lsn := r.Lease.LSN
	// Each answer comes once every shard applied the change: a read after it sees it.
	now := func(what string, want kernel.ResourceState) {
		t.Helper()
		if got := state("s1/y"); got != want {
			t.Fatalf("after the answer to %s, the participant's member is %s", what, got)
		}
	}
	wantCode(t, do(t, sys, 0, &kernel.Command{Verb: contract.VerbActivate, Tenant: "t", OperationID: "act", HolderID: "h", LeaseLSN: lsn, Epoch: 1}), contract.CodeOK)
	now("activate", kernel.ResourceActive)
	wantCode(t, do(t, sys, 0, &kernel.Command{Verb: contract.VerbRevoke, Tenant: "t", OperationID: "rev", LeaseLSN: lsn}), contract.CodeOK)
	now("revoke", kernel.ResourceRevoking)
	wantCode(t, do(t, sys, 0, &kernel.Command{Verb: contract.VerbReclaim, Tenant: "t", OperationID: "rec", LeaseLSN: lsn}), contract.CodeOK)
	now("reclaim", kernel.ResourceAvailable)
	if state("s0/x") != kernel.ResourceAvailable {
		t.Fatal("x still held after reclaim")
	}

	// Expiry: a short ttl; the participant's member is freed after the home's deadline.
	e := bundle("short", "h", "s0/e", "s1/f")
	e.TTLMillis = 300
	r = do(t, sys, 0, e)
	wantCode(t, r, contract.CodeOK)
	until("f expired", func() bool { return state("s1/f") == kernel.ResourceAvailable })
	if deadline := time.UnixMilli(int64(r.Lease.DeadlineSlot) * 10); time.Now().Before(deadline) {
		t.Fatalf("a participant's member freed before the lease's deadline %v", deadline)
	}
	got := read(t, sys, 0, ReadRequest{Verb: contract.VerbGetLease, Tenant: "t", Lease: r.Lease.LSN})
	if got.Lease.State != kernel.LeaseExpired || len(got.Lease.Members) != 2 {
		t.Fatalf("expired lease: %s %d members", got.Lease.State, len(got.Lease.Members))
	}
}

// A hotspot of overlapping bundles across shards: sixteen clients reserve random sets of
// four of eight resources on four shards, release what they get, and stop after three
// grants. Every answer is a grant or resource_busy by a granted lease (nothing times out
// waiting for undecided bundles), every client gets its grants (none starves while the
// others go on), and at the end every member is free: nothing is left held by a bundle
// that was not granted.
func TestBundleHotspotMakesProgress(t *testing.T) {
	o := bundleOptions(t.TempDir())
	o.Shards = 4
	o.PrepareBound = 2 * time.Second
	sys := startSystem(t, o)
	defer sys.Stop()
	ids := []string{"s0/a", "s1/b", "s2/c", "s3/d", "s0/e", "s1/f", "s2/g", "s3/h"}
	createOn(t, sys, ids...)
	grants := make([]int, 16)
	var wg sync.WaitGroup
	deadline := time.Now().Add(time.Minute) // a bound for a starved client, not a measure
	for g := range grants {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 34))
			for i := 0; grants[g] < 3 && time.Now().Before(deadline); i++ {
				var pick []string
				for _, p := range rng.Perm(len(ids))[:4] {
					pick = append(pick, ids[p])
				}
				r := do(t, sys, shardOfID(pick[0]), bundle(fmt.Sprintf("g%d-%d", g, i), fmt.Sprintf("h%d", g), pick...))
				switch r.Code {
				case contract.CodeOK:
					grants[g]++
					wantCode(t, do(t, sys, shardOfID(pick[0]), release(fmt.Sprintf("g%d-%d-r", g, i), fmt.Sprintf("h%d", g), r.Lease.LSN, 1)), contract.CodeOK)
				case contract.CodeResourceBusy:
				default:
					t.Errorf("client %d: %s (%s)", g, r.Code, r.Message)
					return
				}
			}
		}()
	}
	wg.Wait()
	for g, n := range grants {
		if n == 0 {
			t.Errorf("client %d was never granted (grants %v)", g, grants)
		}
	}
	if got := settled(t, sys, ids...); got.LSN != 0 {
		t.Fatalf("after every release, held by %+v", got)
	}
}

// A write whose answer shows an object an undecided bundle holds (resource.create's
// already_exists) answers once the bundle is decided, with the object as decided: never
// the intent of a bundle that might not be granted.
func TestBundleWriteAnswerWaitsForTheDecision(t *testing.T) {
	o := bundleOptions(t.TempDir())
	voted := make(chan struct{})
	o.BundleStep = func(step string, _ uint32) {
		if step == StepVoted {
			close(voted)
			time.Sleep(200 * time.Millisecond) // the home decides late
		}
	}
	sys := startSystem(t, o)
	defer sys.Stop()
	createOn(t, sys, "s0/x", "s1/y")
	granted := make(chan *Reply, 1)
	go func() { granted <- do(t, sys, 0, bundle("b", "h", "s0/x", "s1/y")) }()
	<-voted // the participant holds y as an intent now
	r := do(t, sys, 1, createResource("again", "s1/y"))
	g := <-granted
	wantCode(t, g, contract.CodeOK)
	if r.Code != contract.CodeAlreadyExists || r.Resource.LeaseLSN != g.Lease.LSN || r.Resource.State != kernel.ResourceReserved {
		t.Fatalf("create's answer shows %s held by %d-%d; the bundle was granted as %d", r.Resource.State,
			r.Resource.LeaseShard, r.Resource.LeaseLSN, g.Lease.LSN)
	}
}

// A bundle refused on several shards names its first refused member in request order, as
// one shard checking members one by one would — not the home's own just because it knows
// it first — and remembers that answer for its retries.
func TestBundleRefusalNamesTheFirstMember(t *testing.T) {
	sys := startSystem(t, bundleOptions(t.TempDir()))
	defer sys.Stop()
	createOn(t, sys, "s0/a", "s1/b", "s0/c")
	wantCode(t, do(t, sys, 1, reserve("hold-b", "o", "s1/b", 60_000)), contract.CodeOK)
	wantCode(t, do(t, sys, 0, reserve("hold-c", "o", "s0/c", 60_000)), contract.CodeOK)
	for _, op := range []string{"b1", "b1"} {
		r := do(t, sys, 0, bundle(op, "h", "s0/a", "s1/b", "s0/c"))
		if r.Code != contract.CodeResourceBusy || r.MemberIndex != 1 {
			t.Fatalf("refused by member %d (%s), want member 1 (retry %v)", r.MemberIndex, r.Code, r.FromRetryCache)
		}
	}
	if _, l := holderOf(t, sys, "s0/a"); l.LSN != 0 {
		t.Fatalf("the refused bundle's free member is held by %+v", l)
	}
}

// A retry of a bundle sent while its first attempt is still in flight (sequenced, not yet
// applied) joins it: the same lease for both, never operation_conflict — each attempt was
// once stamped with an age of its own, so the two commands differed.
func TestBundleRetryInFlightJoins(t *testing.T) {
	sys := startSystem(t, bundleOptions(t.TempDir()))
	defer sys.Stop()
	for i := 0; i < 20; i++ {
		ids := []string{fmt.Sprintf("s0/a%d", i), fmt.Sprintf("s1/b%d", i)}
		createOn(t, sys, ids...)
		answers := make(chan *Reply, 2)
		op := fmt.Sprintf("op%d", i)
		for range 2 {
			sys.Write(0, bundle(op, "h", ids...), func(r *Reply) { answers <- r })
		}
		a, b := <-answers, <-answers
		if a.Code != contract.CodeOK || b.Code != contract.CodeOK || a.Lease.LSN != b.Lease.LSN {
			t.Fatalf("%s: first %s lease %d, its retry %s lease %d", op, a.Code, a.Lease.LSN, b.Code, b.Lease.LSN)
		}
	}
}

// A home's begin that never became durable — the prepares leave before its journal write
// ends, and the home fails in between — is forgotten with the home's crash, and a
// participant that prepared it learns so from the restarted home even when nothing more
// is written there (its intents are freed); and when the home writes the next begin at
// the same position, that is another transaction, which the participant tells apart:
// the new bundle holds its own member there, the forgotten one's is freed.
func TestBundleWhoseBeginWasLost(t *testing.T) {
	dir := t.TempDir()
	var armed sync.Mutex
	failHome := false
	o := bundleOptions(dir)
	o.Shards = 2
	o.Storage = func(k uint32) (Storage, error) {
		fs := FileStorage{Dir: ShardDir(dir, k)}
		if k == 0 {
			fs.Journal.Faults = &persistence.Faults{FailWrite: func() error {
				armed.Lock()
				defer armed.Unlock()
				if failHome {
					return errors.New("the home's disk is gone")
				}
				return nil
			}}
		}
		return fs, os.MkdirAll(fs.Dir, 0o755)
	}
	sys := startSystem(t, o)
	createOn(t, sys, "s0/x", "s0/w", "s1/y", "s1/z")
	armed.Lock()
	failHome = true
	armed.Unlock()
	if r := do(t, sys, 0, bundle("lost", "h", "s0/x", "s1/y")); r.Code == contract.CodeOK {
		t.Fatalf("the home's begin failed, the bundle answered %s", r.Code)
	}
	time.Sleep(200 * time.Millisecond)  // the participant prepares (its own journal is fine)
	lost := sys.Stats(0).AppliedLSN + 2 // where the begin was sequenced, after its skip (its lease's id)
	sys.Stop()
	armed.Lock()
	failHome = false
	armed.Unlock()

	restart := func(t *testing.T) *System { // a copy of the journals each: two restarts of the same
		cp := t.TempDir()
		copyDir(t, dir, cp)
		o := bundleOptions(cp)
		o.Shards = 2
		sys := startSystem(t, o)
		t.Cleanup(sys.Stop)
		return sys
	}
	t.Run("home idle", func(t *testing.T) {
		sys := restart(t)
		if got := settled(t, sys, "s1/y"); got.LSN != 0 {
			t.Fatalf("the lost bundle's member is held by %+v", got)
		}
	})
	t.Run("home reuses the position", func(t *testing.T) {
		sys := restart(t)
		r := do(t, sys, 0, bundle("next", "h", "s0/w", "s1/z"))
		wantCode(t, r, contract.CodeOK)
		if r.Lease.LSN+1 != lost { // committing in parallel: its lease is the skip's position before its begin
			t.Fatalf("the new bundle committed as lease %d, not begun at the lost begin's position %d", r.Lease.LSN, lost)
		}
		if got := settled(t, sys, "s0/w", "s1/z"); got.LSN != r.Lease.LSN {
			t.Fatalf("the new bundle's members are held by %+v, want lease %d", got, r.Lease.LSN)
		}
		if got := settled(t, sys, "s1/y"); got.LSN != 0 {
			t.Fatalf("the lost bundle's member is held by %+v", got)
		}
	})
}

// copyDir copies a data directory (a restart of the same journals, twice).
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
