package contract

import (
	"strings"
	"testing"
)

// A label's value is free text within a bound (seed 003 keeps owners' names and notes in
// them); every value of the old alphabet stays valid, so journals replay unchanged.
func TestLabelValuesAreFreeText(t *testing.T) {
	for _, v := range []string{"i-1", "5f1c2a9e-0b7d-4c1e-9a53-2d8f6e1b7c40", "web tier (blue)", "Zürich, rack 4 — row 2",
		"a=b", "x", strings.Repeat("é", MaxLabelValueLen/2), "_leading-underscore", "a:b/c@d+e"} {
		if !ValidLabelValue(v) {
			t.Errorf("%q refused", v)
		}
	}
	for _, v := range []string{"", " padded", "padded ", "tab\there", "new\nline", "nul\x00", "\xff\xfe", strings.Repeat("a", MaxLabelValueLen+1)} {
		if ValidLabelValue(v) {
			t.Errorf("%q accepted", v)
		}
	}
	if k, v, ok := ParseLabel("owner=web tier (blue)"); !ok || k != "owner" || v != "web tier (blue)" {
		t.Errorf("selector: %q %q %v", k, v, ok)
	}
}
