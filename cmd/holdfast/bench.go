package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alecthomas/kong"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/messages"
)

const benchAbout = `C concurrent clients reserve a random one of R resources (created first,
idempotently) and release it when granted, for D seconds, over a real NATS
connection, with a progress line on stderr once a second. Then it prints
attempts/s (reserve requests), grants/s (reserves answered ok), requests/s
(reserve + release requests answered), p50/p99/p999/max latency per verb, and
the count of each code. Request and transport failures count as codes too
(transport:timeout, transport:no_responders, ...); nothing is retried.

Scenarios set the defaults of --clients and --resources:
  spread   C=64, R=10000 (little contention)
  hotspot  C=64, R=1     (every client wants the same resource)
  bundles  C=64, R=10000, --bundle 2: each reserve takes two resources of two
           placement keys, a bundle across shards (--one-key: of one key)
  bundle-hotspot
           C=16, R=8, --bundle 4: overlapping bundles across shards
  claim    C=64, R=2048  work shards in runs of 256: each client claims the next
           work shard of a run, checkpoints it --checkpoints times and completes
           it, until every work shard is done or D passes (a worker fleet).

It writes in tenant bench (--tenant to change it). When done it deletes what it
used — the resources, or the runs (cancelled first) — and prints what it
deleted; --keep leaves them for a look afterwards.

--echo also runs a plain NATS echo responder in-process on a private subject
and drives it with the same clients for the same duration, right after the
holdfast phase, and prints the ratio of holdfast requests/s to echo
requests/s: the share of a bare NATS round trip that Holdfast achieves.

In a cluster (the service advertises direct routing) each request goes straight
to its shard's owner, as the Go client sends it; --no-direct sends everything to
the public subjects instead, as clients of other languages do, so a front door
forwards two requests in three.`

const benchExitCodes = "Exit codes: 0 done, 1 setup failed, 2 usage error, 5 cannot connect.\n"

type benchConfig struct {
	cf        connFlags
	scenario  string
	clients   int
	resources int
	duration  time.Duration
	ttl       time.Duration
	echo      bool
	encoding  client.Encoding
	conns     int
	idPrefix  string
	progress  bool

	// A long run: --sample prints the server's memory, tables and disk every interval.
	sample     time.Duration
	metricsURL string
	dataDir    string
	// bystander is a second tenant writing on the hot shard beside the load: none of its
	// writes may be refused (a storm of failing attempts denies nobody).
	bystander string
	// checkpoints per claimed work shard (--scenario claim).
	checkpoints int
	// keep leaves the resources or runs in place instead of deleting them when done.
	keep bool
	// audit reads every granted lease back after the load (benchaudit.go).
	audit bool
	// noDirect sends the load to the public subjects even where the service routes
	// directly (benchroute.go).
	noDirect bool
	// byShard pins each client to one shard's resources and reports by shard (benchshard.go).
	byShard bool
	// bundle is the members per reserve: distinct resources, each its own placement key
	// (a bundle across shards), or with oneKey the members of one key.
	bundle int
	oneKey bool
}

// phase is the length of each measured phase: --duration is the whole run, so with
// --echo the holdfast and echo phases get half each.
func (c *benchConfig) phase() time.Duration {
	if c.echo {
		return c.duration / 2
	}
	return c.duration
}

// benchCmd is bench's command line.
type benchCmd struct {
	Scenario        string        `name:"scenario" default:"spread" enum:"spread,hotspot,bundles,bundle-hotspot,claim" help:"spread (C=64, R=10000), hotspot (C=64, R=1), bundles (C=64, R=10000, --bundle 2), bundle-hotspot (C=16, R=8, --bundle 4) or claim (C=64, R=2048 work shards)."`
	Checkpoints     int           `name:"checkpoints" default:"3" help:"Checkpoints per claimed work shard (--scenario claim)."`
	Clients         int           `name:"clients" default:"64" placeholder:"C" help:"Concurrent clients (default from --scenario)."`
	Resources       int           `name:"resources" default:"10000" placeholder:"R" help:"Resources (default from --scenario)."`
	Duration        time.Duration `name:"duration" default:"10s" placeholder:"D" help:"Length of the whole run (with --echo, half for each phase)."`
	TTL             time.Duration `name:"ttl" default:"10s" help:"TTL of each reservation (a cycle releases it at once)."`
	Echo            bool          `name:"echo" help:"Also measure a plain NATS echo responder at the same concurrency."`
	Encoding        string        `name:"encoding" default:"protobuf" enum:"protobuf,json" help:"Wire encoding: protobuf or json."`
	Conns           int           `name:"conns" default:"1" help:"NATS connections the clients share (client i uses connection i mod N)."`
	IDPrefix        string        `name:"id-prefix" default:"bench" help:"Prefix of the resource ids (<prefix>-r<i>)."`
	Sample          time.Duration `name:"sample" placeholder:"D" help:"Every D, print the server's RSS, heap, table fill and stream and disk size (0: off)."`
	MetricsURL      string        `name:"metrics-url" default:"http://127.0.0.1:9464/metrics" placeholder:"URL" help:"The server's Prometheus URL, read by --sample."`
	Data            string        `name:"data" placeholder:"DIR" help:"The server's data directory, whose size --sample prints (empty: not measured)."`
	BystanderTenant string        `name:"bystander-tenant" placeholder:"TENANT" help:"A second tenant that reserves and releases its own resource on the same shard as the first resource, counting every refusal."`
	Keep            bool          `name:"keep" help:"Leave the resources or runs the bench used (by default it deletes them when done)."`
	Audit           bool          `name:"audit" help:"After the load, read back every lease granted: each must be found, and each whose release was answered ok must read released (nothing acknowledged lost through a kill or a partition); a failure exits non-zero. Keeps one lease id per grant: for runs of minutes."`
	NoDirect        bool          `name:"no-direct" help:"Send every request to the public subject (clients of other languages), not straight to its shard's owner as the Go client does in a cluster."`
	ByShard         bool          `name:"by-shard" help:"Pin client i to the resources of shard i mod S and report each shard's requests, failures and latency (what a node's loss costs the shards it did not hold)."`
	Bundle          int           `name:"bundle" default:"1" placeholder:"N" help:"Members per reserve (1-16): N distinct resources, each its own placement key, so a bundle across shards; with --one-key, the N members of one key (R keys of N resources each)."`
	OneKey          bool          `name:"one-key" help:"With --bundle N: each reserve takes the N members of one placement key (one shard), for comparing with bundles across shards."`
	connFlags
}

