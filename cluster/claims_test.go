package cluster

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/holdfast/holdfast/contract"
)

// The claim table's decisions, scripted (testdata/claims). Times are milliseconds on the
// monotonic clock; the TTL is 4 s unless new says otherwise (renew 1 s, serve window 3 s).
//
//	new node=N shards=K [ttl=S]                  an empty table
//	joined t=MS                                  the node joined the cluster
//	round t=MS [members=A,B] [owners=A,,?,B] [halted=K,...]
//	                                             a balancing round (no members: the bucket could not be read)
//	claimed t=MS shard=K rev=R [sent=MS]         a claim's create answered (rev 0: not created)
//	opened t=MS shard=K [err]                    a shard's load ended
//	accept-failed shard=K                        its requests cannot be routed here
//	closed t=MS shard=K                          a shard's close ended
//	renewals                                     what a renewal pass renews
//	renewed t=MS shard=K rev=R (new=R2 sent=MS | refused | failed)
//	recreated shard=K rev=R new=R2 sent=MS       a refused claim's key made again
//	confirmed t=MS shard=K n=N [failed]          the N-th claim made again: its barrier's end
//	bucket t=MS (answered | silent)              whether the bucket answered the node's renewal
//	stop t=MS [alone]                            the node stops (alone: the last live node)
//
// Each answer lists the acts, then every shard not free (phase, revision, serve window,
// no-claim-before), and done once nothing is held after a stop.
func TestClaimScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/claims", func(t *testing.T, path string) {
		var tab *claimTable
		ms := func(d *datadriven.TestData, key string) int64 {
			var v int64
			d.MaybeScanArgs(t, key, &v)
			return v * int64(time.Millisecond)
		}
		shard := func(d *datadriven.TestData) uint32 {
			var k uint32
			d.ScanArgs(t, "shard", &k)
			return k
		}
		list := func(d *datadriven.TestData, key string) []string {
			if !d.HasArg(key) {
				return nil
			}
			var v string
			d.ScanArgs(t, key, &v)
			return strings.Split(v, ",")
		}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			var acts []act
			now := ms(d, "t")
			switch d.Cmd {
			case "new":
				var node string
				var shards uint32
				ttl := 4
				d.ScanArgs(t, "node", &node)
				d.ScanArgs(t, "shards", &shards)
				d.MaybeScanArgs(t, "ttl", &ttl)
				tab = newClaimTable(node, shards, contract.NewTiming(time.Duration(ttl)*time.Second, 0))
				return "ok"
			case "joined":
				tab.Joined(now)
				return "ok"
			case "round":
				owners := list(d, "owners")
				if owners == nil {
					owners = make([]string, len(tab.shards))
				}
				halted := map[uint32]bool{}
				for _, h := range list(d, "halted") {
					var k uint32
					fmt.Sscan(h, &k)
					halted[k] = true
				}
				acts = tab.Round(now, list(d, "members"), owners, func(k uint32) bool { return halted[k] })
			case "claimed":
				var rev uint64
				d.ScanArgs(t, "rev", &rev)
				sent := now
				if d.HasArg("sent") {
					sent = ms(d, "sent")
				}
				acts = tab.Claimed(now, shard(d), rev, sent)
			case "opened":
				var err error
				if d.HasArg("err") {
					err = errors.New("journal unreadable")
				}
				acts = tab.Opened(now, shard(d), err)
			case "accept-failed":
				acts = tab.AcceptFailed(shard(d))
			case "closed":
				acts = tab.Closed(now, shard(d))
			case "renewals":
				acts = tab.Renewals()
			case "renewed":
				var rev, newRev uint64
				d.ScanArgs(t, "rev", &rev)
				d.MaybeScanArgs(t, "new", &newRev)
				sent := ms(d, "sent")
				how, more := tab.Renewed(now, shard(d), rev, newRev, sent, now, d.HasArg("refused"))
				acts = more
				return fmt.Sprintf("%s\n%s", renewalNames[how], show(tab, acts))
			case "recreated":
				var rev, newRev uint64
				d.ScanArgs(t, "rev", &rev)
				d.ScanArgs(t, "new", &newRev)
				acts = tab.Recreated(shard(d), rev, newRev, ms(d, "sent"))
			case "confirmed":
				var n uint64
				d.ScanArgs(t, "n", &n)
				how := tab.Confirmed(now, shard(d), n, !d.HasArg("failed"))
				return fmt.Sprintf("%s\n%s", renewalNames[how], show(tab, nil))
			case "bucket":
				changed := tab.Bucket(now, d.HasArg("answered"))
				return fmt.Sprintf("changed=%v quiet<%dms", changed, tab.quietUntil/int64(time.Millisecond))
			case "stop":
				acts = tab.Stop(now, d.HasArg("alone"))
			default:
				t.Fatalf("unknown command %q", d.Cmd)
			}
			return show(tab, acts)
		})
	})
}

var renewalNames = map[renewal]string{renewedInTime: "in time", renewedLate: "late", renewRefused: "refused", renewFailed: "failed",
	renewFenced: "fenced", renewedAgain: "leased again", renewedConfirming: "confirming", renewStale: "stale"}

func show(tab *claimTable, acts []act) string {
	var b strings.Builder
	for _, a := range acts {
		name := actNames[a.kind]
		if a.kind == 0 {
			name = "renew" // Renewals' list
		}
		fmt.Fprintf(&b, "%s %d", name, a.shard)
		if a.rev != 0 {
			fmt.Fprintf(&b, " rev=%d", a.rev)
		}
		if a.how != 0 {
			fmt.Fprintf(&b, " %s", a.how)
		}
		if a.why != "" {
			fmt.Fprintf(&b, " (%s)", a.why)
		}
		b.WriteString("\n")
	}
	for k, c := range tab.shards {
		if !c.held() && c.notBefore == 0 {
			continue
		}
		fmt.Fprintf(&b, "· %d %s", k, c.phase)
		if c.phase == closing {
			fmt.Fprintf(&b, "(%s)", c.how)
		}
		if c.rev != 0 {
			fmt.Fprintf(&b, " rev=%d", c.rev)
		}
		switch {
		case c.serveUntil == fencedOnly:
			b.WriteString(" fenced-until-confirmed")
		case c.serveUntil != 0:
			fmt.Fprintf(&b, " serve<%dms", c.serveUntil/int64(time.Millisecond))
		}
		if c.notBefore != 0 {
			fmt.Fprintf(&b, " not-before=%dms", c.notBefore/int64(time.Millisecond))
		}
		b.WriteString("\n")
	}
	if tab.stopping && tab.Done() {
		b.WriteString("done\n")
	}
	if b.Len() == 0 {
		return "nothing"
	}
	return strings.TrimSuffix(b.String(), "\n")
}
