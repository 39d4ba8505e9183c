package actors

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/persistence"
)

// The crash test runs a shard under concurrent load in a child process (this test binary
// re-executed), kills it with SIGKILL at a random moment, and checks on restart that
// every write the child saw acknowledged is there with the same result, and that
// retrying an unacknowledged operation executes it at most once. Several rounds share
// one data directory, so later rounds recover state with history.

const (
	crashEnvDir   = "HOLDFAST_CRASH_DIR"
	crashEnvRound = "HOLDFAST_CRASH_ROUND"
	crashWorkers  = 16
	crashRes      = 24
)

func crashOptions(dir string) Options {
	o := testOptions(dir)
	o.SnapshotEvery = 300 // snapshots and compaction happen during the load
	o.SegmentSize = 64 << 10
	return o
}

// crashCommand is the command an operation id stands for: the parent rebuilds it from
// the id alone (and, for a release, the lease the child saw granted).
func crashCommand(op string, lease uint64) *kernel.Command {
	var round, g, i int
	var kind string
	fmt.Sscanf(strings.ReplaceAll(op, "-", " "), "c%d g%d i%d %s", &round, &g, &i, &kind)
	holder := fmt.Sprintf("h%d", g)
	if kind == "r" {
		return reserve(op, holder, fmt.Sprintf("r%d", (g*7+i+round)%crashRes), 600_000)
	}
	return release(op, holder, lease, 1)
}

func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnvDir)
	if dir == "" {
		t.Skip("runs only as the crash test's child process")
	}
	round, _ := strconv.Atoi(os.Getenv(crashEnvRound))
	sys := startSystem(t, crashOptions(dir))
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(os.Stdout, format+"\n", args...)
		mu.Unlock()
	}
	for r := 0; r < crashRes; r++ {
		do(t, sys, 0, createResource(fmt.Sprintf("create-%d", r), fmt.Sprintf("r%d", r)))
	}
	say("READY")
	var wg sync.WaitGroup
	for g := 0; g < crashWorkers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				op := fmt.Sprintf("c%d-g%d-i%d-r", round, g, i)
				say("SENT %s 0", op)
				r := do(t, sys, 0, crashCommand(op, 0))
				say("ACK %s %s %d %d", op, r.Code, r.LSN, r.Lease.LSN)
				if r.Code != contract.CodeOK {
					continue
				}
				x := fmt.Sprintf("c%d-g%d-i%d-x", round, g, i)
				say("SENT %s %d", x, r.Lease.LSN)
				rr := do(t, sys, 0, crashCommand(x, r.Lease.LSN))
				say("ACK %s %s %d %d", x, rr.Code, rr.LSN, rr.Lease.LSN)
			}
		}(g)
	}
	wg.Wait() // never: the parent kills us
}

type ack struct {
	code  string
	lsn   uint64
	lease uint64
}

func TestCrashSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	rounds := 4
	for round := 0; round < rounds; round++ {
		acked, sent := runCrashChild(t, dir, round, time.Duration(150+rng.IntN(500))*time.Millisecond)
		if len(acked) == 0 {
			t.Fatalf("round %d: the child acknowledged nothing", round)
		}
		checkRecoveredJournal(t, dir)
		sys := startSystem(t, crashOptions(dir))
		for op, a := range acked {
			r := do(t, sys, 0, crashCommand(op, sent[op]))
			if r.Code.String() != a.code || r.LSN != a.lsn || !r.FromRetryCache {
				t.Fatalf("round %d: acknowledged %s was %s@%d, after the crash %s@%d (retry=%v)",
					round, op, a.code, a.lsn, r.Code, r.LSN, r.FromRetryCache)
			}
		}
		unacked := 0
		for op, lease := range sent {
			if _, ok := acked[op]; ok {
				continue
			}
			unacked++
			first := do(t, sys, 0, crashCommand(op, lease))
			second := do(t, sys, 0, crashCommand(op, lease))
			if first.Code.IsRejection() || second.LSN != first.LSN || !second.FromRetryCache {
				t.Fatalf("round %d: unacknowledged %s executed twice or not at all: %+v then %+v", round, op, first, second)
			}
		}
		t.Logf("round %d: %d acknowledged writes intact, %d unacknowledged resolved once", round, len(acked), unacked)
		sys.Stop()
	}
}

// runCrashChild runs one child until a random moment, SIGKILLs it, and returns what it
// acknowledged and what it sent (with the lease a release names).
func runCrashChild(t *testing.T, dir string, round int, after time.Duration) (map[string]ack, map[string]uint64) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnvDir+"="+dir, crashEnvRound+"="+strconv.Itoa(round))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked, sent := map[string]ack{}, map[string]uint64{}
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 1 && f[0] == "READY":
				close(ready)
			case len(f) == 3 && f[0] == "SENT":
				lease, _ := strconv.ParseUint(f[2], 10, 64)
				sent[f[1]] = lease
			case len(f) == 5 && f[0] == "ACK":
				lsn, _ := strconv.ParseUint(f[3], 10, 64)
				lease, _ := strconv.ParseUint(f[4], 10, 64)
				acked[f[1]] = ack{code: f[2], lsn: lsn, lease: lease}
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("child never became ready")
	}
	time.Sleep(after)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-done
	_ = cmd.Wait()
	return acked, sent
}

// checkRecoveredJournal rebuilds the shard from its files alone and checks every kernel
// invariant: what a crash left on disk is a consistent state.
func checkRecoveredJournal(t *testing.T, dir string) {
	t.Helper()
	shardDir := dir + "/shard-000"
	cfg := crashOptions(dir).Kernel
	cfg.SlotMillis = 10
	snap, ok, err := persistence.LoadLatestSnapshot(shardDir)
	if err != nil {
		t.Fatal(err)
	}
	k, err := kernel.New(cfg)
	if ok {
		k, err = kernel.Restore(cfg, snap.Payload)
	}
	if err != nil {
		t.Fatal(err)
	}
	j, err := persistence.OpenFileJournal(shardDir, persistence.FileOptions{})
	if err != nil {
		t.Fatalf("journal after SIGKILL: %v", err)
	}
	defer j.Close()
	var c kernel.Command
	var out kernel.Output
	if err := j.Replay(k.LastLSN()+1, func(r persistence.Record) error {
		if err := kernel.DecodeCommand(r.Payload, &c); err != nil {
			return err
		}
		k.Apply(kernel.Entry{LSN: r.LSN, Slot: r.Slot, Cmd: &c}, &out)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := k.CheckInvariants(); err != nil {
		t.Fatalf("state rebuilt after SIGKILL: %v", err)
	}
}