func (benchCmd) Help() string { return benchAbout }

// bundleDefaults are a bundle scenario's resources, clients and members per reserve,
// where the flags do not say.
func (cfg *benchConfig) bundleDefaults(set map[string]bool, resources, clients, bundle int) {
	if !set["resources"] {
		cfg.resources = resources
	}
	if !set["clients"] {
		cfg.clients = clients
	}
	if !set["bundle"] {
		cfg.bundle = bundle
	}
}

// config checks the flags (set: the ones given) and applies the scenario's defaults.
func (b *benchCmd) config(e *env, set map[string]bool) (*benchConfig, error) {
	cfg := &benchConfig{progress: true, cf: b.connFlags, scenario: b.Scenario, checkpoints: b.Checkpoints,
		clients: b.Clients, resources: b.Resources, duration: b.Duration, ttl: b.TTL, echo: b.Echo, conns: b.Conns,
		idPrefix: b.IDPrefix, sample: b.Sample, metricsURL: b.MetricsURL, dataDir: b.Data, bystander: b.BystanderTenant,
		keep: b.Keep, noDirect: b.NoDirect, byShard: b.ByShard, audit: b.Audit, bundle: b.Bundle, oneKey: b.OneKey}
	if err := cfg.cf.validate(); err != nil {
		return nil, usageError(e, "%v", err)
	}
	if !set["tenant"] {
		// Its own tenant: the bench's objects and events stay out of the default one
		// (a later `watch --from-start` does not replay 10,000 bench resources).
		cfg.cf.Tenant = "bench"
	}
	switch cfg.scenario {
	case "spread":
		if !set["resources"] {
			cfg.resources = 10000
		}
	case "hotspot":
		if !set["resources"] {
			cfg.resources = 1
		}
	case "bundles": // two members of two keys: bundles across shards, little contention
		cfg.bundleDefaults(set, 10000, 64, 2)
	case "bundle-hotspot": // sixteen clients fighting for eight resources in bundles of four
		cfg.bundleDefaults(set, 8, 16, 4)
	case "claim":
		if !set["resources"] {
			cfg.resources = 2048
		}
		if cfg.checkpoints < 0 || cfg.checkpoints > 1000 {
			return nil, usageError(e, "--checkpoints must be 0-1000")
		}
	default:
		return nil, usageError(e, "unknown --scenario %q (want spread, hotspot, bundles, bundle-hotspot or claim)", cfg.scenario)
	}
	switch b.Encoding {
	case "protobuf":
		cfg.encoding = client.Protobuf
	case "json":
		cfg.encoding = client.JSON
	default:
		return nil, usageError(e, "unknown --encoding %q (want protobuf or json)", b.Encoding)
	}
	if p := cfg.problem(); p != "" {
		return nil, usageError(e, "%s", p)
	}
	return cfg, nil
}

// problem names what is wrong with the flags together ("" when nothing).
func (cfg *benchConfig) problem() string {
	switch {
	case cfg.clients < 1 || cfg.clients > 10000:
		return "--clients must be 1-10000"
	case cfg.resources < 1 || cfg.resources > 10_000_000:
		return "--resources must be 1-10000000"
	case cfg.duration <= 0 || cfg.duration > 24*time.Hour:
		return "--duration must be positive (at most 24h)"
	case cfg.ttl <= 0:
		return "--ttl must be positive"
	case cfg.conns < 1 || cfg.conns > cfg.clients:
		return "--conns must be 1-clients"
	case !client.ValidID(cfg.idPrefix + "-r0"):
		return fmt.Sprintf("invalid --id-prefix %q", cfg.idPrefix)
	case cfg.sample < 0:
		return "--sample must not be negative"
	case cfg.byShard && cfg.scenario != "spread":
		return "--by-shard needs --scenario spread"
	case cfg.bundle < 1 || cfg.bundle > 16:
		return "--bundle must be 1-16"
	case cfg.bundle > 1 && (cfg.byShard || cfg.scenario == "claim"):
		return "--bundle needs a scenario other than claim, without --by-shard"
	case cfg.oneKey && cfg.bundle == 1:
		return "--one-key needs --bundle 2 or more"
	case !cfg.oneKey && cfg.bundle > cfg.resources:
		return "--bundle must not exceed --resources"
	case cfg.audit && cfg.scenario == "claim":
		return "--audit reads back reserves: not with --scenario claim"
	case cfg.bystander != "" && (!client.ValidTenant(cfg.bystander) || cfg.bystander == cfg.cf.Tenant):
		return "--bystander-tenant must be a valid tenant other than --tenant"
	}
	return ""
}

