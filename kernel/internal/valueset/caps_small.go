//go:build valueset_small

package valueset

// Test-only capacities (go test -tags valueset_small): a few intervals
// already make trees several levels deep. An odd leaf capacity and an even
// inner one cover both rounding cases of splits and borrows.
const (
	leafCap   = 5
	innerCap  = 4
	maxHeight = 40
)
