package events

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/nats-io/nats.go"
)

// The window's decisions, scripted (testdata/window), time in seconds from 0:
//
//	new [ack-wait=S]            an empty window
//	add through=L [empty] [t=S] an event sent at t (empty: a batch end without an event)
//	ack seq=N / fail seq=N      the stream's answer to a send
//	advance                     drop the acknowledged head; how far the position moves
//	plan t=S                    what to send again at t, or how long to wait
//	resend seq=N t=S            the message to send again, if still unacknowledged
//	reconnect                   the connection was lost: every unacknowledged event may be
func TestWindowScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/window", func(t *testing.T, path string) {
		var w Window
		ackWait := 10 * time.Second
		at := func(d *datadriven.TestData) time.Time {
			var sec int
			d.MaybeScanArgs(t, "t", &sec)
			return time.Unix(int64(sec), 0)
		}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "new":
				w = NewWindow()
				var sec int
				if d.MaybeScanArgs(t, "ack-wait", &sec) {
					ackWait = time.Duration(sec) * time.Second
				}
				return "ok"
			case "add":
				var through uint64
				d.MaybeScanArgs(t, "through", &through)
				var msg *nats.Msg
				if !d.HasArg("empty") {
					msg = nats.NewMsg("e")
				}
				return fmt.Sprintf("seq=%d", w.Add(msg, through, at(d)))
			case "ack":
				var seq uint64
				d.ScanArgs(t, "seq", &seq)
				return fmt.Sprintf("head acknowledged: %v", w.Ack(seq))
			case "fail":
				var seq uint64
				d.ScanArgs(t, "seq", &seq)
				msg, tries := w.Fail(seq)
				if msg == nil {
					return "not news"
				}
				return fmt.Sprintf("refused after %d retries", tries)
			case "advance":
				published := 0
				through := w.Advance(func(p bool) {
					if p {
						published++
					}
				})
				return fmt.Sprintf("through=%d published=%d pending=%d", through, published, w.Pending())
			case "plan":
				redo, tries, wait, overdue := w.Plan(at(d), ackWait)
				if len(redo) == 0 {
					return fmt.Sprintf("wait %v", wait)
				}
				var seqs []string
				for _, s := range redo {
					seqs = append(seqs, fmt.Sprint(s))
				}
				out := fmt.Sprintf("send %s backoff-tries=%d", strings.Join(seqs, ","), tries)
				if overdue != nil {
					out += fmt.Sprintf(" overdue=%d", overdue.Seq)
				}
				return out
			case "reconnect":
				w.FailAll()
				return fmt.Sprintf("troubled=%v", w.Troubled())
			case "resend":
				var seq uint64
				d.ScanArgs(t, "seq", &seq)
				if w.Resending(seq, at(d)) == nil {
					return "nothing: acknowledged meanwhile"
				}
				return "send again"
			}
			t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
			return ""
		})
	})
}
