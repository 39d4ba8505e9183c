package messages

import (
	"encoding/base64"
	"strings"
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// decodeFast decodes the common shape of the JSON form of a message — what clients and
// the server write: unescaped strings, integers as digits or quoted digits, base64
// bytes, nested messages, lists and string maps — without protojson's generic decoder
// (several microseconds and a few dozen allocations per request, the JSON path's cost
// over protobuf's). It reports false for anything else, or anything it is not certain
// protojson would accept exactly as it would: a string with an escape, a null, a number
// with a fraction or an exponent, an unknown field in strict mode, a duplicate, trailing
// data, anything malformed. The caller then decodes with protojson, whose answer (and
// error text) stands; m may be partly set and must be reset first.
//
// So decodeFast needs only to be right about what it accepts: FuzzUnmarshalJSON and
// TestFastDecodeMatchesProtojson check that whatever it accepts, protojson accepts as
// the same message.
func decodeFast(b []byte, m protoreflect.Message, tolerant bool) bool {
	d := fastDec{b: b, tolerant: tolerant}
	d.ws()
	if !d.message(m) {
		return false
	}
	d.ws()
	return d.i == len(d.b)
}

// maxFastDepth bounds nesting (a skipped unknown value included); deeper input goes to
// protojson.
const maxFastDepth = 32

type fastDec struct {
	b        []byte
	i        int
	tolerant bool
	depth    int
}

// fieldTable finds a message's fields by their JSON (lowerCamelCase) and original names.
type fieldTable map[string]protoreflect.FieldDescriptor

var fieldTables sync.Map // protoreflect.FullName → fieldTable

func fieldsOf(md protoreflect.MessageDescriptor) fieldTable {
	if t, ok := fieldTables.Load(md.FullName()); ok {
		return t.(fieldTable)
	}
	fs := md.Fields()
	t := make(fieldTable, 2*fs.Len())
	for i := 0; i < fs.Len(); i++ {
		t[string(fs.Get(i).Name())] = fs.Get(i)
	}
	for i := 0; i < fs.Len(); i++ {
		t[fs.Get(i).JSONName()] = fs.Get(i) // protojson looks the JSON name up first
	}
	fieldTables.Store(md.FullName(), t)
	return t
}

func (d *fastDec) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// next skips whitespace and consumes c if it comes next.
func (d *fastDec) next(c byte) bool {
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

func (d *fastDec) peek() byte {
	d.ws()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// str reads a string without escapes, valid UTF-8, as a slice of the input.
func (d *fastDec) str() ([]byte, bool) {
	if !d.next('"') {
		return nil, false
	}
	start := d.i
	ascii := true
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			return s, ascii || utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		d.i++
	}
	return nil, false
}

func (d *fastDec) message(m protoreflect.Message) bool {
	if d.depth++; d.depth > maxFastDepth || !d.next('{') {
		return false
	}
	defer func() { d.depth-- }()
	fields := fieldsOf(m.Descriptor())
	var seen [4]uint64
	return d.items('}', func() bool {
		key, ok := d.str()
		if !ok || !d.next(':') {
			return false
		}
		fd := fields[string(key)]
		switch {
		case fd == nil && !d.tolerant:
			return false
		case fd == nil:
			return d.skip()
		}
		n := fd.Index()
		if n >= 64*len(seen) || seen[n/64]&(1<<(n%64)) != 0 {
			return false
		}
		seen[n/64] |= 1 << (n % 64)
		return d.field(m, fd)
	})
}

// items reads the items of an object or a list whose opening byte is read, up to and
// including close: item reads one, and commas separate them.
func (d *fastDec) items(close byte, item func() bool) bool {
	if d.next(close) {
		return true
	}
	for {
		if !item() {
			return false
		}
		if d.next(close) {
			return true
		}
		if !d.next(',') {
			return false
		}
	}
}

func (d *fastDec) field(m protoreflect.Message, fd protoreflect.FieldDescriptor) bool {
	if d.peek() == 'n' {
		return false // null: protojson's rules for it differ by field
	}
	switch {
	case fd.IsList():
		if !d.next('[') {
			return false
		}
		list := m.Mutable(fd).List()
		return d.items(']', func() bool {
			if fd.Kind() == protoreflect.MessageKind {
				e := list.NewElement()
				if !d.message(e.Message()) {
					return false
				}
				list.Append(e)
				return true
			}
			v, ok := d.scalar(fd)
			if ok {
				list.Append(v)
			}
			return ok
		})
	case fd.IsMap():
		if fd.MapKey().Kind() != protoreflect.StringKind || fd.MapValue().Kind() != protoreflect.StringKind || !d.next('{') {
			return false
		}
		mp := m.Mutable(fd).Map()
		return d.items('}', func() bool {
			k, ok := d.str()
			if !ok || !d.next(':') {
				return false
			}
			v, ok := d.str()
			key := protoreflect.ValueOfString(string(k)).MapKey()
			if !ok || mp.Has(key) {
				return false
			}
			mp.Set(key, protoreflect.ValueOfString(string(v)))
			return true
		})
	case fd.Kind() == protoreflect.MessageKind:
		return d.message(m.Mutable(fd).Message())
	}
	v, ok := d.scalar(fd)
	if ok {
		m.Set(fd, v)
	}
	return ok
}

func (d *fastDec) scalar(fd protoreflect.FieldDescriptor) (protoreflect.Value, bool) {
	switch fd.Kind() {
	case protoreflect.StringKind:
		s, ok := d.str()
		return protoreflect.ValueOfString(string(s)), ok
	case protoreflect.BoolKind:
		switch {
		case d.literal("true"):
			return protoreflect.ValueOfBool(true), true
		case d.literal("false"):
			return protoreflect.ValueOfBool(false), true
		}
	case protoreflect.BytesKind:
		s, ok := d.str()
		if !ok {
			break
		}
		// protojson's choice of alphabet and padding.
		enc := base64.StdEncoding
		if strings.ContainsAny(string(s), "-_") {
			enc = base64.URLEncoding
		}
		if len(s)%4 != 0 {
			enc = enc.WithPadding(base64.NoPadding)
		}
		out := make([]byte, enc.DecodedLen(len(s)))
		n, err := enc.Decode(out, s)
		return protoreflect.ValueOfBytes(out[:n]), err == nil
	case protoreflect.Uint64Kind:
		u, _, ok := d.number(false, 1<<64-1)
		return protoreflect.ValueOfUint64(u), ok
	case protoreflect.Uint32Kind:
		u, _, ok := d.number(false, 1<<32-1)
		return protoreflect.ValueOfUint32(uint32(u)), ok
	case protoreflect.Int64Kind:
		return d.signed(1<<63-1, func(v int64) protoreflect.Value { return protoreflect.ValueOfInt64(v) })
	case protoreflect.Int32Kind:
		return d.signed(1<<31-1, func(v int64) protoreflect.Value { return protoreflect.ValueOfInt32(int32(v)) })
	}
	return protoreflect.Value{}, false
}

func (d *fastDec) literal(word string) bool {
	d.ws()
	if !strings.HasPrefix(string(d.b[d.i:]), word) {
		return false
	}
	d.i += len(word)
	return true
}

// signed reads an integer of magnitude at most limit (limit+1 when negative).
func (d *fastDec) signed(limit uint64, value func(int64) protoreflect.Value) (protoreflect.Value, bool) {
	u, neg, ok := d.number(true, limit+1)
	switch {
	case !ok || (!neg && u > limit):
		return protoreflect.Value{}, false
	case neg:
		return value(int64(-u)), true // -u wraps to the most negative value at limit+1
	}
	return value(int64(u)), true
}

// number reads digits, bare or quoted, of at most limit: no sign unless signed, no
// leading zero, no fraction or exponent (protojson takes 1.0 and 1e3 for integers; they
// go to it).
func (d *fastDec) number(signed bool, limit uint64) (u uint64, neg bool, ok bool) {
	quoted := d.next('"')
	if !quoted {
		d.ws()
	}
	if signed && d.i < len(d.b) && d.b[d.i] == '-' {
		neg = true
		d.i++
	}
	start := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		digit := uint64(d.b[d.i] - '0')
		if u > (limit-digit)/10 {
			return 0, false, false
		}
		u = u*10 + digit
		d.i++
	}
	n := d.i - start
	if n == 0 || (n > 1 && d.b[start] == '0') {
		return 0, false, false
	}
	if d.i < len(d.b) {
		switch d.b[d.i] {
		case '.', 'e', 'E':
			return 0, false, false
		}
	}
	if quoted && !(d.i < len(d.b) && d.b[d.i] == '"') {
		return 0, false, false
	}
	if quoted {
		d.i++
	}
	return u, neg, true
}

// skip passes over one well-formed JSON value (an unknown field's, in tolerant mode).
func (d *fastDec) skip() bool {
	switch d.peek() {
	case '"':
		return d.skipString()
	case '{', '[':
		if d.depth++; d.depth > maxFastDepth {
			return false
		}
		defer func() { d.depth-- }()
		if d.b[d.i] == '[' {
			d.i++
			return d.items(']', d.skip)
		}
		d.i++
		return d.items('}', func() bool { return d.skipString() && d.next(':') && d.skip() })
	case 't':
		return d.literal("true")
	case 'f':
		return d.literal("false")
	case 'n':
		return d.literal("null")
	}
	return d.skipNumber()
}

// skipString passes over a string, escapes included, checking it as protojson would.
func (d *fastDec) skipString() bool {
	if !d.next('"') {
		return false
	}
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			ok := utf8.Valid(d.b[start:d.i])
			d.i++
			return ok
		case c < 0x20:
			return false
		case c == '\\':
			d.i++
			if d.i >= len(d.b) {
				return false
			}
			switch d.b[d.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			default:
				return false // \u escapes (surrogates) are left to protojson
			}
		}
		d.i++
	}
	return false
}

// skipNumber passes over a JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *fastDec) skipNumber() bool {
	digits := func() int {
		n := 0
		for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	if d.i < len(d.b) && d.b[d.i] == '-' {
		d.i++
	}
	start := d.i
	if n := digits(); n == 0 || (n > 1 && d.b[start] == '0') {
		return false
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if digits() == 0 {
			return false
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}