func (b *benchCmd) Run(e *env, kctx *kong.Context) error {
	cfg, err := b.config(e, explicitFlags(kctx))
	if err != nil {
		return err
	}
	conns := make([]*nats.Conn, cfg.conns)
	for i := range conns {
		nc, err := cfg.cf.dial("bench", nats.Timeout(min(cfg.cf.Timeout, 5*time.Second)))
		if err != nil {
			e.errorf("%v", err)
			return exitCode(exitConnect)
		}
		defer nc.Close()
		conns[i] = nc
	}
	rep, err := runBench(e, cfg, conns)
	if err != nil {
		e.errorf("bench: %v", err)
		return exitCode(exitDomain)
	}
	if cfg.cf.JSON {
		b, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintf(e.stdout, "%s\n", b)
	} else {
		rep.print(e.stdout)
	}
	if rep.Audit != nil {
		if err := rep.Audit.failed(); err != nil {
			e.errorf("bench: %v", err)
			return exitCode(exitDomain)
		}
	}
	return nil
}

func newBenchReport(cfg *benchConfig) *benchReport {
	return &benchReport{Scenario: cfg.scenario, Clients: cfg.clients, Resources: cfg.resources, Duration: cfg.duration,
		Encoding: cfg.encoding.String(), Conns: cfg.conns, Tenant: cfg.cf.Tenant, RunID: client.NewOperationID()[:10],
		Bundle: cfg.bundle, OneKey: cfg.oneKey}
}

// benchReport is the outcome of a bench run (printed, or as JSON with --json).
type benchReport struct {
	Scenario  string        `json:"scenario"`
	Clients   int           `json:"clients"`
	Resources int           `json:"resources"`
	Duration  time.Duration `json:"duration_ns"`
	Encoding  string        `json:"encoding"`
	Conns     int           `json:"conns"`
	Routing   string        `json:"routing"` // direct (to each shard's owner) or public
	// Bundle is the members per reserve (--bundle), OneKey whether they share a key.
	Bundle   int          `json:"bundle"`
	OneKey   bool         `json:"one_key,omitempty"`
	Setup    setupReport  `json:"setup"`
	Holdfast phaseReport  `json:"holdfast"`
	Echo     *phaseReport `json:"echo,omitempty"`
	// Ratio is holdfast requests/s divided by echo requests/s (0 without
	// --echo).
	Ratio float64 `json:"ratio_holdfast_to_echo_requests,omitempty"`
	// Samples are the --sample lines; Bystander what the second tenant's writes got.
	Samples   []benchSample     `json:"samples,omitempty"`
	Bystander map[string]uint64 `json:"bystander_codes,omitempty"`
	// Shards is each shard's part, with --by-shard.
	Shards []shardReport `json:"shards,omitempty"`
	// Audit is what --audit read back.
	Audit *auditReport `json:"audit,omitempty"`
	// Cleanup is what the deletes after the run did; nil with --keep (Kept).
	Cleanup *cleanupReport `json:"cleanup,omitempty"`
	Kept    bool           `json:"kept,omitempty"`
	Tenant  string         `json:"tenant"`
	// RunID names this run's holders, operation ids and (claim) runs.
	RunID string `json:"run_id"`
}

type setupReport struct {
	Created int           `json:"created"`
	Existed int           `json:"existed"`
	Elapsed time.Duration `json:"elapsed_ns"`
}

type phaseReport struct {
	Elapsed    time.Duration `json:"elapsed_ns"`
	AttemptsPS float64       `json:"attempts_per_s,omitempty"`
	GrantsPS   float64       `json:"grants_per_s,omitempty"`
	RequestsPS float64       `json:"requests_per_s"`
	Cycles     uint64        `json:"cycles,omitempty"`
	// ClientGrants is the fewest and the most reserves any one client was granted: under
	// a hotspot, whether some holder starved.
	ClientGrants [2]uint64                    `json:"client_grants,omitempty"`
	Verbs        []verbReport                 `json:"verbs"`
	Codes        map[string]map[string]uint64 `json:"codes,omitempty"`
}

type verbReport struct {
	Verb  string        `json:"verb"`
	Count uint64        `json:"count"`
	P50   time.Duration `json:"p50_ns"`
	P99   time.Duration `json:"p99_ns"`
	P999  time.Duration `json:"p999_ns"`
	Max   time.Duration `json:"max_ns"`
	Mean  time.Duration `json:"mean_ns"`
}

