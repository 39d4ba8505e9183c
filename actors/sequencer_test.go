package actors

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
)

// The write path's rules — admission, joining a duplicate in flight, consecutive lsns,
// slots that never go back, one batch at a time, apply only what is durable, halt on a
// journal failure, bounded expiries per tick — scripted step by step the way etcd's
// datadriven files script its storage thread:
//
//	new [max-batch=N] [expire-per-tick=N]   a fresh shard (kernel defaults, 100 ms slots)
//	write client=NAME [slot=S] VERB ARGS    a client write: create-resource id=ID |
//	                                        reserve holder=H id=ID ttl=MS | release holder=H lease=LSN epoch=E
//	flush                                   hand the next batch to the journal
//	fsync-ok / fsync-fail                   the journal's answer for that batch
//	tick slot=S                             a slot tick: sequence the due expiries
//	events [max=N] [backlog=N]              bound the events not yet published (the sink holds backlog)
func TestSequencerScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/sequencer", func(t *testing.T, path string) {
		var sc *seqScript
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd == "new" {
				sc = newSeqScript(t, d)
				return "ok"
			}
			if sc == nil {
				t.Fatalf("%s: a script starts with 'new'", d.Pos)
			}
			out := sc.run(t, d)
			if err := sc.k.CheckInvariants(); err != nil {
				t.Fatalf("%s: invariant broken: %v", d.Pos, err)
			}
			return out
		})
	})
}

type seqScript struct {
	cfg     kernel.Config
	k       *kernel.Kernel
	q       *Sequencer[string]
	perTick int
	clock   uint64
	backlog int // the events the sink holds (events backlog=N)
}

func newSeqScript(t *testing.T, d *datadriven.TestData) *seqScript {
	cfg := kernel.DefaultConfig()
	cfg.SlotMillis = 100
	cfg.MaxOperations, cfg.MaxLeases, cfg.MaxResources, cfg.MaxMembers, cfg.MaxExpirations = 1<<12, 1<<12, 1<<12, 1<<13, 1<<12
	k, err := kernel.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	maxBatch, perTick := 1024, 1024
	d.MaybeScanArgs(t, "max-batch", &maxBatch)
	d.MaybeScanArgs(t, "expire-per-tick", &perTick)
	sc := &seqScript{cfg: cfg, k: k, q: NewSequencer[string](k, 0, 0, cfg.Limits, maxBatch), perTick: perTick}
	window := 1
	d.MaybeScanArgs(t, "window", &window)
	sc.q.SetWindow(window)
	return sc
}

func (sc *seqScript) run(t *testing.T, d *datadriven.TestData) string {
	if d.HasArg("slot") {
		d.ScanArgs(t, "slot", &sc.clock)
	}
	switch d.Cmd {
	case "write":
		var who string
		d.ScanArgs(t, "client", &who)
		c := sc.command(t, d)
		dec, r := sc.q.Write(c, sc.q.Stamp(sc.clock), who)
		switch dec {
		case Answered:
			return who + ": answered " + formatReply(r)
		case Joined:
			return who + ": joined"
		default:
			return who + ": sequenced"
		}
	case "flush":
		b := sc.q.Batch()
		switch {
		case b == nil && sc.q.Full():
			return "(the window is full)"
		case b == nil:
			return "(nothing to write)"
		}
		var slots []string
		for _, r := range b {
			slots = append(slots, fmt.Sprint(r.Slot))
		}
		return fmt.Sprintf("batch lsn=%d..%d slots=%s", b[0].LSN, b[len(b)-1].LSN, strings.Join(slots, ","))
	case "fsync-ok":
		if !sc.q.Writing() {
			t.Fatalf("%s: no batch is being written", d.Pos)
		}
		var lines []string
		answers, _ := sc.q.Durable(func(e kernel.Entry, out *kernel.Output) {
			switch e.Cmd.Verb {
			case contract.VerbExpire:
				lines = append(lines, fmt.Sprintf("applied lsn=%d expire lease=%d: %s", e.LSN, e.Cmd.LeaseLSN, out.Code))
			case contract.VerbConfigure:
				lines = append(lines, fmt.Sprintf("applied lsn=%d configure: %s", e.LSN, out.Code))
			case contract.VerbSkip:
				lines = append(lines, fmt.Sprintf("applied lsn=%d skip", e.LSN))
			}
		})
		for _, a := range answers {
			lines = append(lines, a.To+": "+formatReply(a.Reply))
		}
		return strings.Join(lines, "\n")
	case "fsync-fail":
		var lines []string
		for _, a := range sc.q.Failed() {
			lines = append(lines, a.To+": "+formatReply(a.Reply))
		}
		if len(lines) == 0 {
			return "(nobody waiting)"
		}
		return strings.Join(lines, "\n")
	case "configure":
		// What a shard does when it is asked to run with other settings: the new limits
		// for the writes it admits next, the new shape as an entry of its own.
		d.MaybeScanArgs(t, "max-resources", &sc.cfg.MaxResources)
		d.MaybeScanArgs(t, "max-ops", &sc.cfg.MaxOperations)
		d.MaybeScanArgs(t, "max-ttl-ms", &sc.cfg.MaxTTLMillis)
		d.MaybeScanArgs(t, "slot-ms", &sc.cfg.SlotMillis)
		sc.q.SetLimits(sc.cfg.Limits)
		if err := sc.q.Configure(sc.q.Stamp(sc.clock), sc.cfg.Shape); err != nil {
			return "refused: " + err.Error()
		}
		return "configure sequenced"
	case "events":
		max := sc.q.maxUnpublished
		d.MaybeScanArgs(t, "max", &max)
		d.MaybeScanArgs(t, "backlog", &sc.backlog)
		sc.q.SetEventBudget(max, func() int { return sc.backlog })
		return fmt.Sprintf("room for %d events (sequenced entries may yield %d)", sc.q.eventRoom(), sc.q.unpublished)
	case "tick":
		slot := sc.q.Stamp(sc.clock)
		before := sc.q.Expiring()
		sc.q.Expire(slot, sc.k.DueExpirations(slot, sc.perTick, nil), sc.perTick)
		return fmt.Sprintf("slot=%d expiries in flight %d -> %d", slot, before, sc.q.Expiring())
	}
	t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	return ""
}

