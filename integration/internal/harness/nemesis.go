//go:build unix

package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/integration/internal/history"
)

// Fault kinds.
const (
	FaultKill    = "kill"    // kill -9, restart on the same data directory
	FaultPause   = "pause"   // SIGSTOP for longer than the TTLs, then SIGCONT
	FaultClock   = "clock"   // the server's clock jumps backwards or forwards, then back
	FaultJournal = "journal" // journal writes or fsyncs fail; the operator removes the fault and restarts
	FaultConns   = "conns"   // client connections closed with requests in flight
	FaultTerm    = "term"    // SIGTERM under load (a clean stop must drain), restart

	// Partitions of a cluster whose NATS servers talk through a natstest.Net (each node
	// on its own server, clients on every side), each held past the ownership TTL:
	FaultIsolate = "isolate" // one server cut from the others (a 2/1 split)
	FaultBridge  = "bridge"  // two servers cut from each other, both still reaching the third
	FaultOneWay  = "oneway"  // one server's bytes to another stall; the other way flows
	FaultFlap    = "flap"    // one server cut and healed over and over
)

// PartitionFaults are the partition nemeses.
var PartitionFaults = []string{FaultIsolate, FaultBridge, FaultOneWay, FaultFlap}

// AllFaults lists every fault kind of the brief; MixedFaults adds the rest.
var (
	AllFaults   = []string{FaultKill, FaultPause, FaultClock, FaultJournal, FaultConns}
	MixedFaults = append(append([]string(nil), AllFaults...), FaultTerm)
)

// Nemesis injects faults, one at a time, at random moments.
type Nemesis struct {
	Srv    Target
	Rec    *history.Recorder
	Round  int
	Kinds  []string
	Every  time.Duration // mean pause between faults
	Rng    *rand.Rand
	Conns  func() []*Conn
	Logf   func(string, ...any)
	Counts map[string]int
	// StopWait bounds the operator's wait for SIGTERM before SIGKILL.
	StopWait time.Duration

	mu       sync.Mutex
	problems []string
}

// Problems are failures of the harness's own actions (e.g. a restart that did not come
// up), which a test must report.
func (n *Nemesis) Problems() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.problems...)
}

func (n *Nemesis) problem(format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.problems = append(n.problems, fmt.Sprintf(format, args...))
}

// Run injects faults until ctx ends, then heals.
func (n *Nemesis) Run(ctx context.Context) {
	if n.Counts == nil {
		n.Counts = map[string]int{}
	}
	defer n.Heal()
	if len(n.Kinds) == 0 {
		<-ctx.Done()
		return
	}
	var deck []string
	for {
		d := n.Every/2 + time.Duration(n.Rng.Int64N(int64(n.Every)))
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		// Kinds come from a shuffled deck, so every kind comes up once per len(Kinds) faults.
		if len(deck) == 0 {
			deck = append(deck, n.Kinds...)
			n.Rng.Shuffle(len(deck), func(i, j int) { deck[i], deck[j] = deck[j], deck[i] })
		}
		kind := deck[0]
		deck = deck[1:]
		start := n.Rec.Now()
		detail := n.inject(ctx, kind)
		n.Counts[kind]++
		n.Rec.Add(history.Record{Kind: history.KindFault, Round: n.Round, Fault: kind, Detail: detail, Invoke: start, Return: n.Rec.Now()})
		if n.Logf != nil {
			n.Logf("nemesis: %s: %s", kind, detail)
		}
	}
}