func verbOf(name string, h *histogram) verbReport {
	return verbReport{Verb: name, Count: h.count(), P50: h.quantile(0.50), P99: h.quantile(0.99), P999: h.quantile(0.999),
		Max: time.Duration(h.max), Mean: h.mean()}
}

func (r *benchReport) print(w io.Writer) {
	fmt.Fprintf(w, "holdfast bench: scenario=%s clients=%d resources=%d duration=%s encoding=%s conns=%d routing=%s\n",
		r.Scenario, r.Clients, r.Resources, r.Duration, r.Encoding, r.Conns, r.Routing)
	switch {
	case r.Bundle > 1 && r.OneKey:
		fmt.Fprintf(w, "bundles: %d members of one placement key each\n", r.Bundle)
	case r.Bundle > 1:
		fmt.Fprintf(w, "bundles: %d members of distinct placement keys each (across shards)\n", r.Bundle)
	}
	fmt.Fprintf(w, "setup: %d resource(s) ready in %s (%d created, %d existed)\n",
		r.Setup.Created+r.Setup.Existed, r.Setup.Elapsed.Round(time.Millisecond), r.Setup.Created, r.Setup.Existed)
	h := r.Holdfast
	fmt.Fprintf(w, "holdfast: %s, %d cycles\n", h.Elapsed.Round(time.Millisecond), h.Cycles)
	if r.Scenario == "claim" {
		fmt.Fprintf(w, "  claims/s    %10.1f  (claim requests)\n", h.AttemptsPS)
		fmt.Fprintf(w, "  granted/s   %10.1f  (claims answered ok)\n", h.GrantsPS)
		fmt.Fprintf(w, "  requests/s  %10.1f  (claim + checkpoint + complete requests)\n", h.RequestsPS)
		fmt.Fprintf(w, "  work shards completed: %d of %d\n", h.Cycles, r.Resources)
	} else {
		fmt.Fprintf(w, "  attempts/s  %10.1f  (reserve requests)\n", h.AttemptsPS)
		fmt.Fprintf(w, "  grants/s    %10.1f  (reserves answered ok)\n", h.GrantsPS)
		fmt.Fprintf(w, "  requests/s  %10.1f  (reserve + release requests)\n", h.RequestsPS)
		fmt.Fprintf(w, "  per client  %10d  to %d grants (the fewest and the most any client got)\n", h.ClientGrants[0], h.ClientGrants[1])
	}
	printVerbs(w, h.Verbs)
	full := false
	for _, verb := range []string{"reserve", "release", "claim", "checkpoint", "complete"} {
		if codes := h.Codes[verb]; len(codes) > 0 {
			fmt.Fprintf(w, "  codes %-8s %s\n", verb+":", formatCodes(codes))
			full = full || codes["operation_table_full"] > 0
		}
	}
	if full {
		// Not a fault of the run: every committed write is remembered for the dedupe
		// window, so a shard's table fills at (capacity / write rate).
		fmt.Fprintf(w, "  note: a shard's operation table filled (every committed write, resource_busy\n"+
			"  included, is remembered for --dedupe-window); size --max-operations and\n"+
			"  --dedupe-window for the sustained write rate (docs/benchmarks.md)\n")
	}
	if r.Bystander != nil {
		fmt.Fprintf(w, "  bystander tenant: %s\n", formatCodes(r.Bystander))
	}
	if r.Shards != nil {
		printShards(w, r.Shards)
	}
	if r.Echo != nil {
		fmt.Fprintf(w, "echo: %s\n", r.Echo.Elapsed.Round(time.Millisecond))
		fmt.Fprintf(w, "  requests/s  %10.1f  (echo requests)\n", r.Echo.RequestsPS)
		printVerbs(w, r.Echo.Verbs)
		if codes := r.Echo.Codes["echo"]; len(codes) > 0 && !(len(codes) == 1 && codes["ok"] > 0) {
			fmt.Fprintf(w, "  codes echo:    %s\n", formatCodes(codes))
		}
		fmt.Fprintf(w, "ratio: holdfast requests/s / echo requests/s = %.3f\n", r.Ratio)
	}
	if r.Audit != nil {
		r.Audit.print(w)
	}
	what := "resource(s)"
	if r.Scenario == "claim" {
		what = "run(s)"
	}
	switch {
	case r.Kept:
		fmt.Fprintf(w, "kept: the %s stay in tenant %s (--keep)\n", what, r.Tenant)
	case r.Cleanup != nil:
		r.Cleanup.print(w, what)
	}
}

func printVerbs(w io.Writer, verbs []verbReport) {
	fmt.Fprintf(w, "  %-8s %10s %9s %9s %9s %9s\n", "verb", "count", "p50", "p99", "p999", "max")
	for _, v := range verbs {
		fmt.Fprintf(w, "  %-8s %10d %9s %9s %9s %9s\n", v.Verb, v.Count, fmtDur(v.P50), fmtDur(v.P99), fmtDur(v.P999), fmtDur(v.Max))
	}
}

