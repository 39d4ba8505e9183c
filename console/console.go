// Package console is the operator's web page of a Holdfast process, served on its
// metrics listener: the cluster's nodes and the owner, position and write rate of every
// shard, the fill of the tables of the shards served here, the fullest pools and ranges,
// a lookup box (a lease by id, a value of a range, the leases of a holder or a label)
// and a live tail of events. It is read-only: lookups are the contract's reads, made on
// the process's own NATS connection as any client makes them, and the tail is a plain
// subscription to the events' subjects. Its assets are embedded (no CDN: it works
// offline).
//
// Who can reach the metrics listener can read every tenant's objects through the page
// (as /metrics already names every tenant's fullest pools and ranges): bind it as the
// operators' network allows (--metrics-listen, loopback by default). A tenant typed into
// the page narrows the lookups and the tail to that tenant: nothing of another tenant
// is shown then.
package console

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/messages"
	"github.com/holdfast/holdfast/wire"
)

//go:embed assets
var assets embed.FS

// Shards is what the page reads of the process's own shards.
type Shards interface {
	Shards() uint32
	IsOpen(shard uint32) bool
	Stats(shard uint32) actors.ShardStats
}

// Config is a console's process.
type Config struct {
	Conn    *nats.Conn // the process's NATS connection: lookups and the events tail
	Prefix  string
	Node    string // this process's node name
	Cluster bool   // one node of a cluster (else a single process)
	Version string
	Shards  Shards
	SlotMs  uint64
	Timeout time.Duration // per lookup or status request (default 2 s)
	// Rest answers the paths the page does not (the listener's /metrics, /livez, ...).
	Rest http.Handler
}

// Console serves the page and its API.
type Console struct {
	cfg     Config
	cl      *client.Client // the page's reads, as the default tenant (ForTenant for another)
	mux     *http.ServeMux
	tails   chan struct{} // one token per live events tail
	calls   chan struct{} // one token per status or lookup being answered
	mu      sync.Mutex
	lastLSN []rateSample // per shard: the previous status's applied lsn, for write rates
}

type rateSample struct {
	lsn uint64
	at  time.Time
}

// maxTails bounds the live events tails served at once, maxCalls the status reads and
// lookups (each a NATS request or two); one more is answered 503.
const (
	maxTails = 16
	maxCalls = 32
)

// New returns the console of a process.
func New(cfg Config) (*Console, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	cl, err := client.New(cfg.Conn, client.WithPrefix(cfg.Prefix), client.WithTimeout(cfg.Timeout))
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	c := &Console{cfg: cfg, cl: cl, mux: http.NewServeMux(), tails: make(chan struct{}, maxTails), calls: make(chan struct{}, maxCalls),
		lastLSN: make([]rateSample, cfg.Shards.Shards())}
	static, _ := fs.Sub(assets, "assets")
	files := http.FileServerFS(static)
	c.mux.Handle("GET /{$}", files)
	c.mux.Handle("GET /ui/", http.StripPrefix("/ui/", files))
	c.mux.HandleFunc("GET /api/status", c.bounded(c.status))
	c.mux.HandleFunc("GET /api/lookup", c.bounded(c.lookup))
	c.mux.HandleFunc("GET /api/events", c.events)
	if cfg.Rest != nil {
		c.mux.Handle("/", cfg.Rest)
	}
	return c, nil
}

// bounded answers 503 when maxCalls status reads and lookups are being answered.
func (c *Console) bounded(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case c.calls <- struct{}{}:
			defer func() { <-c.calls }()
			h(w, r)
		default:
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "too many console requests at once; retry"})
		}
	}
}

// Handler serves the page at /, its assets under /ui/ and its API under /api/, and
// hands any other path to Config.Rest.
func (c *Console) Handler() http.Handler { return c.mux }

