package contract

import (
	"errors"
	"fmt"
	"strings"
)

// DefaultPrefix is the subject prefix when none is configured (server flag --prefix).
const DefaultPrefix = "holdfast"

// StreamName is the JetStream stream the events go to.
const StreamName = "HOLDFAST_EVENTS"

// Subject is the subject of an operation: <prefix>.v1.<tenant>.<object>.<verb>.
func Subject(prefix, tenant, object, verb string) string {
	return prefix + ".v1." + tenant + "." + object + "." + verb
}

// ValidPrefix accepts one or more dot-separated subject tokens without wildcards,
// whitespace or control characters; the error says what is wrong.
func ValidPrefix(p string) error {
	if p == "" {
		return errors.New("prefix: must not be empty")
	}
	for _, tok := range strings.Split(p, ".") {
		if tok == "" {
			return fmt.Errorf("prefix %q: empty subject token", p)
		}
		for _, r := range tok {
			if r <= ' ' || r == '*' || r == '>' || r == 0x7f {
				return fmt.Errorf("prefix %q: subject tokens may not contain wildcards, spaces or control characters", p)
			}
		}
	}
	return nil
}
