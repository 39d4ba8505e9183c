package contract

import "testing"

// The rejection codes with their categories and statuses, as docs/api.md §1 and §4 list them;
// every other code is ok or a domain code, committed, with neither.
func TestRejectionCodes(t *testing.T) {
	want := map[string]struct {
		category string
		status   int
	}{
		NameInvalidRequest: {CategoryDefinite, 400}, NameCommandTooLarge: {CategoryDefinite, 400},
		NameCrossShard: {CategoryDefinite, 400}, NameDuplicateMember: {CategoryDefinite, 400},
		NameBundleTooLarge: {CategoryDefinite, 400}, NameTTLOutOfRange: {CategoryDefinite, 400},
		NameSlotOverflow: {CategoryDefinite, 400}, NameOperationConflict: {CategoryDefinite, 409},
		NameFenceNotApplied: {CategoryDefinite, 412}, NameOverloaded: {CategoryDefinite, 503},
		NameOperationTableFull: {CategoryDefinite, 503}, NameLSNExhausted: {CategoryDefinite, 503},
		NameEngineHalted: {CategoryIndefinite, 503}, NameStorageFailure: {CategoryIndefinite, 503},
		NameTimeout: {CategoryIndefinite, 504}, NamePermissionDenied: {CategoryDefinite, 403},
	}
	for c := Code(0); c.Valid(); c++ {
		back, ok := ParseCode(c.String())
		if !ok || back != c {
			t.Errorf("%d: name %q does not parse back", c, c.String())
		}
		w, rejection := want[c.String()]
		if c.IsRejection() != rejection || c.Category() != w.category || c.HTTPStatus() != w.status {
			t.Errorf("%s: rejection %v category %q status %d, want %v %q %d", c, c.IsRejection(), c.Category(),
				c.HTTPStatus(), rejection, w.category, w.status)
		}
		delete(want, c.String())
	}
	if len(want) != 0 {
		t.Errorf("codes missing: %v", want)
	}
	if _, ok := ParseCode("nonsense"); ok {
		t.Error("nonsense parsed")
	}
}
