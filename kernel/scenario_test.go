package kernel

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/holdfast/holdfast/contract"
)

// TestScenarios runs the scenario files in testdata/: one command per directive, the
// expected result under it, invariants checked after every step. Regenerate expectations
// after a deliberate change with `go test ./kernel -run Scenarios -rewrite` and read the
// diff.
func TestScenarios(t *testing.T) {
	seen := map[Verb]map[Code]bool{}
	defer func() {
		if t.Failed() {
			return
		}
		// Every domain code of every verb appears in some scenario, and so does every
		// rejection the kernel itself decides.
		for v := contract.VerbCreateResource; v < contract.VerbCount; v++ {
			// The writes and the reads of one shard; a listing's parts are gathered by
			// the bridge and have no domain codes.
			if !v.IsWrite() && !(v.IsRead() && (v.Info().Target == contract.TargetObject || v.Info().Target == contract.TargetLease)) {
				continue
			}
			for _, c := range append([]Code{contract.CodeOK}, v.Info().Codes...) {
				if !seen[v][c] {
					t.Errorf("no scenario shows %s answering %s", v, c)
				}
			}
		}
		for _, c := range []Code{contract.CodeInvalidRequest, contract.CodeDuplicateMember, contract.CodeBundleTooLarge, contract.CodeTTLOutOfRange,
			contract.CodeCrossShard, contract.CodeSlotOverflow, contract.CodeOperationConflict, contract.CodeOperationTableFull} {
			found := false
			for v := range seen {
				found = found || seen[v][c]
			}
			if !found {
				t.Errorf("no scenario shows the rejection %s", c)
			}
		}
	}()
	datadriven.Walk(t, "testdata/scenarios", func(t *testing.T, path string) {
		var s *scenario
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd == "new" {
				s = newScenario(t, d)
				s.seen = seen
				return "ok"
			}
			if s == nil {
				t.Fatalf("%s: a scenario starts with 'new'", d.Pos)
			}
			return s.run(t, d)
		})
	})
}

// scenario drives a kernel the way the shard runtime does: validation and the retry
// cache before sequencing, consecutive lsns, slots that never go back.
type scenario struct {
	cfg  Config
	k    *Kernel
	slot uint64
	ops  int
	out  Output
	seen map[Verb]map[Code]bool
}

func newScenario(t *testing.T, d *datadriven.TestData) *scenario {
	cfg := DefaultConfig()
	cfg.SlotMillis = 100
	cfg.DedupeWindowSlots = 100
	cfg.HistoryWindowSlots = 50
	cfg.MaxRangeValues = 1 << 20
	parseConfig(t, d, &cfg)
	k, err := New(cfg)
	if err != nil {
		t.Fatalf("%s: %v", d.Pos, err)
	}
	return &scenario{cfg: cfg, k: k}
}

// parseConfig sets the settings a 'new' or 'configure' directive names.
func parseConfig(t *testing.T, d *datadriven.TestData, cfg *Config) {
	for _, a := range d.CmdArgs {
		if a.Key == "slot" {
			continue // the step's clock, not a setting
		}
		v, err := strconv.ParseUint(a.SingleVal(t), 10, 64)
		if err != nil {
			t.Fatalf("%s: %s: %v", d.Pos, a.Key, err)
		}
		switch a.Key {
		case "shard":
			cfg.Shard = uint32(v)
		case "slot-ms":
			cfg.SlotMillis = v
		case "max-ttl-ms":
			cfg.MaxTTLMillis = v
		case "dedupe":
			cfg.DedupeWindowSlots = v
		case "history":
			cfg.HistoryWindowSlots = v
		case "max-resources":
			cfg.MaxResources = int(v)
		case "max-pools":
			cfg.MaxPools = int(v)
		case "max-ranges":
			cfg.MaxRanges = int(v)
		case "max-leases":
			cfg.MaxLeases = int(v)
		case "max-members":
			cfg.MaxMembers = int(v)
		case "max-ops":
			cfg.MaxOperations = int(v)
		case "max-expirations":
			cfg.MaxExpirations = int(v)
		case "max-bundle":
			cfg.MaxBundle = int(v)
		case "max-range-values":
			cfg.MaxRangeValues = int(v)
		case "max-runs":
			cfg.MaxRuns = int(v)
		case "max-work":
			cfg.MaxWork = int(v)
		case "version":
			cfg.Version = v
		default:
			t.Fatalf("%s: unknown config %q", d.Pos, a.Key)
		}
	}
}

