// Package history is the record of an adversarial run against a real Holdfast server:
// every request a client sent and what came back (or did not), with monotonic
// invocation and response times, every event read from the HOLDFAST_EVENTS stream, and
// every fault the nemesis injected. A history is a list of Records; on disk it is JSON
// lines, one Record per line, so a run can be kept (`-history FILE`) and checked again
// offline (check.CheckFile).
package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Record kinds.
const (
	KindMeta  = "meta"  // a round starts: its configuration (Meta)
	KindCall  = "call"  // one attempt of one request and its reply or transport error
	KindEvent = "event" // one message of the HOLDFAST_EVENTS stream, read at the end of a round
	KindFault = "fault" // one fault injected by the nemesis, from Invoke to Return
)

// Transport errors of a call (Record.Err): the request got no reply.
const (
	ErrTimeout      = "timeout"       // no reply within the client's deadline
	ErrNoResponders = "no_responders" // nobody served the subject (server down)
	ErrConnClosed   = "conn_closed"   // the client's connection closed with the request in flight
	ErrOther        = "transport"     // any other transport failure
)

// Intents mark requests whose expected answer the harness knows in advance.
const (
	IntentWrongTenant = "wrong_tenant" // ids of one tenant sent in another: must read as absent
	IntentUnknownID   = "unknown_id"   // a lease id the shard never issued: lease_not_found
	IntentHostile     = "hostile"      // a hostile client's request (checked on its own)
)

// Meta describes a round: what the checkers need to interpret it.
type Meta struct {
	Round   int      `json:"round"`
	Tenants []string `json:"tenants"`
	Shards  uint32   `json:"shards"`
	SlotMs  int64    `json:"slot_ms"`
	Prefix  string   `json:"prefix"`
	Seed    int64    `json:"seed"`
	Note    string   `json:"note,omitempty"`
}

// Record is one line of a history.
type Record struct {
	Kind  string `json:"kind"`
	Round int    `json:"round"`

	// Calls.
	Client  int             `json:"client,omitempty"`
	Op      string          `json:"op,omitempty"`      // operation_id of a write; a unique id of a read
	Attempt int             `json:"attempt,omitempty"` // 1 for the first send of Op
	Verb    string          `json:"verb,omitempty"`    // "lease.reserve"
	Tenant  string          `json:"tenant,omitempty"`
	Subject string          `json:"subject,omitempty"`
	Proto   bool            `json:"proto,omitempty"`   // sent and answered as protobuf; Request/Reply hold the JSON form
	Intent  string          `json:"intent,omitempty"`  // see the Intent constants
	Request json.RawMessage `json:"request,omitempty"` // the JSON form of the request body
	Reply   json.RawMessage `json:"reply,omitempty"`   // the JSON form of the reply body
	Err     string          `json:"err,omitempty"`     // a transport error instead of a reply
	Invoke  int64           `json:"invoke"`            // ns since the run started (monotonic)
	Return  int64           `json:"return,omitempty"`  // ns since the run started (monotonic)

	// Events.
	Seq   uint64          `json:"seq,omitempty"` // stream sequence
	MsgID string          `json:"msg_id,omitempty"`
	Event json.RawMessage `json:"event,omitempty"`

	// Faults and meta.
	Fault  string `json:"fault,omitempty"`
	Detail string `json:"detail,omitempty"`
	Meta   *Meta  `json:"meta,omitempty"`
}

// Recorder collects the records of a run, safely from many goroutines, and optionally
// streams them to a file as they come.
type Recorder struct {
	start time.Time

	mu   sync.Mutex
	recs []Record
	w    *bufio.Writer
	f    *os.File
	err  error
}

// NewRecorder starts a recorder whose clock reads zero now. With a non-empty path every
// record is also written to that file (created or truncated).
func NewRecorder(path string) (*Recorder, error) {
	r := &Recorder{start: time.Now()}
	if path != "" {
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		r.f, r.w = f, bufio.NewWriterSize(f, 1<<20)
	}
	return r, nil
}

// Now is the recorder's monotonic clock: nanoseconds since it started.
func (r *Recorder) Now() int64 { return int64(time.Since(r.start)) }

// Add appends a record.
func (r *Recorder) Add(rec Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	if r.w != nil && r.err == nil {
		b, err := json.Marshal(rec)
		if err == nil {
			b = append(b, '\n')
			_, err = r.w.Write(b)
		}
		r.err = err
	}
}

// Records returns a copy of the records of round (all rounds when round < 0).
func (r *Recorder) Records(round int) []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Record, 0, len(r.recs))
	for _, rec := range r.recs {
		if round < 0 || rec.Round == round {
			out = append(out, rec)
		}
	}
	return out
}

// Drop forgets the in-memory records of rounds up to and including round (they stay in
// the file); long runs call it after checking a round.
func (r *Recorder) Drop(round int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	kept := r.recs[:0]
	for _, rec := range r.recs {
		if rec.Round > round {
			kept = append(kept, rec)
		}
	}
	clear(r.recs[len(kept):])
	r.recs = kept
}

// Flush writes buffered records to the file.
func (r *Recorder) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w != nil && r.err == nil {
		r.err = r.w.Flush()
	}
	return r.err
}

// Close flushes and closes the file.
func (r *Recorder) Close() error {
	err := r.Flush()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f != nil {
		if cerr := r.f.Close(); err == nil {
			err = cerr
		}
		r.f, r.w = nil, nil
	}
	return err
}

// Load reads a history file written by a Recorder.
func Load(path string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f)
}

// Read decodes JSON lines of Records.
func Read(rd io.Reader) ([]Record, error) {
	var out []Record
	err := Scan(rd, func(r Record) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

// Scan decodes JSON lines of Records one at a time, for files too large to hold.
func Scan(rd io.Reader, fn func(Record) error) error {
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var rec Record
		if err := json.Unmarshal(b, &rec); err != nil {
			return fmt.Errorf("history line %d: %w", line, err)
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
	return sc.Err()
}

// Write encodes records as JSON lines.
func Write(w io.Writer, recs []Record) error {
	bw := bufio.NewWriter(w)
	for _, rec := range recs {
		b, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		bw.Write(b)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}
