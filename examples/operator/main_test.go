package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast/examples/internal/testserver"
)

func TestOperator(t *testing.T) {
	srv := testserver.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, []string{"--server", srv.URL}, &out); err != nil {
		t.Fatalf("%v\noutput:\n%s", err, out.String())
	}
	for _, want := range []string{
		"worker-1 is primary: lease ", "@1\n",
		": revoking, fence now ", "@2\n",
		": refused by the store (stale: true)",
		"@1: stale_epoch",
		"worker-2 before the reclaim: resource_busy",
		": revoked\n",
		"worker-2 is primary: lease ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
