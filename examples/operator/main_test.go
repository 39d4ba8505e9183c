package main

import (
	"testing"

	"github.com/holdfast/holdfast/internal/testserver"
)

func TestOperator(t *testing.T) {
	out := testserver.Start(t).Run(t, run)
	testserver.WantAll(t, out,
		"worker-1 is primary: lease ", "@1\n",
		": revoking, fence now ", "@2\n",
		": refused by the store (stale: true)",
		"@1: stale_epoch",
		"worker-2 before the reclaim: resource_busy",
		": revoked\n",
		"worker-2 is primary: lease ",
	)
}
