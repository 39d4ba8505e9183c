package messages

import (
	"strings"
	"testing"
)

// Every kind of wrongly typed value is reported with the path of its field, what the
// field must be and what was there — also the structural ones protojson reports only by
// position ("unexpected token").
func TestJSONTypeErrorsNameTheField(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"members": {"resource_id":"a"}}`, `members: must be a list, got an object (line 1:13)`},
		{`{"members": "x"}`, `members: must be a list, got the string "x"`},
		{`{"ttl_ms": "abc"}`, `ttl_ms: must be a whole number (or a string of one), got the string "abc"`},
		{`{"ttl_ms": 1.5}`, `ttl_ms: must be a whole number (or a string of one), got the number 1.5`},
		{`{"holder_id": {"a":1}}`, `holder_id: must be a string, got an object`},
		{`{"holder_id": 5}`, `holder_id: must be a string, got the number 5`},
		{`{"activate": "yes"}`, `activate: must be true or false, got the string "yes"`},
		{`{"members": [5]}`, `members[0]: must be an object, got the number 5`},
		{`{"members": [[1]]}`, `members[0]: must be an object, got a list`},
		{`{"members": [{"resource_id": "a"}, {"pool_id": [1]}]}`, `members[1].pool_id: must be a string, got a list`},
		{"{\n \"members\": [ {\"poolId\": \"p\", \"quantity\": {}} ]\n}", `members[0].quantity: must be a whole number (or a string of one), got an object (line 2:43)`},
		// Not a field's value: protojson's own text, which says what is wrong.
		{`{"holder_id": "a" "x": 1}`, `syntax error (line 1:19): unexpected token "x"`},
		{`{"holder_id": "a", "holder_id": "b"}`, `duplicate field "holder_id"`},
		{`{"ttl": 1}`, `unknown field "ttl"`},
	} {
		err := UnmarshalJSON([]byte(c.in), &ReserveRequest{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.in, err, c.want)
		}
	}
	var rel ReleaseRequest
	if err := UnmarshalJSON([]byte(`{"lease_epoch": "one"}`), &rel); err == nil ||
		!strings.HasSuffix(err.Error(), `ReleaseRequest: lease_epoch: must be a whole number (or a string of one), got the string "one" (line 1:17)`) {
		t.Errorf("release: %v", err)
	}
}