var writeVerbs = map[string]Verb{
	"create-resource": contract.VerbCreateResource, "create-pool": contract.VerbCreatePool, "create-range": contract.VerbCreateRange,
	"reserve": contract.VerbReserve, "activate": contract.VerbActivate, "renew": contract.VerbRenew, "release": contract.VerbRelease,
	"revoke": contract.VerbRevoke, "reclaim": contract.VerbReclaim,
	"create-run": contract.VerbCreateRun, "register-run": contract.VerbRegisterRun, "complete-run": contract.VerbCompleteRun,
	"fail-run": contract.VerbFailRun, "cancel-run": contract.VerbCancelRun, "checkpoint": contract.VerbCheckpoint,
	"complete-work": contract.VerbCompleteWork, "park": contract.VerbParkWork, "unpark": contract.VerbUnparkWork,
	"split-replace": contract.VerbSplitReplace, "split-residual": contract.VerbSplitResidual,
	"delete-resource": contract.VerbDeleteResource, "delete-pool": contract.VerbDeletePool,
	"delete-range": contract.VerbDeleteRange, "delete-run": contract.VerbDeleteRun,
	"range-release": contract.VerbReleaseValue, "range-revoke": contract.VerbRevokeValue,
	"range-reclaim": contract.VerbReclaimValue, "exclude": contract.VerbExclude, "include": contract.VerbInclude,
	"resize-range": contract.VerbResizeRange, "resize-pool": contract.VerbResizePool, "consume": contract.VerbConsume,
	"import": contract.VerbImport, "release-all": contract.VerbReleaseAll, "revoke-all": contract.VerbRevokeAll,
}

func (s *scenario) run(t *testing.T, d *datadriven.TestData) string {
	if d.HasArg("slot") {
		var slot uint64
		d.ScanArgs(t, "slot", &slot)
		if slot < s.slot {
			t.Fatalf("%s: slot %d goes back from %d", d.Pos, slot, s.slot)
		}
		s.slot = slot
	}
	tenant := "t1"
	d.MaybeScanArgs(t, "tenant", &tenant)
	var res string
	if verb, ok := writeVerbs[d.Cmd]; ok {
		res = s.write(t, d, verb, tenant)
	} else {
		res = s.other(t, d, tenant)
	}
	if err := s.k.CheckInvariants(); err != nil {
		t.Fatalf("%s: invariant broken: %v", d.Pos, err)
	}
	return res
}

