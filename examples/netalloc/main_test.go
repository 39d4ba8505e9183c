package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast/examples/internal/testserver"
)

func TestNetAlloc(t *testing.T) {
	srv := testserver.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, []string{"--server", srv.URL, "--site", "ams1", "--owner", "router7"}, &out); err != nil {
		t.Fatalf("%v\noutput:\n%s", err, out.String())
	}
	for _, want := range []string{
		"site ams1: ranges ams1/vxlan [4096..16777215] and ams1/console [7000..7047]",
		"network blue: lease ", " active, values [4096 7000]",
		"network green: lease ", " active, values [5000]",
		"peering hold: lease ", " reserved, values [4097 4098]",
		"another owner asks for VNI 5000: value_busy",
		"router7 holds 3 leases",
		"router7 holds nothing; ams1/vxlan allocated=0, ams1/console allocated=0",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if n := strings.Count(out.String(), "released "); n != 3 {
		t.Errorf("%d releases:\n%s", n, out.String())
	}
}
