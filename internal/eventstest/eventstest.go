// Package eventstest reads the events stream back for tests of event publishing.
package eventstest

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/messages"
)

// Stored is one message of the event stream.
type Stored struct {
	Seq     uint64
	Subject string
	MsgID   string
	Raw     string
	Obj     map[string]any
	Ev      *messages.Event
}

func Decode(t testing.TB, subject, msgID string, data []byte) Stored {
	t.Helper()
	e := Stored{Subject: subject, MsgID: msgID, Raw: string(data), Ev: &messages.Event{}}
	if err := json.Unmarshal(data, &e.Obj); err != nil {
		t.Fatalf("event is not JSON: %v: %q", err, data)
	}
	if err := messages.UnmarshalJSON(data, e.Ev); err != nil {
		t.Fatalf("event does not decode: %v: %s", err, data)
	}
	return e
}

// IsEvent says whether a message of the events stream is an event: in a cluster of
// data format 3 the stream holds the shards' journals too, on <prefix>._j.<shard>.
func IsEvent(subject string) bool {
	return strings.Contains(subject, ".v1.") && strings.Contains(subject, ".events.")
}

// Stream reads the whole event stream.
func Stream(t testing.TB, js jetstream.JetStream) []Stored {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, contract.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []Stored
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // a journal message compacted away
		}
		if err != nil {
			t.Fatalf("get %d: %v", seq, err)
		}
		if !IsEvent(m.Subject) {
			continue
		}
		e := Decode(t, m.Subject, m.Header.Get(jetstream.MsgIDHeader), m.Data)
		e.Seq = seq
		out = append(out, e)
	}
	return out
}

// Consume reads the whole event stream once, from its first message to the last stored
// now, through an ordered consumer (one pull per thousand messages, where Stream asks for
// each message), and hands each to fn decoded.
func Consume(ctx context.Context, t testing.TB, js jetstream.JetStream, fn func(jetstream.Msg, *messages.Event)) {
	t.Helper()
	cons, err := js.OrderedConsumer(ctx, contract.StreamName, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		t.Fatal(err)
	}
	for {
		batch, err := cons.FetchNoWait(1000)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			if !IsEvent(msg.Subject()) {
				continue
			}
			var e messages.Event
			if err := messages.UnmarshalJSON(msg.Data(), &e); err != nil {
				t.Fatalf("event %s: %v", msg.Headers().Get(jetstream.MsgIDHeader), err)
			}
			fn(msg, &e)
		}
		if got == 0 {
			return
		}
	}
}

// CheckOrder checks message ids against payloads and lsn order per shard.
func CheckOrder(t testing.TB, evs []Stored) {
	t.Helper()
	last := map[uint32]uint64{}
	for _, e := range evs {
		if want := contract.EventMsgID(e.Ev.Shard, e.Ev.Lsn, 0); e.MsgID != want {
			t.Fatalf("message id %q, want %q: %s", e.MsgID, want, e.Raw)
		}
		if e.Ev.Lsn <= last[e.Ev.Shard] {
			t.Fatalf("shard %d: lsn %d after %d", e.Ev.Shard, e.Ev.Lsn, last[e.Ev.Shard])
		}
		last[e.Ev.Shard] = e.Ev.Lsn
	}
}

// Events makes n resource.created events from lsn first on.
func Events(first uint64, n int) []actors.Event {
	out := make([]actors.Event, n)
	for i := range out {
		lsn := first + uint64(i)
		out[i] = actors.Event{Shard: 0, LSN: lsn, Slot: 1, Kind: kernel.EventResourceCreated, Tenant: "t",
			Object: kernel.ObjectResource, Resource: kernel.ResourceView{Tenant: "t", ID: "r" + strconv.FormatUint(lsn, 10)}}
	}
	return out
}