func (s *scenario) write(t *testing.T, d *datadriven.TestData, verb Verb, tenant string) string {
	c := &Command{Verb: verb, Tenant: tenant}
	if !d.MaybeScanArgs(t, "op", &c.OperationID) {
		s.ops++
		c.OperationID = fmt.Sprintf("op-%d", s.ops)
	}
	d.MaybeScanArgs(t, "id", &c.ObjectID)
	d.MaybeScanArgs(t, "capacity", &c.Capacity)
	d.MaybeScanArgs(t, "first", &c.First)
	d.MaybeScanArgs(t, "last", &c.Last)
	d.MaybeScanArgs(t, "holder", &c.HolderID)
	d.MaybeScanArgs(t, "ttl", &c.TTLMillis)
	d.MaybeScanArgs(t, "keepalive", &c.KeepAliveMillis)
	d.MaybeScanArgs(t, "lease", &c.LeaseLSN)
	d.MaybeScanArgs(t, "epoch", &c.Epoch)
	c.Activate = d.HasArg("activate")
	if d.HasArg("strategy") {
		var name string
		d.ScanArgs(t, "strategy", &name)
		st, ok := ParseStrategy(name)
		if !ok {
			st = strategyCount // let validation name it
		}
		c.Strategy = st
	}
	if a, ok := d.Arg("members"); ok {
		for _, v := range a.Vals {
			c.Members = append(c.Members, parseMember(t, v))
		}
	}
	d.MaybeScanArgs(t, "name", &c.Name)
	d.MaybeScanArgs(t, "reason", &c.Reason)
	d.MaybeScanArgs(t, "split", &c.SplitKey)
	if d.HasArg("key") {
		d.ScanArgs(t, "key", &c.CursorKey)
		c.HasCursor = true
	}
	d.MaybeScanArgs(t, "token", &c.CursorToken)
	if n := 0; d.MaybeScanArgs(t, "long-key", &n) {
		c.CursorKey, c.HasCursor = strings.Repeat("k", n), true
	}
	if n := 0; d.MaybeScanArgs(t, "long-token", &n) {
		c.CursorToken = strings.Repeat("t", n)
	}
	var meta string
	d.MaybeScanArgs(t, "meta", &meta)
	for _, arg := range []string{"shards", "children"} {
		if a, ok := d.Arg(arg); ok {
			for _, v := range a.Vals {
				c.Work = append(c.Work, parseWorkSpec(t, v, meta))
			}
		}
	}
	s.allocatorArgs(t, d, c)
	return s.submit(t, c)
}

// allocatorArgs reads the fields of the allocator verbs (docs/api.md Part IV):
// labels=(k=v,...), value=N, whole, excluded=(A-B,...), band=A-B, format=F, label=k=v,
// limit=N, reclaim, and imports=(HOLDER;MEMBERS;MODE;LABELS,...) with MEMBERS and LABELS
// joined by '+' and MODE "active", "ttl=N" or "keepalive=N".
func (s *scenario) allocatorArgs(t *testing.T, d *datadriven.TestData, c *Command) {
	if a, ok := d.Arg("labels"); ok {
		c.Labels = parseLabels(t, a.Vals)
	}
	d.MaybeScanArgs(t, "value", &c.Value)
	c.KeepFirst, c.KeepLast = d.HasArg("keep-first"), d.HasArg("keep-last")
	c.WholeLease = d.HasArg("whole")
	c.Reclaim = d.HasArg("reclaim")
	if a, ok := d.Arg("excluded"); ok {
		for _, v := range a.Vals {
			c.Excluded = append(c.Excluded, parseInterval(t, v))
		}
	}
	if d.HasArg("exclude-every") {
		// STEP:COUNT single values from first on, STEP apart: a range at its bound.
		var spec string
		d.ScanArgs(t, "exclude-every", &spec)
		a, b, _ := strings.Cut(spec, ":")
		step, _ := strconv.ParseUint(a, 10, 64)
		count, _ := strconv.Atoi(b)
		for i := 0; i < count; i++ {
			v := c.First + uint64(i)*step
			c.Excluded = append(c.Excluded, Interval{v, v})
		}
	}
	if d.HasArg("band") {
		var b string
		d.ScanArgs(t, "band", &b)
		c.Band, c.HasBand = parseInterval(t, b), true
	}
	d.MaybeScanArgs(t, "format", &c.Format)
	if d.HasArg("label") {
		var l string
		d.ScanArgs(t, "label", &l)
		c.Label = parseLabels(t, []string{l})[0]
	}
	var limit uint64
	if d.MaybeScanArgs(t, "limit", &limit) {
		c.Limit = uint32(limit)
	}
	if a, ok := d.Arg("imports"); ok {
		for _, v := range a.Vals {
			parts := strings.Split(v, ";")
			if len(parts) < 3 {
				t.Fatalf("%s: import %q: want HOLDER;MEMBERS;MODE[;LABELS]", d.Pos, v)
			}
			im := ImportLease{HolderID: parts[0]}
			for _, m := range strings.Split(parts[1], "+") {
				im.Members = append(im.Members, parseMember(t, m))
			}
			switch mode, n, _ := strings.Cut(parts[2], "="); mode {
			case "active":
				im.Activate = true
			case "ttl":
				im.TTLMillis, _ = strconv.ParseUint(n, 10, 64)
			case "keepalive":
				im.Activate = true
				im.KeepAliveMillis, _ = strconv.ParseUint(n, 10, 64)
			default:
				t.Fatalf("%s: import %q: mode %q", d.Pos, v, parts[2])
			}
			if len(parts) > 3 && parts[3] != "" {
				im.Labels = parseLabels(t, strings.Split(parts[3], "+"))
			}
			c.Imports = append(c.Imports, im)
		}
	}
}