// shardView is one shard's line on the page.
type shardView struct {
	Shard         uint32           `json:"shard"`
	Owner         string           `json:"owner"`
	AppliedLSN    uint64           `json:"applied_lsn"`
	Here          bool             `json:"here"`                     // served by this process: the rest is known
	WritesPerSec  float64          `json:"writes_per_sec,omitempty"` // applied entries per second since the last status
	QueueDepth    int64            `json:"queue_depth,omitempty"`
	Halted        bool             `json:"halted,omitempty"`
	ExpiryLagMs   uint64           `json:"expiry_lag_ms,omitempty"`
	Leases        map[string]int   `json:"leases,omitempty"`
	Tables        map[string]table `json:"tables,omitempty"`
	FullestTable  string           `json:"fullest_table,omitempty"`
	FullestFilled float64          `json:"fullest_fill"`
}

type table struct {
	Entries  int `json:"entries"`
	Capacity int `json:"capacity"`
}

type nodeView struct {
	Node         string   `json:"node"`
	Shards       []uint32 `json:"shards"`
	Lapsing      bool     `json:"lapsing,omitempty"`
	RenewalAgeMs uint64   `json:"renewal_age_ms"`
	Lost         bool     `json:"lost,omitempty"` // lost lately: its liveness lapsed
	LostAgoMs    uint64   `json:"lost_ago_ms,omitempty"`
	Held         []uint32 `json:"held,omitempty"` // a lost node's shards when it was lost
}

type fillView struct {
	Tenant string  `json:"tenant"`
	ID     string  `json:"id"`
	Used   uint64  `json:"used"`
	Size   uint64  `json:"size"` // 0: 2^64 values
	Fill   float64 `json:"fill"`
}

type statusView struct {
	Node    string      `json:"node"`
	Cluster bool        `json:"cluster"`
	Version string      `json:"version"`
	SlotMs  uint64      `json:"slot_ms"`
	Nodes   []nodeView  `json:"nodes"`
	Shards  []shardView `json:"shards"`
	Pools   []fillView  `json:"fullest_pools"`
	Ranges  []fillView  `json:"fullest_ranges"`
	Problem string      `json:"problem,omitempty"` // the cluster's view could not be read
}

// status is the page's periodic read: the cluster's view (cluster.status, asked of the
// service like any client asks it) joined with what this process knows of its shards.
func (c *Console) status(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), c.cfg.Timeout)
	defer cancel()
	n := c.cfg.Shards.Shards()
	v := statusView{Node: c.cfg.Node, Cluster: c.cfg.Cluster, Version: c.cfg.Version, SlotMs: c.cfg.SlotMs, Shards: make([]shardView, n)}
	if st, err := c.cl.ClusterStatus(ctx, ""); err != nil || st.Code != messages.CodeOK {
		v.Problem = "cluster.status: " + problem(err, st)
	} else {
		for _, nd := range st.Nodes {
			v.Nodes = append(v.Nodes, nodeView{Node: nd.Node, Shards: nd.Shards, Lapsing: nd.Lapsing, RenewalAgeMs: nd.RenewalAgeMs,
				Lost: nd.Lost, LostAgoMs: nd.LostAgoMs, Held: nd.Held})
		}
		for _, sh := range st.Shards {
			if sh.Shard < n {
				v.Shards[sh.Shard].Owner, v.Shards[sh.Shard].AppliedLSN = sh.Owner, sh.AppliedLsn
			}
		}
	}
	now := time.Now()
	c.mu.Lock()
	for k := range n {
		sv := &v.Shards[k]
		sv.Shard = k
		if !c.cfg.Shards.IsOpen(k) {
			continue
		}
		st := c.cfg.Shards.Stats(k)
		sv.Here, sv.AppliedLSN, sv.QueueDepth, sv.Halted = true, st.AppliedLSN, st.QueueDepth, st.Halted
		if sv.Owner == "" {
			sv.Owner = c.cfg.Node
		}
		if prev := c.lastLSN[k]; !prev.at.IsZero() && st.AppliedLSN >= prev.lsn {
			if d := now.Sub(prev.at).Seconds(); d > 0 {
				sv.WritesPerSec = float64(st.AppliedLSN-prev.lsn) / d
			}
		}
		c.lastLSN[k] = rateSample{lsn: st.AppliedLSN, at: now}
		if d := st.Tables.NextDeadline; d != 0 && st.ClockSlot > d {
			sv.ExpiryLagMs = (st.ClockSlot - d) * c.cfg.SlotMs
		}
		sv.Leases = map[string]int{"reserved": st.Tables.Reserved, "active": st.Tables.Active, "revoking": st.Tables.Revoking}
		sv.Tables = map[string]table{}
		for _, t := range st.Tables.Tables() {
			sv.Tables[t.Name] = table{Entries: t.Entries, Capacity: t.Bound}
			if t.Bound > 0 {
				if f := float64(t.Entries) / float64(t.Bound); f > sv.FullestFilled || sv.FullestTable == "" {
					sv.FullestTable, sv.FullestFilled = t.Name, f
				}
			}
		}
		if f := st.Fullest; f != nil {
			v.Pools = append(v.Pools, fills(f.Pools)...)
			v.Ranges = append(v.Ranges, fills(f.Ranges)...)
		}
	}
	c.mu.Unlock()
	v.Pools, v.Ranges = fullest(v.Pools), fullest(v.Ranges)
	writeJSON(w, http.StatusOK, v)
}

