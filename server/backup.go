package server

import (
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/backup"
)

// backupLink answers a copy's requests for the shards this process serves
// (backup.Subject): holds, captures and releases go to the shard, and a captured state
// is encoded here, kept, and read out in chunks. Kept states are bounded: the two newest
// copies, each forgotten once done or unread for keptFor.
type backupLink struct {
	nc     *nats.Conn
	prefix string
	sys    *actors.System

	subs   shardSubs
	mu     sync.Mutex
	copies []*keptCopy // newest last
}

// keptCopies and keptFor bound the states kept for reading.
const (
	keptCopies = 2
	keptFor    = 5 * time.Minute
)

// keptCopy is one copy's captured states on this process, by shard.
type keptCopy struct {
	id     string
	states map[uint32]*keptState
	used   time.Time
}

// keptState is a shard's captured state: its encoding, once ready.
type keptState struct {
	ready chan struct{}
	data  []byte
}

// Accept starts answering copies of shard k (this process now serves it).
func (b *backupLink) Accept(k uint32) error {
	sub, err := b.nc.Subscribe(backup.Subject(b.prefix, k), func(m *nats.Msg) { b.handle(k, m) })
	if err != nil {
		return err
	}
	b.subs.set(k, sub)
	return nil
}

// Release stops answering copies of shard k.
func (b *backupLink) Release(k uint32) { b.subs.drop(k) }

func (b *backupLink) handle(k uint32, m *nats.Msg) {
	var req backup.Request
	if err := json.Unmarshal(m.Data, &req); err != nil || req.Copy == "" {
		b.answer(m, backup.Reply{Error: "not a copy's request"})
		return
	}
	switch req.Op {
	case backup.OpHold:
		ttl := time.Duration(min(max(req.TTLMillis, 1), 60_000)) * time.Millisecond
		b.answer(m, replyOf(b.sys.HoldBundles(k, req.Copy, time.Now().Add(ttl))))
	case backup.OpCapture:
		b.capture(k, req.Copy, m)
	case backup.OpRelease:
		whole, err := b.sys.ReleaseBundles(k, req.Copy)
		r := replyOf(err)
		r.Whole = whole && err == nil
		b.answer(m, r)
	case backup.OpRead:
		b.read(k, req, m)
	case backup.OpDone:
		b.forget(req.Copy)
		b.answer(m, backup.Reply{})
	default:
		b.answer(m, backup.Reply{Error: "unknown op " + strconv.Quote(req.Op)})
	}
}

// capture takes the shard's state for the copy and answers at once; the state is encoded
// beside, and a read waits for it.
func (b *backupLink) capture(k uint32, id string, m *nats.Msg) {
	encode, lsn, slot, err := b.sys.CaptureHeld(k, id)
	if err != nil {
		b.answer(m, replyOf(err))
		return
	}
	st := &keptState{ready: make(chan struct{})}
	b.mu.Lock()
	b.copyLocked(id).states[k] = st
	b.mu.Unlock()
	go func() {
		st.data = encode()
		close(st.ready)
	}()
	b.answer(m, backup.Reply{LSN: lsn, Slot: slot})
}

// read answers a chunk of a captured state: its bytes from the offset, with the whole
// state's size in a header so that the reader knows when it has it all.
func (b *backupLink) read(k uint32, req backup.Request, m *nats.Msg) {
	b.mu.Lock()
	var st *keptState
	for _, c := range b.copies {
		if c.id == req.Copy {
			st, c.used = c.states[k], time.Now()
		}
	}
	b.mu.Unlock()
	if st == nil {
		b.readError(m, "no state captured for this copy here (forgotten, or the shard moved): take the copy again")
		return
	}
	select {
	case <-st.ready:
	case <-time.After(30 * time.Second):
		b.readError(m, "the state is still being encoded")
		return
	}
	if req.Offset < 0 || req.Offset > int64(len(st.data)) {
		b.readError(m, "offset out of the state")
		return
	}
	out := nats.NewMsg(m.Reply)
	out.Header.Set(backup.SizeHeader, strconv.Itoa(len(st.data)))
	out.Data = st.data[req.Offset:min(req.Offset+backup.ChunkSize, int64(len(st.data)))]
	_ = m.RespondMsg(out)
}

func (b *backupLink) readError(m *nats.Msg, why string) {
	out := nats.NewMsg(m.Reply)
	out.Header.Set(backup.ErrorHeader, "1")
	out.Data, _ = json.Marshal(backup.Reply{Error: why})
	_ = m.RespondMsg(out)
}

// copyLocked finds or makes copy id's states, keeping at most keptCopies and none
// unread for keptFor.
func (b *backupLink) copyLocked(id string) *keptCopy {
	now := time.Now()
	kept := b.copies[:0]
	var found *keptCopy
	for _, c := range b.copies {
		switch {
		case c.id == id:
			found = c
		case now.Sub(c.used) > keptFor:
			continue
		}
		kept = append(kept, c)
	}
	b.copies = kept
	if found == nil {
		found = &keptCopy{id: id, states: make(map[uint32]*keptState)}
		b.copies = append(b.copies, found)
		if len(b.copies) > keptCopies {
			b.copies = b.copies[len(b.copies)-keptCopies:]
		}
	}
	found.used = now
	return found
}

func (b *backupLink) forget(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, c := range b.copies {
		if c.id == id {
			b.copies = append(b.copies[:i], b.copies[i+1:]...)
			return
		}
	}
}

func (b *backupLink) answer(m *nats.Msg, r backup.Reply) {
	data, _ := json.Marshal(r)
	_ = m.Respond(data)
}

func replyOf(err error) backup.Reply {
	if err != nil {
		return backup.Reply{Error: err.Error()}
	}
	return backup.Reply{}
}