func parseLabels(t *testing.T, vals []string) []Label {
	var ls []Label
	for _, v := range vals {
		k, val, _ := strings.Cut(v, "=")
		ls = append(ls, Label{Key: k, Value: val})
	}
	return ls
}

// parseInterval reads A-B or A.
func parseInterval(t *testing.T, s string) Interval {
	a, b, found := strings.Cut(s, "-")
	first, err := strconv.ParseUint(a, 10, 64)
	if err != nil {
		t.Fatalf("interval %q: %v", s, err)
	}
	last := first
	if found {
		if last, err = strconv.ParseUint(b, 10, 64); err != nil {
			t.Fatalf("interval %q: %v", s, err)
		}
	}
	return Interval{first, last}
}

// submit is the runtime's write path in miniature.
func (s *scenario) submit(t *testing.T, c *Command) string {
	lim := s.cfg.Limits
	lim.MaxCommandBytes = math.MaxInt
	a := s.k.Admit(c, s.slot, &lim, s.k.LastLSN()+1, NoneInFlight{}, &s.out)
	switch {
	case a.Rejection != nil:
		return s.checked(t, c.Verb, a.Rejection.Code, "rejected "+a.Rejection.Code.String()+": "+a.Rejection.Message)
	case a.Stage == StageRetry:
		return s.checked(t, c.Verb, s.out.Code, formatOutput(&s.out))
	}
	s.k.Apply(Entry{LSN: s.k.LastLSN() + 1, Slot: s.slot, Cmd: c}, &s.out)
	if msg := eventBoundBroken(c, &s.out); msg != "" {
		t.Fatal(msg)
	}
	return s.checked(t, c.Verb, s.out.Code, formatOutput(&s.out))
}

func (s *scenario) checked(t *testing.T, v Verb, c Code, res string) string {
	if !Allowed(v, c) {
		t.Fatalf("%s returned %s, outside its code set", v, c)
	}
	if s.seen[v] == nil {
		s.seen[v] = map[Code]bool{}
	}
	s.seen[v][c] = true
	return res
}

