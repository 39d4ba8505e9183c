package bridge

import (
	"encoding/base64"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/holdfast/holdfast/contract"
)

// A listing's next_cursor belongs to that listing: the bridge seals the position the
// shards resume at (contract's cursors) with the listing's scope — its verb and, for a
// listing of one object, that object's id — and opens it again on the next page, so a
// cursor given to another listing (resource.list's to pool.list, one range's
// allocations to another's) is invalid_request instead of paging on from a position
// that means something else there (docs/api.md V.4). One place for every listing: the
// request's cursor field, whichever message holds it.

// scopedFields are the request fields that name the one object a listing walks.
var scopedFields = []protoreflect.Name{"range_id", "pool_id", "run_id"}

// paged reports whether m is a listing request: one with a string cursor field (a work
// checkpoint's cursor is a message, and no listing's).
func paged(m proto.Message) bool {
	f := m.ProtoReflect().Descriptor().Fields().ByName("cursor")
	return f != nil && f.Kind() == protoreflect.StringKind
}

// cursorScope is the scope of a listing request: its verb and its object's id.
func cursorScope(v contract.Verb, m proto.Message) string {
	r := m.ProtoReflect()
	fields := r.Descriptor().Fields()
	scope := v.String()
	for _, name := range scopedFields {
		if f := fields.ByName(name); f != nil && f.Kind() == protoreflect.StringKind {
			scope += "\x00" + r.Get(f).String()
		}
	}
	return scope
}

// sealCursor wraps a listing's position for the client; "" stays "" (the last page).
func sealCursor(scope, position string) string {
	if position == "" {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte(scope + "\x01" + position))
}

// openCursor unwraps the cursor field of a listing request (paged) in place (ok false:
// not a cursor of this listing). A request with none given is left as it is.
func openCursor(scope string, m proto.Message) bool {
	r := m.ProtoReflect()
	f := r.Descriptor().Fields().ByName("cursor")
	c := r.Get(f).String()
	if c == "" {
		return true
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return false
	}
	position, ok := strings.CutPrefix(string(b), scope+"\x01")
	if !ok || position == "" {
		return false
	}
	r.Set(f, protoreflect.ValueOfString(position))
	return true
}
