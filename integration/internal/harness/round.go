//go:build unix

package harness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/integration/internal/history"
	"github.com/holdfast/holdfast/messages"
)

// RoundConfig configures one round.
type RoundConfig struct {
	ID       int
	Prefix   string // "holdfast" when empty
	Shards   uint32
	Clients  int
	Keys     int
	Duration time.Duration
	Seed     int64
	Faults   []string      // fault kinds the nemesis mixes (none: no faults)
	Every    time.Duration // mean time between faults
	Proto    float64       // fraction of requests sent as protobuf
	Think    time.Duration // mean pause of a client between operations (default 5ms)
	StopWait time.Duration // the nemesis's wait for SIGTERM before SIGKILL (default 40s)
	Logf     func(string, ...any)
	// During, if set, runs alongside the workload (e.g. hostile clients); its context ends
	// with the workload.
	During func(ctx context.Context, r *Round)
}

// RoundResult is what a round leaves behind besides its records.
type RoundResult struct {
	Ops      int64
	Faults   map[string]int
	Problems []string // harness-level failures: crashes, unclean stops, incomplete event stream
	Took     time.Duration
}

func (c *RoundConfig) logf(format string, args ...any) {
	if c.Logf != nil {
		c.Logf(format, args...)
	}
}

// RunRound runs one round against srv (started if it is not running): clients and
// nemesis for Duration, then heal, let every in-flight operation resolve, stop the
// server cleanly, restart it, read every object, lease and holder, make sure every
// event is in the stream, and record the stream. The records are in rec under round
// cfg.ID.
func RunRound(ctx context.Context, srv Target, rec *history.Recorder, cfg RoundConfig) (*RoundResult, error) {
	start := time.Now()
	if cfg.Prefix == "" {
		cfg.Prefix = "holdfast"
	}
	res := &RoundResult{Faults: map[string]int{}}
	tenants := []string{fmt.Sprintf("r%da", cfg.ID), fmt.Sprintf("r%db", cfg.ID)}
	rec.Add(history.Record{Kind: history.KindMeta, Round: cfg.ID, Meta: &history.Meta{Round: cfg.ID, Tenants: tenants,
		Shards: cfg.Shards, SlotMs: 10, Prefix: cfg.Prefix, Seed: cfg.Seed}})
	if !srv.Running() {
		if err := srv.Start(); err != nil {
			return nil, err
		}
	}
	crashesBefore := len(srv.Crashes())
	hard, cancelHard := context.WithCancel(ctx)
	defer cancelHard()
	r := &Round{ID: cfg.ID, Prefix: cfg.Prefix, Tenants: tenants, Shards: cfg.Shards, Layout: NewLayout(cfg.Keys), Rec: rec,
		Srv: srv, Proto: cfg.Proto, Dur: cfg.Duration, Think: cfg.Think, MaxWait: 90 * time.Second, started: time.Now(), stop: make(chan struct{}), hard: hard}

	// Clients: every fourth one works in the second tenant, on objects of the same names.
	var clients []*Client
	byTenant := map[string][]*Client{}
	for i := 1; i <= cfg.Clients; i++ {
		t := tenants[0]
		if i%4 == 0 {
			t = tenants[1]
		}
		c := newClient(r, i, t, cfg.Seed+int64(cfg.ID)*1_000_003)
		clients = append(clients, c)
		byTenant[t] = append(byTenant[t], c)
	}
	// Each object is created by two clients of its tenant, racing.
	creates := map[*Client][]func(string) (string, proto.Message){}
	for _, cl := range byTenant {
		for j, mk := range r.Layout.creates() {
			creates[cl[j%len(cl)]] = append(creates[cl[j%len(cl)]], mk)
			if len(cl) > 1 {
				creates[cl[(j+1)%len(cl)]] = append(creates[cl[(j+1)%len(cl)]], mk)
			}
		}
	}
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Run(creates[c])
		}()
	}
	nem := &Nemesis{Srv: srv, Rec: rec, Round: cfg.ID, Kinds: cfg.Faults, Every: cfg.Every, Logf: cfg.Logf,
		Rng: rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(cfg.ID))), Counts: map[string]int{},
		Conns: func() []*Conn {
			out := make([]*Conn, len(clients))
			for i, c := range clients {
				out[i] = c.Conn
			}
			return out
		}}
	if nem.StopWait = cfg.StopWait; nem.StopWait <= 0 {
		nem.StopWait = 40 * time.Second
	}
	if nem.Every <= 0 {
		nem.Every = time.Second
	}
	nctx, stopNemesis := context.WithCancel(ctx)
	nemDone := make(chan struct{})
	go func() {
		defer close(nemDone)
		nem.Run(nctx)
	}()
	var duringDone chan struct{}
	if cfg.During != nil {
		duringDone = make(chan struct{})
		go func() {
			defer close(duringDone)
			cfg.During(nctx, r)
		}()
	}
	select {
	case <-ctx.Done():
	case <-time.After(cfg.Duration):
	}
	stopNemesis()
	if duringDone != nil {
		<-duringDone
	}
	<-nemDone
	res.Faults = nem.Counts
	res.Problems = append(res.Problems, nem.Problems()...)
	close(r.stop)
	cfg.logf("round %d: workload stopped after %v, %d operations; resolving what is in flight", cfg.ID, time.Since(start).Round(time.Millisecond), r.ops.Load())
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(r.MaxWait + 15*time.Second):
		res.Problems = append(res.Problems, "clients did not finish their retries in time")
		cancelHard()
		<-done
	}
	for _, c := range clients {
		c.Conn.Close()
	}
	phases := []string{fmt.Sprintf("workload+resolve %v", time.Since(start).Round(time.Millisecond))}
	mark := time.Now()
	phase := func(name string) {
		phases = append(phases, fmt.Sprintf("%s %v", name, time.Since(mark).Round(time.Millisecond)))
		mark = time.Now()
	}

	// A clean stop and a restart: nothing committed may be lost, every event republished.
	t0 := rec.Now()
	if !srv.Stop(60 * time.Second) {
		res.Problems = append(res.Problems, "SIGTERM did not stop the server cleanly (exit status not 0 within 60s)")
	}
	if err := srv.Start(); err != nil {
		return res, fmt.Errorf("restart after the round: %w", err)
	}
	rec.Add(history.Record{Kind: history.KindFault, Round: cfg.ID, Fault: "final-restart", Detail: "SIGTERM and start", Invoke: t0, Return: rec.Now()})
	phase("restart")
	time.Sleep(300 * time.Millisecond) // let the last short TTLs expire

	if err := finalReads(hard, r, clients); err != nil {
		res.Problems = append(res.Problems, err.Error())
	}
	phase("final-reads")
	if err := awaitPublished(ctx, srv, cfg.Shards, tenants[0]+"s", cfg.Prefix); err != nil {
		res.Problems = append(res.Problems, err.Error())
	}
	phase("await-published")
	n, err := recordEvents(ctx, srv, rec, cfg.ID, cfg.Prefix, tenants)
	if err != nil {
		res.Problems = append(res.Problems, "reading the event stream: "+err.Error())
	}
	phase("events")
	if c := srv.Crashes(); len(c) > crashesBefore {
		res.Problems = append(res.Problems, c[crashesBefore:]...)
	}
	res.Ops = r.ops.Load()
	res.Took = time.Since(start)
	cfg.logf("round %d: %d operations, %d events, faults %v, %v (%s)", cfg.ID, res.Ops, n, res.Faults, res.Took.Round(time.Millisecond),
		strings.Join(phases, ", "))
	return res, nil
}