func (s *scenario) other(t *testing.T, d *datadriven.TestData, tenant string) string {
	var id string
	d.MaybeScanArgs(t, "id", &id)
	switch d.Cmd {
	case "tick":
		// What the shard does on a slot tick: commit an expire entry for each due lease.
		max := 100
		d.MaybeScanArgs(t, "max", &max)
		var b strings.Builder
		for _, due := range s.k.DueExpirations(s.slot, max, nil) {
			c := &Command{Verb: contract.VerbExpire, Tenant: due.Tenant, LeaseLSN: due.LeaseLSN, Deadline: due.Deadline}
			s.k.Apply(Entry{LSN: s.k.LastLSN() + 1, Slot: s.slot, Cmd: c}, &s.out)
			b.WriteString(formatOutput(&s.out) + "\n")
		}
		if b.Len() == 0 {
			return "nothing due"
		}
		return strings.TrimSpace(b.String())
	case "expire":
		// An expire entry as the runtime would journal it, possibly stale.
		c := &Command{Verb: contract.VerbExpire, Tenant: tenant}
		d.ScanArgs(t, "lease", &c.LeaseLSN)
		d.ScanArgs(t, "deadline", &c.Deadline)
		s.k.Apply(Entry{LSN: s.k.LastLSN() + 1, Slot: s.slot, Cmd: c}, &s.out)
		return formatOutput(&s.out)
	case "due":
		max := 100
		d.MaybeScanArgs(t, "max", &max)
		var parts []string
		for _, due := range s.k.DueExpirations(s.slot, max, nil) {
			parts = append(parts, fmt.Sprintf("%s/%d@%d", due.Tenant, due.LeaseLSN, due.Deadline))
		}
		return "due: " + strings.Join(parts, " ")
	case "get-resource":
		s.k.GetResource(tenant, id, &s.out)
		s.checked(t, contract.VerbGetResource, s.out.Code, "")
	case "get-pool":
		s.k.GetPool(tenant, id, &s.out)
		s.checked(t, contract.VerbGetPool, s.out.Code, "")
	case "get-range":
		s.k.GetRange(tenant, id, &s.out)
		s.checked(t, contract.VerbGetRange, s.out.Code, "")
	case "get-lease":
		var lsn uint64
		d.ScanArgs(t, "lease", &lsn)
		s.k.GetLease(tenant, lsn, s.slot, &s.out)
		s.checked(t, contract.VerbGetLease, s.out.Code, "")
	case "list":
		var holder string
		limit := 1000
		d.ScanArgs(t, "holder", &holder)
		d.MaybeScanArgs(t, "limit", &limit)
		views, truncated := s.k.ListLeases(tenant, holder, limit, nil)
		var b strings.Builder
		fmt.Fprintf(&b, "%d leases truncated=%v", len(views), truncated)
		for i := range views {
			b.WriteString("\n" + formatLease(&views[i]))
		}
		return b.String()
	case "configure":
		// A configure entry, as a shard journals when it starts with other flags: the
		// shape it names from this lsn on, and its limits for the writes admitted next.
		cfg := s.cfg
		parseConfig(t, d, &cfg)
		s.k.Apply(Entry{LSN: s.k.LastLSN() + 1, Slot: s.slot, Cmd: &Command{Verb: contract.VerbConfigure, Settings: cfg.Shape}}, &s.out)
		if s.out.Code == contract.CodeOK {
			s.cfg = cfg
		}
		return s.checked(t, contract.VerbConfigure, s.out.Code, formatOutput(&s.out))
	case "settings":
		sh := s.k.Shape()
		return fmt.Sprintf("dedupe=%d history=%d resources=%d pools=%d ranges=%d leases=%d members=%d ops=%d expirations=%d range-values=%d runs=%d work=%d",
			sh.DedupeWindowSlots, sh.HistoryWindowSlots, sh.MaxResources, sh.MaxPools, sh.MaxRanges, sh.MaxLeases, sh.MaxMembers,
			sh.MaxOperations, sh.MaxExpirations, sh.MaxRangeValues, sh.MaxRuns, sh.MaxWork)
	case "snapshot-roundtrip":
		// Snapshot, restore, snapshot again: same bytes; then carry on with the restored
		// kernel so the rest of the file runs against it. With 'defaults' the restore is
		// given the default configuration: the snapshot's own shape must win.
		b := s.k.Snapshot(nil)
		rcfg := s.cfg
		if d.HasArg("defaults") {
			rcfg = DefaultConfig()
			rcfg.Shard = s.cfg.Shard
		}
		k2, err := Restore(rcfg, b)
		if err != nil {
			t.Fatalf("%s: restore: %v", d.Pos, err)
		}
		if b2 := k2.Snapshot(nil); string(b2) != string(b) {
			t.Fatalf("%s: snapshot of the restored state differs", d.Pos)
		}
		s.k = k2
		return fmt.Sprintf("restored at lsn %d", k2.LastLSN())
	case "slot":
		return fmt.Sprintf("slot %d", s.slot)
	case "slots":
		// Object slots in use (live objects and graves) and free, table by table.
		st := s.k.Stats()
		f := &s.k.free
		return fmt.Sprintf("resources=%d pools=%d ranges=%d runs=%d work=%d graves=%d free=%d/%d/%d/%d/%d",
			st.Resources, st.Pools, st.Ranges, len(s.k.runs)-len(f.runs), len(s.k.works)-len(f.works), s.k.graves.len(),
			len(f.res), len(f.pools), len(f.ranges), len(f.runs), len(f.works))
	case "get-run":
		s.k.GetRun(tenant, id, &s.out)
		s.checked(t, contract.VerbGetRun, s.out.Code, "")
	case "skip":
		// A skip entry, as the runtime sequences before an import of several leases.
		s.k.Apply(Entry{LSN: s.k.LastLSN() + 1, Slot: s.slot, Cmd: &Command{Verb: contract.VerbSkip}}, &s.out)
		return formatOutput(&s.out)
	case "lookup":
		var v uint64
		d.ScanArgs(t, "value", &v)
		state := s.k.LookupValue(tenant, id, v, &s.out)
		s.checked(t, contract.VerbLookupValue, s.out.Code, "")
		if s.out.Code == contract.CodeOK {
			return fmt.Sprintf("%s %s", state, formatOutput(&s.out))
		}
	case "list-objects", "list-leases", "allocations", "holdings", "list-work":
		return s.list(t, d, tenant, id)
	case "get-work":
		var name string
		d.ScanArgs(t, "name", &name)
		s.k.GetWork(tenant, id, name, &s.out)
		s.checked(t, contract.VerbGetWork, s.out.Code, "")
	default:
		t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	}
	return formatOutput(&s.out)
}