func (n *Nemesis) sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (n *Nemesis) restart(why string) {
	for i := 0; i < 3; i++ {
		if err := n.Srv.Start(); err == nil {
			return
		} else if i == 2 {
			n.problem("%s: the server did not come back: %v", why, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (n *Nemesis) inject(ctx context.Context, kind string) string {
	switch kind {
	case FaultKill:
		pid := n.Srv.PID()
		n.Srv.Kill()
		d := time.Duration(n.Rng.IntN(300)) * time.Millisecond
		time.Sleep(d)
		n.restart("kill")
		return fmt.Sprintf("kill -9 pid %d, restarted after %v", pid, d)
	case FaultPause:
		d := 200*time.Millisecond + time.Duration(n.Rng.IntN(1300))*time.Millisecond
		n.Srv.Pause()
		time.Sleep(d)
		n.Srv.Resume()
		return fmt.Sprintf("SIGSTOP for %v", d)
	case FaultClock:
		offsets := []time.Duration{-3 * time.Second, -time.Second, -300 * time.Millisecond, 300 * time.Millisecond, time.Second, 2 * time.Second}
		off := offsets[n.Rng.IntN(len(offsets))]
		hold := 300*time.Millisecond + time.Duration(n.Rng.IntN(1500))*time.Millisecond
		if err := n.Srv.SetClockOffset(off); err != nil {
			n.problem("clock: %v", err)
		}
		n.sleep(ctx, hold)
		if err := n.Srv.SetClockOffset(0); err != nil {
			n.problem("clock: %v", err)
		}
		return fmt.Sprintf("clock offset %v for %v", off, hold)
	case FaultJournal:
		mode := []string{"write", "fsync"}[n.Rng.IntN(2)]
		if err := n.Srv.SetFail(mode); err != nil {
			n.problem("journal: %v", err)
			return "could not set the fault"
		}
		halted := false
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			hctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			code, body, err := n.Srv.Healthz(hctx)
			cancel()
			if err == nil && code != 200 && strings.Contains(body, "halted") {
				halted = true
				break
			}
			time.Sleep(30 * time.Millisecond)
		}
		if err := n.Srv.ClearFail(); err != nil {
			n.problem("journal: %v", err)
		}
		t0 := time.Now()
		// An operator's restart: SIGTERM, and SIGKILL if it has not stopped in time.
		clean := n.Srv.Stop(n.StopWait)
		stopTook := time.Since(t0)
		n.restart("journal")
		return fmt.Sprintf("fail=%s, shard halted=%t, operator restart (clean stop %t in %v, up again after %v)", mode, halted, clean,
			stopTook.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
	case FaultTerm:
		t0 := time.Now()
		clean := n.Srv.Stop(n.StopWait)
		if !clean {
			n.problem("term: SIGTERM under load did not stop the server cleanly within %v", n.StopWait)
		}
		took := time.Since(t0)
		n.restart("term")
		return fmt.Sprintf("SIGTERM under load: clean %t in %v, up again after %v", clean, took.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
	case FaultIsolate, FaultBridge, FaultOneWay, FaultFlap:
		return n.partition(ctx, kind)
	case FaultConns:
		conns := n.Conns()
		k := 1 + n.Rng.IntN(3)
		dropped := 0
		for i := 0; i < k && len(conns) > 0; i++ {
			if conns[n.Rng.IntN(len(conns))].Drop() {
				dropped++
			}
		}
		return fmt.Sprintf("closed %d client connections", dropped)
	}
	return "unknown fault"
}

// partition cuts the cluster's network as kind says, holds it, and heals it.
func (n *Nemesis) partition(ctx context.Context, kind string) string {
	c, ok := n.Srv.(*Cluster)
	if !ok || c.Net == nil {
		n.problem("%s: the target has no network to cut", kind)
		return "no network"
	}
	waited, behind := c.settle(ctx, 20*time.Second)
	if ctx.Err() != nil {
		return "the workload ended"
	}
	if behind != "" {
		n.problem("%s: JetStream not whole %v after the last fault (%s)", kind, waited.Round(10*time.Millisecond), behind)
	}
	servers := len(c.Nodes)
	i := n.Rng.IntN(servers)
	j := (i + 1 + n.Rng.IntN(servers-1)) % servers
	hold := 1500*time.Millisecond + time.Duration(n.Rng.IntN(2500))*time.Millisecond
	var what string
	switch kind {
	case FaultIsolate:
		// Long enough for the majority to take the isolated node's shards: their claims
		// lapse, and their journal streams, led from the isolated server, elect a leader.
		hold = 5*time.Second + time.Duration(n.Rng.IntN(4000))*time.Millisecond
		cut := time.Now()
		c.Net.Isolate(i)
		type served struct {
			took    time.Duration
			missing string
		}
		majority := make(chan served, 1)
		go func() { took, missing := majorityServes(ctx, c, i, hold); majority <- served{took, missing} }()
		minority := make(chan string, 1)
		go func() {
			summary, unanswered := minorityAnswers(ctx, c, i, hold)
			if unanswered > 0 {
				n.problem("isolate: %d requests of a client of the cut-off server got no answer within 5 s (%s)", unanswered, summary)
			}
			minority <- summary
		}()
		n.sleep(ctx, hold)
		c.Net.Heal()
		maj, minor := <-majority, <-minority
		if maj.took < 0 {
			return fmt.Sprintf("server %d isolated at %s (JetStream whole %v after the last fault) for %v, healed; the majority did not answer for every shard meanwhile (%s); %s", i, cut.Format("15:04:05.000"), waited.Round(10*time.Millisecond), hold, maj.missing, minor)
		}
		return fmt.Sprintf("server %d isolated at %s (JetStream whole %v after the last fault) for %v, healed; the majority answered for every shard %v after the cut; %s", i, cut.Format("15:04:05.000"), waited.Round(10*time.Millisecond), hold, maj.took.Round(10*time.Millisecond), minor)
	case FaultBridge:
		c.Net.Cut(i, j)
		what = fmt.Sprintf("servers %d and %d cut from each other (both reach the third)", i, j)
	case FaultOneWay:
		c.Net.CutOneWay(i, j)
		what = fmt.Sprintf("server %d's bytes to server %d stalled", i, j)
	case FaultFlap:
		flaps := 4 + n.Rng.IntN(5)
		for f := 0; f < flaps && ctx.Err() == nil; f++ {
			c.Net.Isolate(i)
			n.sleep(ctx, time.Duration(100+n.Rng.IntN(500))*time.Millisecond)
			c.Net.Heal()
			n.sleep(ctx, time.Duration(100+n.Rng.IntN(500))*time.Millisecond)
		}
		return fmt.Sprintf("server %d isolated and healed %d times", i, flaps)
	}
	n.sleep(ctx, hold)
	c.Net.Heal()
	return fmt.Sprintf("%s for %v, healed", what, hold)
}

// Heal undoes every fault: the process runs (resumed or restarted), its clock is right,
// its journal works, its network is whole.
func (n *Nemesis) Heal() {
	if c, ok := n.Srv.(*Cluster); ok && c.Net != nil {
		c.Net.Heal()
	}
	_ = n.Srv.SetClockOffset(0)
	_ = n.Srv.ClearFail()
	n.Srv.Resume()
	if !n.Srv.Running() {
		n.restart("heal")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if code, body, err := n.Srv.Healthz(ctx); err == nil && code != 200 && strings.Contains(body, "halted") {
		n.Srv.Stop(40 * time.Second)
		n.restart("heal: halted shard")
	}
}

// majorityServes measures, while server isolated is cut off, how long after the cut a
// client of another server gets a definite answer for every shard (a resource.get of a
// key placed there: ok or resource_not_found), within limit; -1 when it does not, with
// what each shard that did not answered last. Every shard is asked on its own, so one
// shard's slow answers do not delay the others' measurement.
func majorityServes(ctx context.Context, c *Cluster, isolated int, limit time.Duration) (time.Duration, string) {
	start := time.Now()
	nc, err := dial(c.ClientURLs[(isolated+1)%len(c.ClientURLs)], "majority-probe")
	if err != nil {
		return -1, err.Error()
	}
	defer nc.Close()
	keys := probeKeys(c)
	type served struct {
		shard uint32
		after time.Duration
		last  string
	}
	results := make(chan served, len(keys))
	for k, key := range keys {
		go func() {
			last := "not asked"
			for time.Since(start) < limit && ctx.Err() == nil {
				code, err := probeGet(nc, key, 500*time.Millisecond)
				if err == nil && (code == "ok" || code == "resource_not_found") {
					results <- served{k, time.Since(start), code}
					return
				}
				last = code
				if err != nil {
					last = err.Error()
				}
				time.Sleep(20 * time.Millisecond)
			}
			results <- served{k, -1, last}
		}()
	}
	var slowest time.Duration
	var missing []string
	for range keys {
		r := <-results
		if r.after < 0 {
			missing = append(missing, fmt.Sprintf("shard %d: %s", r.shard, r.last))
			continue
		}
		slowest = max(slowest, r.after)
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return -1, strings.Join(missing, "; ")
	}
	return slowest, ""
}

// probeKeys is a key of the probe tenant placed on each shard.
func probeKeys(c *Cluster) map[uint32]string {
	shards := uint32(len(c.Nodes))
	if s := c.Nodes[0].cfg.Shards; s > 0 {
		shards = uint32(s)
	}
	keys := map[uint32]string{}
	for i := 0; uint32(len(keys)) < shards; i++ {
		key := fmt.Sprintf("probe-%d", i)
		if _, ok := keys[contract.ShardOf(probeTenant, key, shards)]; !ok {
			keys[contract.ShardOf(probeTenant, key, shards)] = key
		}
	}
	return keys
}

// minorityAnswers sends reads for every shard from a client of the isolated server while
// it is cut off, and says how they were answered — a definite refusal or an indefinite
// code, or a read a lease still covered — how long the slowest answer took, and how many
// got none within 5 s (the Go client's budget is 8 attempts of 2 s: an answer must come
// well within it).
func minorityAnswers(ctx context.Context, c *Cluster, isolated int, limit time.Duration) (string, int) {
	start := time.Now()
	nc, err := dial(c.ClientURLs[isolated], "minority-probe")
	if err != nil {
		return "minority probe: " + err.Error(), 0
	}
	defer nc.Close()
	// A request already on a route when the cut comes is lost with the route (its server
	// may hand a request to a queue member across a route): no server can answer that,
	// and the client's own attempt timeout covers it. The probe asks from after the cut.
	time.Sleep(200 * time.Millisecond)
	codes := map[string]int{}
	unanswered := 0
	var slowest time.Duration
	var slow []string // answers past the Go client's first attempt: which shard, when
	shards := len(probeKeys(c))
	for i := 0; time.Since(start) < limit-time.Second && ctx.Err() == nil; i++ {
		t0 := time.Now()
		key := fmt.Sprintf("probe-%d", i%16)
		code, err := probeGet(nc, key, 5*time.Second)
		took := time.Since(t0)
		slowest = max(slowest, took)
		if err != nil {
			code = "no answer: " + err.Error()
			unanswered++
		}
		codes[code]++
		if took > contract.DefaultAttempt && len(slow) < 4 {
			slow = append(slow, fmt.Sprintf("shard %d sent %v after the cut: %s after %v",
				contract.ShardOf(probeTenant, key, uint32(shards)), t0.Sub(start).Round(10*time.Millisecond), code, took.Round(10*time.Millisecond)))
		}
		time.Sleep(100 * time.Millisecond)
	}
	summary := fmt.Sprintf("the minority's answers %v, the slowest after %v", codes, slowest.Round(10*time.Millisecond))
	if len(slow) > 0 {
		summary += " (" + strings.Join(slow, "; ") + ")"
	}
	return summary, unanswered
}

// probeTenant is the partition probes' tenant: it has no objects.
const probeTenant = "probe"

// probeGet reads resource key of the probe tenant and returns the reply's code.
func probeGet(nc *nats.Conn, key string, timeout time.Duration) (string, error) {
	m, err := nc.Request("holdfast.v1."+probeTenant+".resource.get", fmt.Appendf(nil, `{"resource_id":%q}`, key), timeout)
	if err != nil {
		return "", err
	}
	var r struct {
		Code string `json:"code"`
	}
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return "", err
	}
	return r.Code, nil
}