// formatCodes renders code counts as "ok=120 resource_busy=3", ok first,
// then by count.
func formatCodes(codes map[string]uint64) string {
	keys := make([]string, 0, len(codes))
	for k := range codes {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if (keys[i] == "ok") != (keys[j] == "ok") {
			return keys[i] == "ok"
		}
		if codes[keys[i]] != codes[keys[j]] {
			return codes[keys[i]] > codes[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.FormatUint(codes[k], 10)
	}
	return strings.Join(parts, " ")
}

// fmtDur renders a latency with three significant digits: 812µs, 2.31ms, 1.20s.
func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "0"
	case d < time.Microsecond:
		return strconv.FormatInt(int64(d), 10) + "ns"
	case d < time.Millisecond:
		return strconv.FormatFloat(float64(d)/1e3, 'f', precision(float64(d)/1e3), 64) + "µs"
	case d < time.Second:
		return strconv.FormatFloat(float64(d)/1e6, 'f', precision(float64(d)/1e6), 64) + "ms"
	default:
		return strconv.FormatFloat(float64(d)/1e9, 'f', precision(float64(d)/1e9), 64) + "s"
	}
}

func precision(v float64) int {
	switch {
	case v >= 100:
		return 0
	case v >= 10:
		return 1
	default:
		return 2
	}
}

// liveCounters feed the progress line.
type liveCounters struct {
	reserves, grants, releases, failures atomic.Uint64
	tableFull, bystanderRefused          atomic.Uint64
}

// benchWorker is one client of the load phase. It reuses its request
// messages, encode buffer and reply message across cycles.
type benchWorker struct {
	id       int
	nc       *nats.Conn
	enc      client.Encoding
	header   nats.Header
	route    *benchRoute // nil: the public subjects
	timeout  time.Duration
	rng      *rand.Rand
	holder   string
	opPrefix []byte
	seq      uint64

	members    []messages.Member // --bundle: the reserve's members
	oneKey     bool
	reserveReq messages.ReserveRequest
	releaseReq messages.ReleaseRequest
	reply      messages.Reply
	msg        nats.Msg
	buf        []byte
	opBuf      []byte

	reserveLat, releaseLat histogram
	reserveCodes           map[string]uint64
	releaseCodes           map[string]uint64
	cycles                 uint64
	grants                 []grant // with --audit: every lease granted, and whether its release was answered ok
	audit                  bool
}

// newBenchWorker is a client of a load phase: holder, operation id prefix, reusable requests.
func newBenchWorker(cfg *benchConfig, nc *nats.Conn, header nats.Header, holder, opPrefix string, rng *rand.Rand) *benchWorker {
	w := &benchWorker{nc: nc, enc: cfg.encoding, header: header, timeout: cfg.cf.Timeout, rng: rng,
		holder: holder, opPrefix: []byte(opPrefix), reserveCodes: map[string]uint64{}, releaseCodes: map[string]uint64{}}
	w.members, w.oneKey = make([]messages.Member, cfg.bundle), cfg.oneKey
	w.reserveReq = messages.ReserveRequest{HolderId: holder, TtlMs: uint64(cfg.ttl.Milliseconds())}
	for i := range w.members {
		w.reserveReq.Members = append(w.reserveReq.Members, &w.members[i])
	}
	w.releaseReq.HolderId = holder
	w.audit = cfg.audit
	return w
}

func (w *benchWorker) nextOp() string {
	w.seq++
	w.opBuf = strconv.AppendUint(append(w.opBuf[:0], w.opPrefix...), w.seq, 10)
	return string(w.opBuf)
}

var protoMarshal = proto.MarshalOptions{}
var protoUnmarshal = proto.UnmarshalOptions{DiscardUnknown: true}

// request sends one request and returns its code: the reply's code, or
// transport:<kind> when no reply could be had.
func (w *benchWorker) request(subject string, header nats.Header, req proto.Message) (string, time.Duration) {
	var err error
	if w.enc == client.Protobuf {
		w.buf, err = protoMarshal.MarshalAppend(w.buf[:0], req)
	} else {
		w.buf, err = messages.MarshalJSON(req)
	}
	if err != nil {
		return "client:encode_error", 0
	}
	w.msg.Subject = subject
	w.msg.Data = w.buf
	w.msg.Header = header
	start := time.Now()
	resp, err := w.nc.RequestMsg(&w.msg, w.timeout)
	d := time.Since(start)
	if err != nil {
		return transportCodeOf(err), d
	}
	if w.enc == client.Protobuf && resp.Header.Get(messages.HeaderContentType) == messages.ContentTypeProtobuf {
		err = protoUnmarshal.Unmarshal(resp.Data, &w.reply)
	} else {
		err = messages.UnmarshalJSONTolerant(resp.Data, &w.reply)
	}
	if err != nil {
		if code := resp.Header.Get("Nats-Service-Error"); code != "" && len(resp.Data) == 0 {
			return code, d
		}
		return "client:bad_reply", d
	}
	return w.reply.Code, d
}

func transportCodeOf(err error) string {
	switch {
	case errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return "transport:timeout"
	case errors.Is(err, nats.ErrNoResponders):
		return "transport:no_responders"
	default:
		return "transport:error"
	}
}