// list runs one shard's page of a listing: list-objects kind=K prefix= after=,
// list-leases holder= label= state=, allocations id= [excluded], holdings id=,
// list-work id= state=; each with from=N (positional listings) and limit=N.
func (s *scenario) list(t *testing.T, d *datadriven.TestData, tenant, id string) string {
	q := ListQuery{Tenant: tenant, ID: id, Limit: 100}
	d.MaybeScanArgs(t, "limit", &q.Limit)
	d.MaybeScanArgs(t, "from", &q.From)
	d.MaybeScanArgs(t, "prefix", &q.Prefix)
	q.HasAfter = d.MaybeScanArgs(t, "after", &q.After)
	d.MaybeScanArgs(t, "state", &q.State)
	q.Excluded = d.HasArg("excluded")
	if d.HasArg("label") {
		var l string
		d.ScanArgs(t, "label", &l)
		q.Label, q.HasLabel = parseLabels(t, []string{l})[0], true
	}
	switch d.Cmd {
	case "list-objects":
		var kind string
		d.ScanArgs(t, "kind", &kind)
		q.Verb = map[string]Verb{"resource": contract.VerbListResources, "pool": contract.VerbListPools,
			"range": contract.VerbListRanges, "run": contract.VerbListRuns}[kind]
	case "list-leases":
		d.MaybeScanArgs(t, "holder", &q.ID)
		q.Verb = contract.VerbListLeases
	case "allocations":
		q.Verb = contract.VerbListAllocations
	case "holdings":
		q.Verb = contract.VerbListHoldings
	case "list-work":
		q.Verb = contract.VerbListWork
	}
	var p ListPage
	s.k.List(&q, &p)
	s.checked(t, q.Verb, p.Code, "")
	var b strings.Builder
	b.WriteString(p.Code.String())
	if p.More {
		fmt.Fprintf(&b, " more next=%d next-key=%q", p.Next, p.NextKey)
	}
	var o Output
	for i := range p.Resources {
		o.Object, o.Resource = ObjectResource, p.Resources[i]
		b.WriteString(objectLine(&o))
	}
	for i := range p.Pools {
		o.Object, o.Pool = ObjectPool, p.Pools[i]
		b.WriteString(objectLine(&o))
	}
	for i := range p.Ranges {
		o.Object, o.Range = ObjectRange, p.Ranges[i]
		b.WriteString(objectLine(&o))
	}
	for i := range p.Runs {
		o.Object, o.Run = ObjectRun, p.Runs[i]
		b.WriteString(objectLine(&o))
	}
	for i := range p.Works {
		b.WriteString("\n" + formatWork(&p.Works[i]))
	}
	for i := range p.Leases {
		b.WriteString("\n")
		if p.Values != nil {
			fmt.Fprintf(&b, "%d: ", p.Values[i])
		}
		b.WriteString(formatLease(&p.Leases[i]))
	}
	for _, iv := range p.Excluded {
		fmt.Fprintf(&b, "\nexcluded [%d,%d]", iv.First, iv.Last)
	}
	return b.String()
}

