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

// paging is where a listing request keeps its cursor and the one object it walks,
// found once per verb (verbSpec.bind), not per request.
type paging struct {
	cursor protoreflect.FieldDescriptor   // nil: not a listing
	scoped []protoreflect.FieldDescriptor // range_id, pool_id, run_id where the request has them
}

// pagingOf finds a request's cursor field — a string one: a work checkpoint's cursor is
// a message, and no listing's — and the fields that name the object it walks.
func pagingOf(m proto.Message) paging {
	fields := m.ProtoReflect().Descriptor().Fields()
	f := fields.ByName("cursor")
	if f == nil || f.Kind() != protoreflect.StringKind {
		return paging{}
	}
	p := paging{cursor: f}
	for _, name := range []protoreflect.Name{"range_id", "pool_id", "run_id"} {
		if o := fields.ByName(name); o != nil && o.Kind() == protoreflect.StringKind {
			p.scoped = append(p.scoped, o)
		}
	}
	return p
}

// scope is a listing request's scope: its verb and its object's id.
func (p paging) scope(v contract.Verb, m proto.Message) string {
	r := m.ProtoReflect()
	scope := v.String()
	for _, f := range p.scoped {
		scope += "\x00" + r.Get(f).String()
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

// open unwraps the cursor field of a listing request in place (ok false: not a cursor
// of this listing). A request with none given is left as it is.
func (p paging) open(scope string, m proto.Message) bool {
	r := m.ProtoReflect()
	c := r.Get(p.cursor).String()
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
	r.Set(p.cursor, protoreflect.ValueOfString(position))
	return true
}