func (sc *seqScript) command(t *testing.T, d *datadriven.TestData) *kernel.Command {
	c := &kernel.Command{Tenant: "t"}
	d.MaybeScanArgs(t, "op", &c.OperationID)
	var id string
	d.MaybeScanArgs(t, "id", &id)
	switch {
	case d.HasArg("create-resource"):
		c.Verb, c.ObjectID = contract.VerbCreateResource, id
	case d.HasArg("reserve"):
		c.Verb = contract.VerbReserve
		d.ScanArgs(t, "holder", &c.HolderID)
		d.ScanArgs(t, "ttl", &c.TTLMillis)
		c.Members = []kernel.Member{{Kind: kernel.MemberResource, ID: id}}
	case d.HasArg("import"):
		// import=N: N leases, one resource each (id/0, id/1, ...).
		var n int
		d.ScanArgs(t, "import", &n)
		c.Verb = contract.VerbImport
		for i := range n {
			c.Imports = append(c.Imports, kernel.ImportLease{HolderID: "h", Activate: true,
				Members: []kernel.Member{{Kind: kernel.MemberResource, ID: fmt.Sprintf("%s/%d", id, i)}}})
		}
	case d.HasArg("release"):
		c.Verb = contract.VerbRelease
		d.ScanArgs(t, "holder", &c.HolderID)
		d.ScanArgs(t, "lease", &c.LeaseLSN)
		d.ScanArgs(t, "epoch", &c.Epoch)
	default:
		t.Fatalf("%s: write needs a verb", d.Pos)
	}
	return c
}

func formatReply(r *Reply) string {
	var b strings.Builder
	b.WriteString(r.Code.String())
	if r.LSN != 0 {
		fmt.Fprintf(&b, " lsn=%d", r.LSN)
	}
	if r.FromRetryCache {
		b.WriteString(" (retry)")
	}
	if r.Object == kernel.ObjectLease && r.Lease.LSN != 0 {
		fmt.Fprintf(&b, " lease=%d epoch=%d %s", r.Lease.LSN, r.Lease.Epoch, r.Lease.State)
	}
	for _, ch := range r.Changes {
		fmt.Fprintf(&b, " %s=%d", ch.Event, ch.Lease.LSN)
	}
	if r.ItemIndex >= 0 && r.Code != contract.CodeOK && !r.Code.IsRejection() {
		fmt.Fprintf(&b, " item=%d", r.ItemIndex)
	}
	if r.Message != "" && r.Code.IsRejection() {
		b.WriteString(": " + r.Message)
	}
	return b.String()
}