// parseWorkSpec reads NAME:START:END (a manifest entry) or START:END (a split child).
func parseWorkSpec(t *testing.T, s, meta string) WorkSpec {
	parts := strings.Split(s, ":")
	switch len(parts) {
	case 3:
		return WorkSpec{Name: parts[0], Start: parts[1], End: parts[2], Metadata: meta}
	case 2:
		return WorkSpec{Start: parts[0], End: parts[1]}
	}
	t.Fatalf("work %q: want NAME:START:END or START:END", s)
	return WorkSpec{}
}

// parseMember reads r:ID, p:ID#QTY, v:ID (any value), v:ID#VALUE, w:RUN (the next work
// shard) or w:RUN/NAME.
func parseMember(t *testing.T, s string) Member {
	kind, rest, ok := strings.Cut(s, ":")
	if !ok {
		t.Fatalf("member %q: want r:ID, p:ID#QTY, v:ID or v:ID#VALUE", s)
	}
	id, num, hasNum := strings.Cut(rest, "#")
	var n uint64
	if hasNum {
		var err error
		if n, err = strconv.ParseUint(num, 10, 64); err != nil {
			t.Fatalf("member %q: %v", s, err)
		}
	}
	switch kind {
	case "r":
		return Member{Kind: MemberResource, ID: id}
	case "p":
		return Member{Kind: MemberPool, ID: id, Quantity: n}
	case "v":
		return Member{Kind: MemberRange, ID: id, Value: n, HasValue: hasNum}
	case "w":
		run, name, _ := strings.Cut(id, "/")
		return Member{Kind: MemberWork, ID: run, Name: name}
	case "x":
		return Member{ID: id} // no kind: for validation scenarios
	}
	t.Fatalf("member %q: unknown kind %q", s, kind)
	return Member{}
}

func formatOutput(o *Output) string {
	var b strings.Builder
	if o.Code.IsRejection() {
		b.WriteString("rejected ")
	} else if o.LSN != 0 {
		fmt.Fprintf(&b, "lsn=%d ", o.LSN)
	}
	b.WriteString(o.Code.String())
	if o.MemberIndex >= 0 {
		fmt.Fprintf(&b, " member=%d", o.MemberIndex)
	}
	if o.FromRetryCache {
		b.WriteString(" (retry)")
	}
	if o.Event != EventNone {
		b.WriteString(" event=" + o.Event.String())
	}
	if o.EarliestDeadlineSlot != 0 {
		fmt.Fprintf(&b, " until=%d", o.EarliestDeadlineSlot)
	}
	if o.ItemIndex >= 0 {
		fmt.Fprintf(&b, " item=%d", o.ItemIndex)
	}
	if o.Count > 0 || o.More {
		fmt.Fprintf(&b, " count=%d more=%v", o.Count, o.More)
	}
	if o.Object != ObjectLease && o.Lease.LSN != 0 && (o.Code == contract.CodeValueBusy || o.Code == contract.CodeObjectInUse) {
		fmt.Fprintf(&b, " held=%d by=%s", o.Value, contract.FormatLeaseID(o.Lease.Shard, o.Lease.LSN))
	}
	b.WriteString(objectLine(o))
	switch o.Object {
	case ObjectLease:
		b.WriteString("\n" + formatLease(&o.Lease))
	case ObjectWork:
		if o.Lease.LSN != 0 {
			b.WriteString("\n" + formatLease(&o.Lease))
		}
	}
	if o.HasWork {
		b.WriteString("\n" + formatWork(&o.Work))
	}
	for i := range o.Children {
		b.WriteString("\n  child " + formatWork(&o.Children[i]))
	}
	if o.Object == ObjectLease && o.HasWork {
		fmt.Fprintf(&b, "\ncapacity: claimable=%d earliest=%d", o.Capacity.Claimable, o.Capacity.EarliestDeadline)
	}
	for i := range o.Changes {
		b.WriteString("\n  " + o.Changes[i].Event.String() + " " + formatLease(&o.Changes[i].Lease))
	}
	return b.String()
}

