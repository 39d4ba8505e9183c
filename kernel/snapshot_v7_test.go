package kernel

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/holdfast/holdfast/contract"
)

// testdata/snapshots/format7.bin was written by the build before snapshot format 8
// (def6ab6) from fixtureState, and format7.txt is what that build answered about it
// (fixtureDump). This build restores it and answers the same, writes it as format 8 and
// restores that to the same answers, and goes on serving it: a data directory written
// before opens after. Regenerate neither: they are the older build's.
func TestFormat7SnapshotOpensAndAnswersTheSame(t *testing.T) {
	b, err := os.ReadFile("testdata/snapshots/format7.bin")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/snapshots/format7.txt")
	if err != nil {
		t.Fatal(err)
	}
	if b[0] != 7 {
		t.Fatalf("fixture is format %d", b[0])
	}
	cfg := DefaultConfig()
	cfg.SlotMillis = 100
	k, err := Restore(cfg, b)
	if err != nil {
		t.Fatal(err)
	}
	if got := fixtureDump(k); got != string(want) {
		t.Fatalf("format 7 restored answers:\n%s\nthe older build answered:\n%s", got, want)
	}
	again, err := Restore(cfg, k.Snapshot(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := fixtureDump(again); got != string(want) {
		t.Fatalf("written again as format %d and restored:\n%s", snapshotFormat, got)
	}
	// And it serves: the sched lease's port, released by value with its token.
	var out Output
	c := &Command{Verb: contract.VerbReleaseValue, Tenant: "t", OperationID: "after", ObjectID: "n1/ports", Value: 30010,
		HolderID: "sched", LeaseLSN: 5, Epoch: 1, WholeLease: true}
	again.Apply(Entry{LSN: again.LastLSN() + 1, Slot: 17_958_000_010, Cmd: c}, &out)
	if out.Code != contract.CodeOK || out.Lease.State != LeaseReleased {
		t.Fatalf("release by value after the upgrade: %s %s", out.Code, out.Lease.State)
	}
	if err := again.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// The fixture's builder still builds what the older build built (the same answers), so
// the fixture and this build's own state agree.
func TestFixtureStateAnswersAsFormat7(t *testing.T) {
	want, err := os.ReadFile("testdata/snapshots/format7.txt")
	if err != nil {
		t.Fatal(err)
	}
	if got := fixtureDump(fixtureState(t)); got != string(want) {
		t.Fatalf("this build's fixture state answers:\n%s\nthe older build's:\n%s", got, want)
	}
}

// A command or snapshot of a format newer than this build reads is refused as such,
// naming both formats, never read as an older one (a downgrade past a format change).
func TestNewerFormatsAreRefusedNamingBoth(t *testing.T) {
	c := Command{Verb: contract.VerbCreateResource, Tenant: "t", OperationID: "o", ObjectID: "r"}
	b := c.AppendBinary(nil)
	b[0] = commandFormatGroup + 1
	err := DecodeCommand(b, &Command{})
	if !errors.Is(err, ErrNewerFormat) || !strings.Contains(err.Error(), fmt.Sprintf("format %d", commandFormatGroup+1)) ||
		!strings.Contains(err.Error(), fmt.Sprintf("to %d", commandFormatGroup)) {
		t.Fatalf("a newer command: %v", err)
	}
	k, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	snap := k.Snapshot(nil)
	snap[0] = snapshotFormat + 1
	_, err = Restore(DefaultConfig(), snap)
	if !errors.Is(err, ErrNewerFormat) || !strings.Contains(err.Error(), fmt.Sprintf("format %d", snapshotFormat+1)) ||
		!strings.Contains(err.Error(), fmt.Sprintf("to %d", snapshotFormat)) {
		t.Fatalf("a newer snapshot: %v", err)
	}
}
