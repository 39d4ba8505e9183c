package client

import (
	"math/rand/v2"
	"testing"

	"github.com/holdfast/holdfast/kernel"
)

// The client checks ids before a request leaves, with its own copy of the rules: the
// client layer may not import the kernel. This test keeps the copies in step, so the
// client never rejects what the server accepts or sends what it would refuse.
func TestIDRulesAgreeWithKernel(t *testing.T) {
	const alphabet = "aZ09_-:/@+.- \x00é*>"
	rng := rand.New(rand.NewPCG(1, 2))
	inputs := []string{"", "0", "00", "0-1", "1-0", "01-1", "1-01", "-1", "1-", "4294967295-1",
		"4294967296-1", "1-18446744073709551615", "1-18446744073709551616", "a/b", "a:b@c+d"}
	for n := 0; n < 200_000; n++ {
		b := make([]byte, rng.IntN(132))
		for i := range b {
			if rng.IntN(3) == 0 {
				b[i] = "0123456789-"[rng.IntN(11)]
			} else {
				b[i] = alphabet[rng.IntN(len(alphabet))]
			}
		}
		inputs = append(inputs, string(b))
	}
	for _, s := range inputs {
		if got, want := ValidTenant(s), kernel.ValidTenant(s); got != want {
			t.Fatalf("ValidTenant(%q) = %v, kernel says %v", s, got, want)
		}
		if got, want := ValidID(s), kernel.ValidObjectID(s); got != want {
			t.Fatalf("ValidID(%q) = %v, kernel says %v", s, got, want)
		}
		if got, want := validID(s, 64), kernel.ValidOperationID(s); got != want {
			t.Fatalf("operation id %q: %v, kernel says %v", s, got, want)
		}
		sh, lsn, ok := parseLeaseID(s)
		ksh, klsn, kok := kernel.ParseLeaseID(s)
		if sh != ksh || lsn != klsn || ok != kok {
			t.Fatalf("parseLeaseID(%q) = %d %d %v, kernel says %d %d %v", s, sh, lsn, ok, ksh, klsn, kok)
		}
	}
}