func fills(os []kernel.Occupancy) []fillView {
	out := make([]fillView, 0, len(os))
	for _, o := range os {
		out = append(out, fillView{Tenant: o.Tenant, ID: o.ID, Used: o.Used, Size: o.Size, Fill: wire.Fill(o)})
	}
	return out
}

// fullest keeps the ten fullest, fullest first, then by tenant and id.
func fullest(vs []fillView) []fillView {
	slices.SortFunc(vs, func(a, b fillView) int {
		if c := cmp.Compare(b.Fill, a.Fill); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.ID, b.ID))
	})
	if len(vs) > 10 {
		vs = vs[:10]
	}
	return vs
}

func problem(err error, r *client.ClusterResult) string {
	if err != nil {
		return err.Error()
	}
	return r.Code + ": " + r.Message
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// lookup runs one of the contract's reads for the page, as the tenant it names, and
// answers the reply as the contract's JSON: ?tenant=T and one of lease=ID,
// range=R&value=V, holder=H, label=KEY=VALUE.
func (c *Console) lookup(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	tenant := q.Get("tenant")
	if tenant == "" {
		tenant = client.DefaultTenant
	}
	cl, err := c.cl.ForTenant(tenant)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*c.cfg.Timeout)
	defer cancel()
	var reply *messages.Reply
	switch {
	case q.Get("lease") != "":
		var res *client.LeaseResult
		if res, err = cl.GetLease(ctx, q.Get("lease")); err == nil {
			reply = res.Reply
		}
	case q.Get("range") != "":
		v, perr := strconv.ParseUint(q.Get("value"), 10, 64)
		if perr != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "value: a range lookup needs a value, a non-negative integer"})
			return
		}
		var res *client.LookupResult
		if res, err = cl.LookupValue(ctx, q.Get("range"), v); err == nil {
			reply = res.Reply
		}
	case q.Get("holder") != "" || q.Get("label") != "":
		var res *client.LeasesResult
		if res, err = cl.ListLeasesPage(ctx, client.LeaseQuery{Holder: q.Get("holder"), Label: q.Get("label"), Page: client.Page{Limit: 100}}); err == nil {
			reply = res.Reply
		}
	default:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "lookup: name a lease, a range and value, a holder or a label"})
		return
	}
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	body, err := messages.MarshalJSON(reply)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(body)
}

// events streams the events of one tenant (?tenant=T), or of every tenant, as
// server-sent events: each message's subject and body as it is published. A viewer
// that falls behind skips events (a "skipped" message says how many), never holds the
// process up.
func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	tenant := r.URL.Query().Get("tenant")
	if tenant != "" && !client.ValidTenant(tenant) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "tenant: 1-64 chars of A-Z a-z 0-9 _ -"})
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	select {
	case c.tails <- struct{}{}:
		defer func() { <-c.tails }()
	default:
		http.Error(w, "too many event tails open; close one", http.StatusServiceUnavailable)
		return
	}
	subject := c.cfg.Prefix + ".v1.*.events.>"
	if tenant != "" {
		subject = c.cfg.Prefix + ".v1." + tenant + ".events.>"
	}
	live, err := c.subscribe(subject)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer live.sub.Unsubscribe()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte(": holdfast events " + subject + "\n\n"))
	// The last few events first, from the stream, so the tail opens on what just
	// happened; a live one the backfill already showed is not shown again.
	shown := map[string]bool{}
	for _, m := range c.recent(r.Context(), subject) {
		shown[m.Header.Get(jetstream.MsgIDHeader)] = true
		writeTail(w, m, true)
	}
	flusher.Flush()
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ping.C:
			_, _ = w.Write([]byte(": ping\n\n"))
		case m := <-live.ch:
			if id := m.Header.Get(jetstream.MsgIDHeader); id != "" && shown[id] {
				delete(shown, id)
				continue
			}
			if n := live.takeSkipped(); n > 0 {
				_, _ = w.Write([]byte("event: skipped\ndata: " + strconv.Itoa(n) + "\n\n"))
			}
			writeTail(w, m, false)
		}
		flusher.Flush()
	}
}

