package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/holdfast/holdfast/persistence"
)

// testHooks lets the fault-injection harness (integration/) move the server's clock and
// fail its journal writes from outside the process, through files in one directory:
//
//	clock_offset  a Go duration (e.g. "-5s", "90s") added to the machine's clock
//	fail          "write" or "fsync": every journal append fails that way until removed
//	bundle_step   a step of a bundle across shards (actors.StepBegun, ...), optionally
//	              followed by a shard: the process exits at once, as if killed, when a
//	              bundle reaches that step (on that shard)
//
// The files are re-read every 20ms. They exist only with --test-hooks-dir, which is for
// tests; production servers never set it.
type testHooks struct {
	dir    string
	offset atomic.Int64
	fail   atomic.Value // string
	step   atomic.Value // string: bundle_step's content
	stop   chan struct{}
}

func startTestHooks(dir string) *testHooks {
	h := &testHooks{dir: dir, stop: make(chan struct{})}
	h.fail.Store("")
	h.step.Store("")
	h.poll()
	go func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-t.C:
				h.poll()
			}
		}
	}()
	return h
}

func (h *testHooks) poll() {
	if b, err := os.ReadFile(filepath.Join(h.dir, "clock_offset")); err == nil {
		if d, err := time.ParseDuration(strings.TrimSpace(string(b))); err == nil {
			h.offset.Store(int64(d))
		}
	} else {
		h.offset.Store(0)
	}
	mode := ""
	if b, err := os.ReadFile(filepath.Join(h.dir, "fail")); err == nil {
		mode = strings.TrimSpace(string(b))
	}
	h.fail.Store(mode)
	step := ""
	if b, err := os.ReadFile(filepath.Join(h.dir, "bundle_step")); err == nil {
		step = strings.Join(strings.Fields(string(b)), " ")
	}
	h.step.Store(step)
}

// bundleStep ends the process, with nothing flushed or answered (kill -9's effect on what
// it has not written), when a bundle reaches the step bundle_step names.
func (h *testHooks) bundleStep(step string, shard uint32) {
	if want := h.step.Load().(string); want != "" && (want == step || want == fmt.Sprintf("%s %d", step, shard)) {
		fmt.Fprintf(os.Stderr, "test hooks: killed at bundle step %s on shard %d\n", step, shard)
		os.Exit(137)
	}
}

func (h *testHooks) close() { close(h.stop) }

// Now is the machine's clock moved by the offset.
func (h *testHooks) Now() time.Time { return time.Now().Add(time.Duration(h.offset.Load())) }

var errInjected = errors.New("injected by --test-hooks-dir")

func (h *testHooks) faults() *persistence.Faults {
	return &persistence.Faults{
		FailWrite: func() error {
			if h.fail.Load().(string) == "write" {
				return errInjected
			}
			return nil
		},
		FailSync: func() error {
			if h.fail.Load().(string) == "fsync" {
				return errInjected
			}
			return nil
		},
	}
}
