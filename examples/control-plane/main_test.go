package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/holdfast/holdfast/internal/testserver"
)

func TestControlPlane(t *testing.T) {
	out := testserver.Start(t).Run(t, run, "--tenant", "cloud")
	t.Log(out)
	testserver.WantAll(t, out,
		"allocators: vxlan, vsock, mac (52:54:00:00:00:00..52:54:00:ff:ff:ff), node1/ports, node2/ports, net-blue/addresses (10.20.0.1..10.20.0.254, gateway 10.20.0.1 excluded)",
		"migration: imported 300 networks (vxlan allocated=300) and 40 instances' ports and MACs (node1 allocated=120, mac allocated=40); a clashing import: value_busy at leases[1]",
		"reconciliation: 300 vxlan allocations listed",
		"boot vm-7f3a in one call: ports [30010 30011 30012], cid ", ", address 10.20.0.2: one lease, 6 members",
		"who holds 52:54:00:", ": held lease ", " owner instance/vm-7f3a",
		"release port 30010 alone: lease_has_other_members",
		"hard delete vm-7f3a: 1 lease freed in ", "; 0 left; its ports, cid, mac and address are free",
		"64 concurrent allocators: 384 boots, no port handed out twice, 192 held; range resized under load to [30000..60000]",
	)
}

// -help prints the flags and exits 0, as every command's help does (it exited 1).
func TestHelpExitsZero(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "control-plane")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "-allocators") {
		t.Fatalf("--help: %v\n%s", err, out)
	}
}