// liveTail is a tail's subscription: the events it has room for, and how many it had
// to skip since the last one sent (a viewer that falls behind never holds the process up).
type liveTail struct {
	sub     *nats.Subscription
	ch      chan *nats.Msg
	skipped atomic.Int64
}

func (c *Console) subscribe(subject string) (*liveTail, error) {
	t := &liveTail{ch: make(chan *nats.Msg, 256)}
	var err error
	t.sub, err = c.cfg.Conn.Subscribe(subject, func(m *nats.Msg) {
		select {
		case t.ch <- m:
		default:
			t.skipped.Add(1)
		}
	})
	return t, err
}

func (t *liveTail) takeSkipped() int { return int(t.skipped.Swap(0)) }

// writeTail writes one event of the tail as a server-sent event.
func writeTail(w http.ResponseWriter, m *nats.Msg, recent bool) {
	line, _ := json.Marshal(tailLine{Subject: m.Subject, Event: jsonBody(m.Data), Recent: recent})
	_, _ = w.Write([]byte("data: " + string(line) + "\n\n"))
}

// tailLine is one event of the tail; Recent marks the ones the tail opened with.
type tailLine struct {
	Subject string          `json:"subject"`
	Event   json.RawMessage `json:"event"`
	Recent  bool            `json:"recent,omitempty"`
}

// Bounds of a tail's backfill: the last tailBackfill events on its subject among the
// stream's last tailWindow messages, read within tailBackfillTime (a quiet tenant's
// older events are not looked for).
const (
	tailBackfill     = 20
	tailWindow       = 2000
	tailBackfillTime = time.Second
)

// recent reads the last tailBackfill events on subject from the events stream, oldest
// first; none when the stream cannot be read (the live tail still works).
func (c *Console) recent(ctx context.Context, subject string) []*nats.Msg {
	ctx, cancel := context.WithTimeout(ctx, tailBackfillTime)
	defer cancel()
	js, err := jetstream.New(c.cfg.Conn)
	if err != nil {
		return nil
	}
	st, err := js.Stream(ctx, contract.StreamName)
	if err != nil {
		return nil
	}
	last := st.CachedInfo().State.LastSeq
	if last == 0 {
		return nil
	}
	start := uint64(1)
	if last > tailWindow {
		start = last - tailWindow + 1
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject},
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: start})
	if err != nil {
		return nil
	}
	var ring []*nats.Msg
	for ctx.Err() == nil {
		batch, err := cons.FetchNoWait(100)
		if err != nil {
			break
		}
		n, done := 0, false
		for m := range batch.Messages() {
			n++
			ring = append(ring, &nats.Msg{Subject: m.Subject(), Data: m.Data(), Header: m.Headers()})
			if len(ring) > tailBackfill {
				ring = ring[1:]
			}
			if md, err := m.Metadata(); err == nil && (md.NumPending == 0 || md.Sequence.Stream >= last) {
				done = true
			}
		}
		if done || n == 0 {
			break
		}
	}
	return ring
}

// jsonBody is an event's body as JSON: as published (JSON), or its subject alone when
// it is not (a protobuf-encoded stream is not this page's to decode).
func jsonBody(b []byte) json.RawMessage {
	if json.Valid(b) && strings.HasPrefix(strings.TrimSpace(string(b)), "{") {
		return b
	}
	return json.RawMessage("null")
}