// cycle reserves a random resource and, when granted, releases it.
// send sends a request straight to its shard's owner (direct, with the direct send's
// header) when the route gives one, and on the public subject when not, or when nobody
// listens there (the shard is moving), as the Go client does; the time is the whole.
func (w *benchWorker) send(public, direct string, directHeader nats.Header, req proto.Message) (string, time.Duration) {
	if direct == "" {
		return w.request(public, w.header, req)
	}
	code, d := w.request(direct, directHeader, req)
	if code != "transport:no_responders" {
		return code, d
	}
	code, d2 := w.request(public, w.header, req)
	return code, d + d2
}

// pick chooses the next reserve's members: one resource, N distinct ones, or (oneKey) the
// N members of one key, which resources lists together.
func (w *benchWorker) pick(resources []string) {
	n := len(w.members)
	if w.oneKey {
		g := w.rng.IntN(len(resources) / n)
		for j := range w.members {
			w.members[j].ResourceId = resources[g*n+j]
		}
		return
	}
	for j := range w.members {
		for {
			id := resources[w.rng.IntN(len(resources))]
			if !w.picked(j, id) {
				w.members[j].ResourceId = id
				break
			}
		}
	}
}

// picked reports whether one of the first j members is id.
func (w *benchWorker) picked(j int, id string) bool {
	for i := range j {
		if w.members[i].ResourceId == id {
			return true
		}
	}
	return false
}

func (w *benchWorker) cycle(subjReserve, subjRelease string, resources []string, live *liveCounters) {
	w.pick(resources)
	w.reserveReq.OperationId = w.nextOp()
	direct, h := w.route.to(&w.reserveReq)
	code, d := w.send(subjReserve, direct, h, &w.reserveReq)
	w.reserveLat.record(d)
	w.reserveCodes[code]++
	live.reserves.Add(1)
	w.cycles++
	if code != messages.CodeOK {
		if code != messages.CodeResourceBusy {
			live.failures.Add(1)
		}
		if strings.HasSuffix(code, "_table_full") {
			live.tableFull.Add(1)
		}
		return
	}
	live.grants.Add(1)
	w.releaseReq.LeaseId = w.reply.GetLease().GetLeaseId()
	w.releaseReq.LeaseEpoch = w.reply.GetLease().GetLeaseEpoch()
	w.releaseReq.OperationId = w.nextOp()
	direct, h = w.route.to(&w.releaseReq)
	code, d = w.send(subjRelease, direct, h, &w.releaseReq)
	w.releaseLat.record(d)
	w.releaseCodes[code]++
	live.releases.Add(1)
	if w.audit {
		w.grants = append(w.grants, grant{lease: w.releaseReq.LeaseId, released: code == messages.CodeOK})
	}
	if code != messages.CodeOK {
		live.failures.Add(1)
		if strings.HasSuffix(code, "_table_full") {
			live.tableFull.Add(1)
		}
	}
}

func runBench(e *env, cfg *benchConfig, conns []*nats.Conn) (*benchReport, error) {
	if cfg.scenario == "claim" {
		return runClaimBench(e, cfg, conns)
	}
	ctx := e.ctx
	rep := newBenchReport(cfg)
	runID := rep.RunID
	resources := benchResources(cfg)
	// Setup: create the resources, idempotently (already_exists is fine).
	fmt.Fprintf(e.stderr, "bench: creating %d resources with %d clients...\n", len(resources), cfg.clients)
	setup, err := benchSetup(ctx, cfg, conns, resources)
	if err != nil {
		return nil, err
	}
	rep.Setup = setup

	// Holdfast phase.
	subjReserve := client.Subject(cfg.cf.Prefix, cfg.cf.Tenant, "lease", "reserve")
	subjRelease := client.Subject(cfg.cf.Prefix, cfg.cf.Tenant, "lease", "release")
	var header nats.Header
	if cfg.encoding == client.Protobuf {
		header = nats.Header{messages.HeaderContentType: []string{messages.ContentTypeProtobuf}}
	}
	var route *benchRoute
	if !cfg.noDirect {
		route = newBenchRoute(conns[0], cfg, header, subjReserve, subjRelease)
	}
	rep.Routing = "public"
	if route != nil {
		rep.Routing = "direct"
	}
	pinned, pinnedShard, shards, err := pinBench(cfg, conns[0], route, resources)
	if err != nil {
		return nil, err
	}
	workers := benchWorkers(cfg, conns, header, runID, route)
	var live liveCounters
	var by *bystander
	if cfg.bystander != "" {
		if by, err = newBystander(ctx, cfg, conns[0], resources[0], runID, header); err != nil {
			return nil, err
		}
	}
	stop := startProgress(e, cfg, "holdfast", &live)
	stopSampling := startSampling(e, cfg, conns[0], &live)
	elapsed := runCycles(ctx, cfg, workers, by, func(i int) []string {
		if pinned != nil {
			return pinned[i]
		}
		return resources
	}, [2]string{subjReserve, subjRelease}, &live)
	rep.Samples = stopSampling()
	stop()
	if by != nil {
		rep.Bystander = by.codes
	}
	if pinned != nil {
		rep.Shards = shardReports(workers, pinnedShard, shards)
	}
	rep.Holdfast = holdfastPhase(workers, elapsed)
	if err := finishBench(e, cfg, conns, rep, workers, resources, by); err != nil {
		return nil, err
	}
	return rep, nil
}

