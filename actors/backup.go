package actors

import (
	"errors"
	"fmt"
	"time"

	"github.com/holdfast/holdfast/kernel"
)

// Copies across shards (docs/design.md "Backups"). A copy of every shard is consistent
// when no shard's part holds a step of a bundle whose cause another shard's part lacks:
// a commit without its participant's prepare, a participant's mirror without the home's
// change, a prepare without its begin. A copy holds them whole if, while it is taken, no
// shard sequences a bundle step: each shard holds back its bundle messages and begins
// (one-shard writes go on), and says it holds only once every entry it sequenced before
// is journaled; every shard holds before any is captured; each hold lasts past every
// capture. A step in one shard's part was then sequenced before that shard's hold began,
// so its cause was sequenced before too: a bundle step (a begin, whose prepares leave
// before it is journaled) before its own shard's hold, so journaled before that hold was
// acknowledged; any other entry (a lease verb, an expiry) is journaled before the mirror
// it causes leaves. Either way before any capture. The caller (server/backup.go) holds
// every shard, captures each, and releases each, which says whether its hold lasted
// throughout; one that lapsed on its own bound makes the copy void (it is taken again).

// maxHeldBack bounds the bundle messages a shard keeps while it holds; past it they are
// dropped, which the protocol takes as it takes any lost message (resent, or asked for).
const maxHeldBack = 4096

// backupHold is a shard's hold for copy id: bundle steps wait until it ends.
type backupHold struct {
	id      string
	until   time.Time
	held    []any        // bundle messages that came meanwhile, handled when it ends
	through uint64       // the last entry sequenced before the hold began
	acks    []chan error // holdMsgs answered once every entry through there is journaled
}

// holdMsg asks a shard to hold its bundle steps for copy id until until.
type holdMsg struct {
	id    string
	until time.Time
	done  chan error
}

// captureMsg asks a holding shard for its state.
type captureMsg struct {
	id   string
	done chan captured
}

// captured is a shard's state at its last applied entry, durable (the kernel applies an
// entry once it is journaled), to be encoded beside the actor.
type captured struct {
	capture   *kernel.SnapshotCapture
	lsn, slot uint64
	err       error
}

// releaseMsg ends copy id's hold; done says whether it lasted until now.
type releaseMsg struct {
	id   string
	done chan bool
}

var errNotHolding = errors.New("the shard is not holding for this copy (its hold lapsed, or the shard moved)")

// backupMessage handles a copy's request.
func (s *shard) backupMessage(msg any) {
	switch m := msg.(type) {
	case *holdMsg:
		s.startHold(m)
	case *captureMsg:
		s.captureHeld(m)
	case *releaseMsg:
		s.releaseHold(m)
	}
}

// holding reports whether bundle steps wait for a copy now.
func (s *shard) holding() bool { return s.hold != nil }

// startHold begins (or extends) a hold for a copy. A hold for another copy is refused
// while one lasts: two copies at once would each void the other.
func (s *shard) startHold(m *holdMsg) {
	switch {
	case s.halted != nil || s.q == nil:
		m.done <- fmt.Errorf("shard %d halted", s.h.shard)
	case s.hold != nil && s.hold.id != m.id:
		m.done <- fmt.Errorf("shard %d is holding for another copy", s.h.shard)
	case s.hold != nil:
		s.hold.until = m.until
		s.hold.acks = append(s.hold.acks, m.done)
	default:
		s.hold = &backupHold{id: m.id, until: m.until, through: s.q.Sequenced(), acks: []chan error{m.done}}
		s.flushLater()
	}
	s.ackHold()
}

// ackHold answers the hold's requests once every entry sequenced before it is journaled
// (the kernel applies an entry once it is).
func (s *shard) ackHold() {
	if s.hold == nil || len(s.hold.acks) == 0 || s.applied() < s.hold.through {
		return
	}
	for _, done := range s.hold.acks {
		done <- nil
	}
	s.hold.acks = nil
}

