package client

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/messages"
)

// Fence is a lease's fencing token: the lease id and its epoch. The holder
// presents it to activate, renew and release, and hands it to whatever it
// protects so that a write from an older holder (or from the same holder
// after a revoke) can be told apart and refused.
//
// Fences of the same shard are totally ordered: a later lease has a larger
// log position in its id, and a lease's epoch only grows. Every lease of a
// resource, pool or range lives in the shard of its placement key, so the
// fences of one guarded thing are always comparable.
type Fence struct {
	LeaseID string
	Epoch   uint64
}

// FenceOf returns the fence of a lease view (zero for nil).
func FenceOf(l *messages.Lease) Fence {
	return Fence{LeaseID: l.GetLeaseId(), Epoch: l.GetLeaseEpoch()}
}

// String renders the fence as "<lease_id>@<epoch>", e.g. "3-1042@1"; see
// ParseFence.
func (f Fence) String() string { return f.LeaseID + "@" + strconv.FormatUint(f.Epoch, 10) }

// IsZero reports whether f is the zero fence.
func (f Fence) IsZero() bool { return f.LeaseID == "" && f.Epoch == 0 }

// ParseFence parses the form of Fence.String.
func ParseFence(s string) (Fence, error) {
	at := strings.LastIndexByte(s, '@')
	if at <= 0 {
		return Fence{}, fmt.Errorf("invalid fence %q: want <lease_id>@<epoch>", s)
	}
	epoch, err := strconv.ParseUint(s[at+1:], 10, 64)
	if err != nil || epoch == 0 {
		return Fence{}, fmt.Errorf("invalid fence %q: epoch must be a positive integer", s)
	}
	f := Fence{LeaseID: s[:at], Epoch: epoch}
	if _, _, ok := contract.ParseLeaseID(f.LeaseID); !ok {
		return Fence{}, fmt.Errorf("invalid fence %q: %q is not a lease id", s, f.LeaseID)
	}
	return f, nil
}

// ErrIncomparableFences is returned when two fences belong to different
// shards (or one is not a valid fence): they guard different things.
var ErrIncomparableFences = errors.New("holdfast: fences of different shards cannot be compared")

// Compare orders f against g: -1 if f is older, 0 if equal, +1 if newer.
// Fences of one lease order by epoch; fences of different leases of the same
// shard order by the leases' issue. Fences of different shards, or invalid
// ones, give ErrIncomparableFences.
func (f Fence) Compare(g Fence) (int, error) {
	fs, fl, ok1 := contract.ParseLeaseID(f.LeaseID)
	gs, gl, ok2 := contract.ParseLeaseID(g.LeaseID)
	if !ok1 || !ok2 || fs != gs || f.Epoch == 0 || g.Epoch == 0 {
		return 0, ErrIncomparableFences
	}
	switch {
	case fl < gl:
		return -1, nil
	case fl > gl:
		return 1, nil
	case f.Epoch < g.Epoch:
		return -1, nil
	case f.Epoch > g.Epoch:
		return 1, nil
	}
	return 0, nil
}

// IsStale reports whether f is older than current, the newest fence known
// for the same guarded thing. A fence that cannot be compared with current is
// treated as stale: a guard must fail closed.
func (f Fence) IsStale(current Fence) bool {
	c, err := f.Compare(current)
	return err != nil || c < 0
}

// ErrStaleFence is returned by FenceGuard.Admit for a fence older than one it
// has seen.
var ErrStaleFence = errors.New("holdfast: stale fence")

// FenceGuard is a downstream check a protected system can keep: per key (a
// resource, a file, a row), the newest fence it has seen. A write carrying an
// older fence is refused. It is safe for concurrent use; it grows with the
// number of keys, which the caller bounds.
type FenceGuard struct {
	mu     sync.Mutex
	latest map[string]Fence
}

// Admit accepts f for key if it is not older than every fence seen for key,
// and remembers it. It returns ErrStaleFence (wrapped with both fences) or
// ErrIncomparableFences otherwise.
func (g *FenceGuard) Admit(key string, f Fence) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	cur, seen := g.latest[key]
	if seen {
		c, err := f.Compare(cur)
		if err != nil {
			return err
		}
		if c < 0 {
			return fmt.Errorf("%w: %s is older than %s", ErrStaleFence, f, cur)
		}
	} else if _, _, ok := contract.ParseLeaseID(f.LeaseID); !ok || f.Epoch == 0 {
		return ErrIncomparableFences
	}
	if g.latest == nil {
		g.latest = make(map[string]Fence)
	}
	g.latest[key] = f
	return nil
}

// Observe records a fence learned from elsewhere (a revoke, an event) without
// a write: later writes with older fences are refused. Older or incomparable
// fences are ignored.
func (g *FenceGuard) Observe(key string, f Fence) {
	_ = g.Admit(key, f)
}

// Latest returns the newest fence seen for key.
func (g *FenceGuard) Latest(key string) (Fence, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f, ok := g.latest[key]
	return f, ok
}