// finalReads reads every object, every lease any client got, and every holder's list,
// from several connections at once.
func finalReads(ctx context.Context, r *Round, clients []*Client) error {
	type read struct {
		tenant string
		verb   string
		m      proto.Message
	}
	var reads []read
	for _, t := range r.Tenants {
		l := r.Layout
		for _, k := range l.Keys {
			for _, id := range append(append([]string(nil), l.Res[k]...), l.Late[k]) {
				reads = append(reads, read{t, "resource.get", &messages.GetResourceRequest{ResourceId: id}})
			}
			reads = append(reads, read{t, "pool.get", &messages.GetPoolRequest{PoolId: l.Pool[k]}})
			reads = append(reads, read{t, "range.get", &messages.GetRangeRequest{RangeId: l.Range[k]}})
		}
		reads = append(reads, read{t, "range.get", &messages.GetRangeRequest{RangeId: r.Layout.Big}})
	}
	for _, c := range clients {
		reads = append(reads, read{c.Tenant, "lease.list", &messages.ListLeasesRequest{HolderId: c.Holder, Limit: proto.Uint32(10000)}})
		for _, id := range c.leases {
			reads = append(reads, read{c.Tenant, "lease.get", &messages.GetLeaseRequest{LeaseId: id}})
		}
	}
	const workers = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	next := 0
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn := newConn(fmt.Sprintf("round%d-final%d", r.ID, w), r.Srv)
			defer conn.Close()
			caller := &Caller{Rec: r.Rec, Round: r.ID, Client: 1000 + w, Prefix: r.Prefix, Conn: conn,
				Rng: rand.New(rand.NewPCG(uint64(w), 7))}
			for i := 0; ; i++ {
				mu.Lock()
				if next >= len(reads) || ctx.Err() != nil {
					mu.Unlock()
					return
				}
				rd := reads[next]
				next++
				mu.Unlock()
				call := &Call{Verb: rd.verb, Tenant: rd.tenant, Key: fmt.Sprintf("r%d-final%d-%d", r.ID, w, i), Msg: rd.m, Timeout: 5 * time.Second}
				// A read that failed shows nothing; try it again under a new id.
				for attempt := 0; attempt < 20; attempt++ {
					rep := caller.Send(call, 1)
					if rep != nil && rep.Outcome == messages.OutcomeCommitted {
						break
					}
					if attempt == 19 {
						mu.Lock()
						failed++
						mu.Unlock()
					}
					call.Key += "r"
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	if failed > 0 {
		return fmt.Errorf("%d final reads never got an answer", failed)
	}
	return nil
}

// awaitPublished makes sure every event of every shard is in the stream: it commits one
// write per shard (in a tenant of its own), then waits until each shard's published
// position has passed it. Events of a shard are published in lsn order and the position
// only moves past an lsn once everything up to it is acknowledged.
func awaitPublished(ctx context.Context, srv Target, shards uint32, tenant, prefix string) error {
	nc, err := dial(srv.URL(), "sentinel")
	if err != nil {
		return err
	}
	defer nc.Close()
	want := map[uint32]uint64{}
	for i := 0; len(want) < int(shards) && i < 10000; i++ {
		key := fmt.Sprintf("s%d", i)
		sh := contract.ShardOf(tenant, key, shards)
		if _, ok := want[sh]; ok {
			continue
		}
		body, _ := messages.MarshalJSON(&messages.CreateResourceRequest{OperationId: "sentinel-" + key, ResourceId: key})
		var rep messages.Reply
		for attempt := 0; ; attempt++ {
			m, err := nc.Request(Subject(prefix, tenant, "resource.create"), body, 5*time.Second)
			if err == nil && messages.UnmarshalJSONTolerant(m.Data, &rep) == nil && rep.Outcome == messages.OutcomeCommitted {
				break
			}
			if attempt == 20 {
				return fmt.Errorf("sentinel write on shard %d failed: %v %s", sh, err, rep.Code)
			}
			time.Sleep(100 * time.Millisecond)
		}
		want[sh] = rep.Lsn
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		pub, err := srv.ShardMetric(ctx, "holdfast_events_published_lsn")
		if err == nil {
			behind := ""
			for sh, lsn := range want {
				if uint64(pub[sh]) < lsn {
					behind += fmt.Sprintf(" shard %d at %d (want %d)", sh, uint64(pub[sh]), lsn)
				}
			}
			if behind == "" {
				return nil
			}
			if time.Now().After(deadline) {
				return errors.New("the event stream did not catch up:" + behind)
			}
		} else if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// recordEvents reads every event of the tenants from HOLDFAST_EVENTS into the recorder.
func recordEvents(ctx context.Context, srv Target, rec *history.Recorder, round int, prefix string, tenants []string) (int, error) {
	nc, err := dial(srv.URL(), "events")
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	stream, err := js.Stream(ctx, "HOLDFAST_EVENTS")
	if err != nil {
		return 0, err
	}
	var subjects []string
	total := uint64(0)
	for _, t := range tenants {
		subj := prefix + ".v1." + t + ".events.>"
		subjects = append(subjects, subj)
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter(subj))
		if err != nil {
			return 0, err
		}
		for _, n := range info.State.Subjects {
			total += n
		}
	}
	if total == 0 {
		return 0, nil
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: subjects, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return 0, err
	}
	n := 0
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		batch, err := cons.FetchNoWait(1000)
		if err != nil {
			return n, fmt.Errorf("after %d of %d events: %w", n, total, err)
		}
		got := 0
		pending := uint64(1)
		for msg := range batch.Messages() {
			meta, err := msg.Metadata()
			if err != nil {
				return n, err
			}
			rec.Add(history.Record{Kind: history.KindEvent, Round: round, Seq: meta.Sequence.Stream, Subject: msg.Subject(),
				MsgID: msg.Headers().Get(nats.MsgIdHdr), Event: append([]byte(nil), msg.Data()...)})
			n++
			got++
			pending = meta.NumPending
		}
		if got > 0 && pending == 0 && uint64(n) >= total {
			break
		}
		if got == 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if uint64(n) < total { // more is fine: expiries keep coming
		return n, fmt.Errorf("read %d events, the stream holds %d for the round's tenants", n, total)
	}
	return n, nil
}

// SortedKeys returns a map's keys in order.
func SortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