// runCycles runs the workers' reserve/release cycles over the resources each is given
// (subj: the two verbs' subjects), and the bystander beside them, for the phase.
func runCycles(ctx context.Context, cfg *benchConfig, workers []*benchWorker, by *bystander, mine func(int) []string, subj [2]string, live *liveCounters) time.Duration {
	loops := len(workers)
	if by != nil {
		loops++
	}
	return runPhase(ctx, cfg.phase(), loops, func(i int, deadline time.Time) {
		if i == len(workers) {
			by.run(ctx, deadline, live)
			return
		}
		w, res := workers[i], mine(i)
		for ctx.Err() == nil && time.Now().Before(deadline) {
			w.cycle(subj[0], subj[1], res, live)
		}
	})
}

// benchWorkers makes the run's clients, one per --clients, over the connections in turn.
func benchWorkers(cfg *benchConfig, conns []*nats.Conn, header nats.Header, runID string, route *benchRoute) []*benchWorker {
	workers := make([]*benchWorker, cfg.clients)
	for i := range workers {
		workers[i] = newBenchWorker(cfg, conns[i%len(conns)], header, "bench-"+runID+"-"+strconv.Itoa(i),
			"b"+runID+"-"+strconv.Itoa(i)+"-", rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(i))))
		workers[i].id = i
		workers[i].route = route
	}
	return workers
}

// benchResources names the resources a run cycles over: R of them, or with --one-key R
// placement keys of N members each, listed key by key.
func benchResources(cfg *benchConfig) []string {
	resources := make([]string, cfg.resources)
	for i := range resources {
		resources[i] = cfg.idPrefix + "-r" + strconv.Itoa(i)
	}
	if !cfg.oneKey {
		return resources
	}
	keyed := make([]string, 0, len(resources)*cfg.bundle)
	for _, k := range resources {
		for j := 0; j < cfg.bundle; j++ {
			keyed = append(keyed, k+"/m"+strconv.Itoa(j))
		}
	}
	return keyed
}

// startSampling starts --sample's sampler (nothing without it); the returned func stops
// it and gives its samples.
func startSampling(e *env, cfg *benchConfig, nc *nats.Conn, live *liveCounters) func() []benchSample {
	if cfg.sample <= 0 {
		return func() []benchSample { return nil }
	}
	out := e.stdout
	if cfg.cf.JSON {
		out = e.stderr // stdout carries the one JSON report
	}
	smp := newSampler(cfg, nc, live, out)
	sctx, cancel := context.WithCancel(e.ctx)
	var sampling sync.WaitGroup
	sampling.Go(func() { smp.run(sctx) })
	return func() []benchSample {
		cancel()
		sampling.Wait()
		return smp.result()
	}
}

// holdfastPhase sums the workers' counts into the run's report.
func holdfastPhase(workers []*benchWorker, elapsed time.Duration) phaseReport {
	var resLat, relLat histogram
	codes := map[string]map[string]uint64{"reserve": {}, "release": {}}
	var cycles uint64
	fewest, most := ^uint64(0), uint64(0)
	for _, w := range workers {
		fewest, most = min(fewest, w.reserveCodes[messages.CodeOK]), max(most, w.reserveCodes[messages.CodeOK])
		resLat.merge(&w.reserveLat)
		relLat.merge(&w.releaseLat)
		for k, v := range w.reserveCodes {
			codes["reserve"][k] += v
		}
		for k, v := range w.releaseCodes {
			codes["release"][k] += v
		}
		cycles += w.cycles
	}
	secs := elapsed.Seconds()
	return phaseReport{
		Elapsed:      elapsed,
		AttemptsPS:   float64(resLat.count()) / secs,
		GrantsPS:     float64(codes["reserve"]["ok"]) / secs,
		RequestsPS:   float64(resLat.count()+relLat.count()) / secs,
		Cycles:       cycles,
		ClientGrants: [2]uint64{fewest, most},
		Verbs:        []verbReport{verbOf("reserve", &resLat), verbOf("release", &relLat)},
		Codes:        codes,
	}
}

// finishBench runs what follows the load: the echo floor, the audit, the clean-up.
func finishBench(e *env, cfg *benchConfig, conns []*nats.Conn, rep *benchReport, workers []*benchWorker, resources []string, by *bystander) error {
	ctx, runID := e.ctx, rep.RunID
	var err error
	if cfg.echo && ctx.Err() == nil {
		sample := workers[0].buf
		echo, err := benchEcho(ctx, e, cfg, conns, runID, sample)
		if err != nil {
			return err
		}
		rep.Echo = echo
		if echo.RequestsPS > 0 {
			rep.Ratio = rep.Holdfast.RequestsPS / echo.RequestsPS
		}
	}
	if cfg.audit {
		if rep.Audit, err = auditGrants(ctx, cfg, conns, workers); err != nil {
			return err
		}
	}
	if rep.Kept = cfg.keep; !cfg.keep {
		c := benchCleanup(ctx, cfg, conns, cfg.cf.Tenant, resources, deleteResource)
		if by != nil {
			c.add(benchCleanup(ctx, cfg, conns, cfg.bystander, by.res, deleteResource))
		}
		rep.Cleanup = &c
	}
	return nil
}