// holdBack keeps a bundle message for the hold's end; true when it did.
func (s *shard) holdBack(m any) bool {
	if s.hold == nil {
		return false
	}
	if len(s.hold.held) < maxHeldBack {
		s.hold.held = append(s.hold.held, m)
	}
	return true
}

// captureHeld gives the shard's state to a copy it holds for.
func (s *shard) captureHeld(m *captureMsg) {
	if s.hold == nil || s.hold.id != m.id || !time.Now().Before(s.hold.until) || s.halted != nil {
		m.done <- captured{err: errNotHolding}
		return
	}
	m.done <- captured{capture: s.k.Capture(nil), lsn: s.k.LastLSN(), slot: s.k.LastSlot()}
}

// releaseHold ends a copy's hold and says whether it lasted until now.
func (s *shard) releaseHold(m *releaseMsg) {
	if s.hold == nil || s.hold.id != m.id {
		m.done <- false // lapsed on its bound (endHold), or never here
		return
	}
	whole := time.Now().Before(s.hold.until)
	s.endHold()
	m.done <- whole
}

// checkHold ends a hold past its bound (a copy whose caller went away).
func (s *shard) checkHold() {
	if s.hold != nil && !time.Now().Before(s.hold.until) {
		s.h.log.Warn("a copy's hold on bundle steps ended on its bound; that copy is void", "shard", s.h.shard, "copy", s.hold.id)
		s.endHold()
	}
}

// endHold lets bundle steps go on: the messages held back, then the parked begins.
func (s *shard) endHold() {
	held := s.hold.held
	for _, done := range s.hold.acks {
		done <- errNotHolding
	}
	s.hold = nil
	if s.halted != nil || s.q == nil {
		return
	}
	for _, m := range held {
		s.bundleMessage(m)
	}
	s.retryParked(time.Now())
	s.flushLater()
}

// backupWait bounds how long a copy's call waits for its shard.
const backupWait = 10 * time.Second

// askShard sends m to shard k's actor and waits for its answer on done, within backupWait.
func askShard[T any](s *System, k uint32, m any, done chan T) (T, error) {
	var zero T
	pid := s.hosts[k].pid.Load()
	if pid == nil {
		return zero, fmt.Errorf("shard %d: %s", k, notServed)
	}
	s.root.Send(pid, m)
	select {
	case v := <-done:
		return v, nil
	case <-time.After(backupWait):
		return zero, fmt.Errorf("shard %d did not answer within %v", k, backupWait)
	}
}

// HoldBundles makes shard k hold its bundle steps for copy id until until (or until
// ReleaseBundles), so that copies of every shard taken meanwhile agree.
func (s *System) HoldBundles(k uint32, id string, until time.Time) error {
	done := make(chan error, 1)
	err, werr := askShard(s, k, &holdMsg{id: id, until: until, done: done}, done)
	if werr != nil {
		return werr
	}
	return err
}

// CaptureHeld returns shard k's state for copy id, which it must be holding for, at lsn
// and slot: encode gives the kernel's snapshot encoding of it, and may run on any
// goroutine, later (the shard goes on meanwhile).
func (s *System) CaptureHeld(k uint32, id string) (encode func() []byte, lsn, slot uint64, err error) {
	done := make(chan captured, 1)
	c, err := askShard(s, k, &captureMsg{id: id, done: done}, done)
	if err == nil {
		err = c.err
	}
	if err != nil {
		return nil, 0, 0, fmt.Errorf("shard %d: %w", k, err)
	}
	return func() []byte { return c.capture.AppendTo(make([]byte, 0, c.capture.Size())) }, c.lsn, c.slot, nil
}

// ReleaseBundles ends shard k's hold for copy id; true when it lasted until now (a copy
// whose holds did not all last is void).
func (s *System) ReleaseBundles(k uint32, id string) (bool, error) {
	done := make(chan bool, 1)
	return askShard(s, k, &releaseMsg{id: id, done: done}, done)
}
