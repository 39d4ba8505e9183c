package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// The publisher's side of fast batches (Batches decides; this sends and listens).

// JetStream error codes a fast-batch publish can be answered with.
const (
	errBatchUnknown  = 10208 // the stream does not know (any more) the batch
	errBatchDisabled = 10205 // the stream does not take batched publishes
)

// batchReply is the reply subject of a send: <inbox>.<shard>.<batch>.<flow>.fail.<seq>.<op>.$FI,
// nats-server's fast-batch form with one flow acknowledgement per stored message and a
// gap ending the batch.
func (s *shardPub) batchReply(b Send) string {
	return s.p.inbox + "." + s.label + "." + b.Batch + ".1.fail." + strconv.FormatUint(b.Seq, 10) + "." + strconv.Itoa(b.Op) + ".$FI"
}

// sendBatched sends, in order, every entry the current batch can take.
func (s *shardPub) sendBatched(gen uint64) {
	if !s.lockServing(gen) {
		return
	}
	s.sends = s.bat.Sendable(time.Now(), s.sends[:0])
	sends := s.sends
	s.mu.Unlock()
	for i, b := range sends {
		b.Msg.Reply = s.batchReply(b)
		if err := s.p.send(b.Msg); err != nil {
			s.batchTrouble(b.Batch, b.Msg, err)
			clear(sends[i:])
			return
		}
	}
	clear(sends)
}

// batchTrouble records that batch id may have lost a message: it is ended before
// anything more is sent.
func (s *shardPub) batchTrouble(id string, msg *nats.Msg, err error) {
	s.mu.Lock()
	if s.bat.Closing() {
		s.bat.Refused(id)
	} else {
		s.bat.Troubled(id)
	}
	s.mu.Unlock()
	s.p.metrics.PublishError(s.label)
	if msg != nil {
		s.p.log.Warn("event publish failed; the batch is ended and what it did not store is sent again", "shard", s.shard,
			"subject", msg.Subject, "err", err)
	} else {
		s.p.log.Warn("event batch trouble; it is ended and what it did not store is sent again", "shard", s.shard, "err", err)
	}
	s.wakeAck()
}

// drainBatched waits until at most limit entries are unacknowledged (or, with orWork,
// until more events are queued), ending a batch in trouble and sending again what it did
// not store. False when publishing was aborted.
func (s *shardPub) drainBatched(limit int, orWork bool) bool {
	var work chan struct{}
	if orWork {
		work = s.wake
	}
	for {
		s.mu.Lock()
		gen := s.gen
		closing, unsent := s.bat.Closing(), s.bat.Unsent()
		if !closing && unsent {
			s.mu.Unlock()
			s.sendBatched(gen)
			if s.aborted() {
				return false
			}
			continue
		}
		if !closing && (s.bat.Pending() <= limit || (orWork && len(s.waiting) > 0)) {
			s.mu.Unlock()
			return true
		}
		end, wait := s.bat.Due(time.Now(), s.p.cfg.AckWait)
		var eob Send
		tries := 0
		if end {
			eob, tries = s.bat.Close(time.Now())
		}
		s.mu.Unlock()
		if end {
			if tries > 1 && !s.backoff(tries-2) {
				return false
			}
			if !s.awaitServing(gen) {
				if s.aborted() {
					return false
				}
				continue
			}
			s.p.metrics.PublishError(s.label)
			if tries == 1 || tries%50 == 0 {
				s.p.log.Info("ending an event batch to learn what it stored", "shard", s.shard, "batch", eob.Batch, "attempt", tries)
			}
			m := nats.NewMsg(s.p.prefix + ".v1._.events.batch.end")
			m.Reply = s.batchReply(eob)
			if err := s.p.send(m); err != nil {
				s.mu.Lock()
				s.bat.Refused(eob.Batch)
				s.mu.Unlock()
			}
			continue
		}
		if !s.await(wait, work) {
			return false
		}
	}
}

// onBatchReply handles what the stream says about batch id: a flow acknowledgement, a
// gap or an error report, the PubAck that ends the batch, or a status when no stream
// took the message.
func (s *shardPub) onBatchReply(id string, m *nats.Msg) {
	defer s.wakeAck()
	if len(m.Data) == 0 {
		err := ackError(m) // a status: no responders, or another
		s.mu.Lock()
		closing := s.bat.Closing()
		s.mu.Unlock()
		if closing {
			s.mu.Lock()
			s.bat.Refused(id)
			s.mu.Unlock()
			s.p.metrics.PublishError(s.label)
			return
		}
		s.batchTrouble(id, nil, err)
		return
	}
	switch {
	case bytes.HasPrefix(m.Data, []byte(`{"type":"ack"`)):
		seq, ok := jsonUint(m.Data, `"seq":`)
		if !ok {
			return
		}
		s.mu.Lock()
		if s.bat.Stored(id, seq) {
			s.advanceLocked()
		}
		s.mu.Unlock()
		return
	case bytes.HasPrefix(m.Data, []byte(`{"type":"gap"`)):
		// A message of the batch went missing: the stream ends the batch and its PubAck
		// follows with the count stored.
		s.p.metrics.PublishError(s.label)
		return
	case bytes.HasPrefix(m.Data, []byte(`{"type":"err"`)):
		var r struct {
			Seq   uint64    `json:"seq"`
			Error *apiError `json:"error"`
		}
		_ = json.Unmarshal(m.Data, &r)
		s.batchTrouble(id, nil, fmt.Errorf("stream refused event %d of the batch: %v", r.Seq, r.Error))
		return
	}
	s.onBatchEnd(id, m)
}

// onBatchEnd takes a batch's PubAck: stored (so many), forgotten, or refused.
func (s *shardPub) onBatchEnd(id string, m *nats.Msg) {
	var r struct {
		Error *apiError `json:"error"`
		Batch string    `json:"batch"`
		Count uint64    `json:"count"`
	}
	if err := json.Unmarshal(m.Data, &r); err != nil {
		s.batchTrouble(id, nil, fmt.Errorf("unreadable acknowledgement: %w", err))
		return
	}
	switch {
	case r.Error == nil:
		s.mu.Lock()
		s.bat.Ended(id, r.Count, true)
		s.advanceLocked()
		s.mu.Unlock()
	case r.Error.ErrCode == errBatchUnknown:
		// Forgotten (idle past the stream's batch timeout, or ended meanwhile): nothing
		// more of it can be stored; what is not acknowledged goes out again.
		s.mu.Lock()
		s.bat.Ended(id, 0, false)
		s.mu.Unlock()
	default:
		if r.Error.ErrCode == errBatchDisabled {
			s.p.log.Error("the events stream no longer takes batched publishes (allow_batched); events wait until it does", "shard", s.shard)
		}
		s.batchTrouble(id, nil, fmt.Errorf("stream refused the batch: %v", r.Error))
	}
}

type apiError struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

func (e *apiError) String() string {
	if e == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%s (code %d, err_code %d)", e.Description, e.Code, e.ErrCode)
}

// jsonUint reads the unsigned number after key in a small flat JSON object.
func jsonUint(data []byte, key string) (uint64, bool) {
	i := bytes.Index(data, []byte(key))
	if i < 0 {
		return 0, false
	}
	i += len(key)
	j := i
	for j < len(data) && data[j] >= '0' && data[j] <= '9' {
		j++
	}
	v, err := strconv.ParseUint(string(data[i:j]), 10, 64)
	return v, err == nil
}

func (s *shardPub) wakeAck() {
	select {
	case s.ackWake <- struct{}{}:
	default:
	}
}
