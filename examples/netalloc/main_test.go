package main

import (
	"strings"
	"testing"

	"github.com/holdfast/holdfast/internal/testserver"
)

func TestNetAlloc(t *testing.T) {
	out := testserver.Start(t).Run(t, run, "--site", "ams1", "--owner", "router7")
	testserver.WantAll(t, out,
		"site ams1: ranges ams1/vxlan [4096..16777215] and ams1/console [7000..7047]",
		"network blue: lease ", " active, values [4096 7000]",
		"network green: lease ", " active, values [5000]",
		"peering hold: lease ", " reserved, values [4097 4098]",
		"another owner asks for VNI 5000: value_busy",
		"router7 holds 3 leases",
		"router7 holds nothing; ams1/vxlan allocated=0, ams1/console allocated=0",
	)
	if n := strings.Count(out, "released "); n != 3 {
		t.Errorf("%d releases:\n%s", n, out)
	}
}