// runPhase runs n load loops until deadline (or ctx ends) and returns the
// time from start until the last loop returned.
func runPhase(ctx context.Context, d time.Duration, n int, loop func(i int, deadline time.Time)) time.Duration {
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { loop(i, deadline) })
	}
	wg.Wait()
	return time.Since(start)
}

// benchSetup creates the resources with cfg.clients concurrent SDK calls.
func benchSetup(ctx context.Context, cfg *benchConfig, conns []*nats.Conn, resources []string) (setupReport, error) {
	start := time.Now()
	clients, err := benchClients(cfg, conns, cfg.cf.Tenant)
	if err != nil {
		return setupReport{}, err
	}
	var created, existed atomic.Int64
	err = forEachID(ctx, cfg.clients, clients, resources, func(cl *client.Client, id string) error {
		res, err := cl.CreateResource(ctx, id)
		if err == nil && res.Code != messages.CodeOK && res.Code != messages.CodeAlreadyExists {
			err = res.Err()
		}
		switch {
		case err != nil:
			return fmt.Errorf("create %s: %w", id, err)
		case res.Code == messages.CodeOK:
			created.Add(1)
		default:
			existed.Add(1)
		}
		return nil
	})
	return setupReport{Created: int(created.Load()), Existed: int(existed.Load()), Elapsed: time.Since(start)}, err
}

// benchEcho measures a plain NATS echo responder, started in-process on a
// private subject over its own connection, at the same concurrency, with
// payloads of the size of a reserve request.
func benchEcho(ctx context.Context, e *env, cfg *benchConfig, conns []*nats.Conn, runID string, sample []byte) (*phaseReport, error) {
	rc, err := cfg.cf.dial("bench echo responder")
	if err != nil {
		return nil, fmt.Errorf("echo responder: %w", err)
	}
	defer rc.Close()
	subject := "_HOLDFAST_BENCH." + runID + ".echo"
	sub, err := rc.Subscribe(subject, func(m *nats.Msg) { _ = m.Respond(m.Data) })
	if err != nil {
		return nil, fmt.Errorf("echo responder: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	_ = sub.SetPendingLimits(-1, -1)
	if err := rc.Flush(); err != nil {
		return nil, fmt.Errorf("echo responder: %w", err)
	}
	payload := append([]byte(nil), sample...)
	if len(payload) == 0 {
		payload = make([]byte, 96)
	}
	lats := make([]histogram, cfg.clients)
	codes := make([]map[string]uint64, cfg.clients)
	var live liveCounters
	stop := startProgress(e, cfg, "echo", &live)
	elapsed := runPhase(ctx, cfg.phase(), cfg.clients, func(i int, deadline time.Time) {
		nc := conns[i%len(conns)]
		msg := nats.Msg{Subject: subject, Data: payload}
		codes[i] = map[string]uint64{}
		for ctx.Err() == nil && time.Now().Before(deadline) {
			start := time.Now()
			_, err := nc.RequestMsg(&msg, cfg.cf.Timeout)
			lats[i].record(time.Since(start))
			live.reserves.Add(1)
			if err != nil {
				codes[i][transportCodeOf(err)]++
				live.failures.Add(1)
				continue
			}
			codes[i]["ok"]++
		}
	})
	stop()
	var all histogram
	merged := map[string]uint64{}
	for i := range lats {
		all.merge(&lats[i])
		for k, v := range codes[i] {
			merged[k] += v
		}
	}
	return &phaseReport{
		Elapsed:    elapsed,
		RequestsPS: float64(all.count()) / elapsed.Seconds(),
		Verbs:      []verbReport{verbOf("echo", &all)},
		Codes:      map[string]map[string]uint64{"echo": merged},
	}, nil
}

// startProgress prints a progress line on stderr once a second until the
// returned stop is called: rewritten in place on a terminal, one line per
// second otherwise.
func startProgress(e *env, cfg *benchConfig, phase string, live *liveCounters) (stop func()) {
	if !cfg.progress {
		return func() {}
	}
	tty := false
	if f, ok := e.stderr.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var lastRes, lastGr, lastRel, lastT = uint64(0), uint64(0), uint64(0), start
		printed := false
		for {
			select {
			case <-done:
				if tty && printed {
					fmt.Fprintln(e.stderr)
				}
				return
			case now := <-t.C:
				res, gr, rel := live.reserves.Load(), live.grants.Load(), live.releases.Load()
				dt := now.Sub(lastT).Seconds()
				var line string
				if phase == "echo" {
					line = fmt.Sprintf("bench [echo %3.0fs] %8.0f req/s  errors %d",
						now.Sub(start).Seconds(), float64(res-lastRes)/dt, live.failures.Load())
				} else {
					line = fmt.Sprintf("bench [holdfast %3.0fs] reserve %7.0f/s  grants %7.0f/s  release %7.0f/s  errors %d",
						now.Sub(start).Seconds(), float64(res-lastRes)/dt, float64(gr-lastGr)/dt, float64(rel-lastRel)/dt, live.failures.Load())
				}
				if tty {
					fmt.Fprintf(e.stderr, "\r%-100s", line)
				} else {
					fmt.Fprintln(e.stderr, line)
				}
				printed = true
				lastRes, lastGr, lastRel, lastT = res, gr, rel, now
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
