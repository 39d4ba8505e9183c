package backup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// SaveOptions says which service to copy and how patiently.
type SaveOptions struct {
	Prefix  string
	Shards  uint32 // the service's shard count (its $SRV.INFO metadata)
	SlotMs  uint64 // its slot length
	Version string // the build taking the copy, for the header
	// Hold bounds each shard's hold on bundle steps (default 10 s): past it a shard lets
	// them go on its own, and the copy is taken again.
	Hold time.Duration
	// Attempts is how many times a copy whose holds did not all last, or that a shard
	// refused while moving, is taken (default 5).
	Attempts int
	// Timeout bounds each request (default 10 s).
	Timeout time.Duration
}

func (o *SaveOptions) defaults() {
	if o.Hold <= 0 {
		o.Hold = 10 * time.Second
	}
	if o.Attempts <= 0 {
		o.Attempts = 5
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
}

// Save takes a consistent copy of every shard of the service, while it serves.
func Save(ctx context.Context, nc *nats.Conn, o SaveOptions) (*Copy, error) {
	o.defaults()
	if o.Shards == 0 || o.SlotMs == 0 {
		return nil, errors.New("backup: the service's shard count and slot length are needed")
	}
	var err error
	for attempt := 1; attempt <= o.Attempts; attempt++ {
		var c *Copy
		if c, err = saveOnce(ctx, nc, o); err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
	}
	return nil, fmt.Errorf("backup: no consistent copy in %d attempts: %w", o.Attempts, err)
}

// saveOnce holds every shard, captures each, releases each, and reads the states out.
func saveOnce(ctx context.Context, nc *nats.Conn, o SaveOptions) (*Copy, error) {
	var raw [8]byte
	_, _ = rand.Read(raw[:])
	id := hex.EncodeToString(raw[:])
	s := &saver{nc: nc, o: o, id: id}
	defer s.each(ctx, func(k uint32) error { _, err := s.ask(ctx, k, Request{Op: OpDone}); return err })
	release := func() []bool {
		whole := make([]bool, o.Shards)
		_ = s.each(ctx, func(k uint32) error {
			r, err := s.ask(ctx, k, Request{Op: OpRelease})
			whole[k] = err == nil && r.Whole
			return nil
		})
		return whole
	}
	if err := s.each(ctx, func(k uint32) error {
		_, err := s.ask(ctx, k, Request{Op: OpHold, TTLMillis: o.Hold.Milliseconds()})
		return err
	}); err != nil {
		release()
		return nil, fmt.Errorf("holding bundle steps: %w", err)
	}
	c := &Copy{Header: Header{Format: Format, Taken: time.Now().UTC(), Version: o.Version, Prefix: o.Prefix,
		Shards: o.Shards, SlotMs: o.SlotMs, Parts: make([]Part, o.Shards)}, States: make([][]byte, o.Shards)}
	captureErr := s.each(ctx, func(k uint32) error {
		r, err := s.ask(ctx, k, Request{Op: OpCapture})
		c.Parts[k] = Part{Shard: k, LSN: r.LSN, Slot: r.Slot}
		return err
	})
	for k, ok := range release() {
		if !ok && captureErr == nil {
			captureErr = fmt.Errorf("shard %d did not hold its bundle steps until every shard was captured", k)
		}
	}
	if captureErr != nil {
		return nil, fmt.Errorf("capturing: %w", captureErr)
	}
	if err := s.each(ctx, func(k uint32) error {
		st, err := s.readState(ctx, k)
		c.States[k], c.Parts[k].Size, c.Parts[k].CRC = st, int64(len(st)), crc32.Checksum(st, castagnoli)
		return err
	}); err != nil {
		return nil, fmt.Errorf("reading the states: %w", err)
	}
	return c, nil
}

// saver is one attempt's requests.
type saver struct {
	nc *nats.Conn
	o  SaveOptions
	id string
}

// each runs fn for every shard at once and returns the first error.
func (s *saver) each(ctx context.Context, fn func(k uint32) error) error {
	errs := make([]error, s.o.Shards)
	var wg sync.WaitGroup
	for k := range s.o.Shards {
		wg.Go(func() { errs[k] = fn(k) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ask sends one request to shard k and decodes its answer.
func (s *saver) ask(ctx context.Context, k uint32, req Request) (Reply, error) {
	req.Copy = s.id
	data, _ := json.Marshal(req)
	rctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	m, err := s.nc.RequestWithContext(rctx, Subject(s.o.Prefix, k), data)
	if err != nil {
		return Reply{}, fmt.Errorf("shard %d: %s: %w", k, req.Op, err)
	}
	var r Reply
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return Reply{}, fmt.Errorf("shard %d: %s: unreadable answer: %w", k, req.Op, err)
	}
	if r.Error != "" {
		return r, fmt.Errorf("shard %d: %s: %s", k, req.Op, r.Error)
	}
	return r, nil
}

// readState reads shard k's captured state, chunk by chunk.
func (s *saver) readState(ctx context.Context, k uint32) ([]byte, error) {
	var st []byte
	for {
		data, _ := json.Marshal(Request{Op: OpRead, Copy: s.id, Offset: int64(len(st))})
		rctx, cancel := context.WithTimeout(ctx, 2*s.o.Timeout)
		m, err := s.nc.RequestMsgWithContext(rctx, &nats.Msg{Subject: Subject(s.o.Prefix, k), Data: data})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("shard %d: read: %w", k, err)
		}
		if m.Header.Get(ErrorHeader) != "" {
			var r Reply
			_ = json.Unmarshal(m.Data, &r)
			return nil, fmt.Errorf("shard %d: read: %s", k, r.Error)
		}
		size, err := strconv.Atoi(m.Header.Get(SizeHeader))
		if err != nil {
			return nil, fmt.Errorf("shard %d: read: an answer without the state's size", k)
		}
		if st == nil {
			st = make([]byte, 0, size)
		}
		st = append(st, m.Data...)
		switch {
		case len(st) == size:
			return st, nil
		case len(st) > size || len(m.Data) == 0:
			return nil, fmt.Errorf("shard %d: read: %d bytes of a state of %d", k, len(st), size)
		}
	}
}