// objectLine is the line of a resource, pool, range or run view ("" for other objects).
func objectLine(o *Output) string {
	var b strings.Builder
	switch o.Object {
	case ObjectResource:
		r := &o.Resource
		fmt.Fprintf(&b, "\nresource %s: %s lease=%d version=%d", r.ID, r.State, r.LeaseLSN, r.Version)
	case ObjectPool:
		p := &o.Pool
		fmt.Fprintf(&b, "\npool %s: capacity=%d reserved=%d active=%d available=%d", p.ID, p.Capacity, p.Reserved, p.Active, p.Available)
		if p.Consumed != 0 {
			fmt.Fprintf(&b, " consumed=%d", p.Consumed)
		}
	case ObjectRange:
		r := &o.Range
		fmt.Fprintf(&b, "\nrange %s: [%d,%d] %s allocated=%d free=%d", r.ID, r.First, r.Last, r.Strategy, r.Allocated, r.Free)
		if r.Excluded != 0 {
			fmt.Fprintf(&b, " excluded=%d", r.Excluded)
		}
		if r.HasBand {
			fmt.Fprintf(&b, " band=[%d,%d]", r.Band.First, r.Band.Last)
		}
		if r.Format != "" {
			b.WriteString(" format=" + r.Format)
		}
	case ObjectRun:
		r := &o.Run
		fmt.Fprintf(&b, "\nrun %s: %s work=%d active=%d claimed=%d done=%d split=%d parked=%d", r.ID, r.Status, r.Work,
			r.Active, r.Claimed, r.Done, r.Split, r.Parked)
		if r.Reason != "" {
			fmt.Fprintf(&b, " reason=%q", r.Reason)
		}
	}
	return b.String()
}

func formatWork(w *WorkView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "work %s/%s [%q,%q) %s claims=%d", w.RunID, w.Name, w.Start, w.End, w.Status, w.Claims)
	if w.LeaseLSN != 0 {
		fmt.Fprintf(&b, " lease=%d epoch=%d", w.LeaseLSN, w.LeaseEpoch)
	}
	if w.HasCursor {
		fmt.Fprintf(&b, " cursor=%q token=%q", w.CursorKey, w.CursorToken)
	}
	if w.Parent != "" {
		b.WriteString(" parent=" + w.Parent)
	}
	if len(w.Children) > 0 {
		b.WriteString(" children=" + strings.Join(w.Children, ","))
	}
	if w.Metadata != "" {
		fmt.Fprintf(&b, " meta=%q", w.Metadata)
	}
	if w.Reason != "" {
		fmt.Fprintf(&b, " reason=%q", w.Reason)
	}
	return b.String()
}

func formatLease(l *LeaseView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "lease %s holder=%s %s epoch=%d created=%d deadline=%d released=%d retire=%d ",
		contract.FormatLeaseID(l.Shard, l.LSN), l.HolderID, l.State, l.Epoch, l.CreatedLSN, l.DeadlineSlot, l.ReleasedLSN, l.RetireAfterSlot)
	if l.KeepAliveSlots != 0 {
		fmt.Fprintf(&b, "keepalive=%d ", l.KeepAliveSlots)
	}
	b.WriteString("members=(")
	for i, m := range l.Members {
		if i > 0 {
			b.WriteString(" ")
		}
		switch m.Kind {
		case MemberResource:
			b.WriteString("r:" + m.ID)
		case MemberPool:
			fmt.Fprintf(&b, "p:%s#%d", m.ID, m.Quantity)
		case MemberRange:
			fmt.Fprintf(&b, "v:%s#%d", m.ID, m.Value)
		case MemberWork:
			fmt.Fprintf(&b, "w:%s/%s", m.ID, m.Name)
		}
	}
	b.WriteString(")")
	if len(l.Labels) > 0 {
		b.WriteString(" labels=(")
		for i, x := range l.Labels {
			if i > 0 {
				b.WriteString(" ")
			}
			b.WriteString(x.Key + "=" + x.Value)
		}
		b.WriteString(")")
	}
	return b.String()
}
