package messages

import (
	"encoding/base64"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// decodeFast decodes the common shape of the JSON form of a message — what clients and
// the server write: strings (a \u escape of a surrogate aside), integers as digits or
// quoted digits, base64 bytes, nested messages, lists and string maps — without
// protojson's generic decoder (several microseconds and a few dozen allocations per
// request, the JSON path's cost over protobuf's). It reports false for anything else, or
// anything it is not certain protojson would accept exactly as it would: a surrogate's
// escape, a null, a number with a fraction or an exponent, an unknown field in strict
// mode, a duplicate, trailing data, anything malformed. The caller then decodes with
// protojson, whose answer (and error text) stands (protojson resets m first: it may be
// partly set).
//
// It does not set fields one by one through protobuf reflection (half its time went
// there, boxing every value): it writes what it reads as the message's protobuf binary
// form and hands that to protobuf's table-driven decoder, as fast as the protobuf path.
//
// So decodeFast needs only to be right about what it accepts: FuzzUnmarshalJSON and
// TestFastDecodeMatchesProtojson check that whatever it accepts, protojson accepts as
// the same message.
func decodeFast(b []byte, m protoreflect.Message, tolerant bool) bool {
	bp := wireBufs.Get().(*[]byte)
	defer wireBufs.Put(bp)
	d := fastDec{b: b, tolerant: tolerant, out: (*bp)[:0]}
	d.ws()
	ok := d.message(m.Descriptor())
	d.ws()
	ok = ok && d.i == len(d.b)
	if cap(d.out) <= maxPooledWire {
		*bp = d.out
	}
	return ok && proto.UnmarshalOptions{Merge: true}.Unmarshal(d.out, m.Interface()) == nil
}

// wireBufs holds the binary forms decodeFast writes; one beyond maxPooledWire is not kept.
var wireBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

const maxPooledWire = 64 << 10

// maxFastDepth bounds nesting (a skipped unknown value included); deeper input goes to
// protojson.
const maxFastDepth = 32

type fastDec struct {
	b        []byte
	i        int
	tolerant bool
	depth    int
	out      []byte // the binary form written so far
	esc      []byte // unescaped strings, appended one after another
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
		case c == '\\':
			return d.unescape(start)
		case c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		d.i++
	}
	return nil, false
}

// unescape reads the rest of a string that has an escape at d.i (its content began at
// start) and returns it unescaped, in d.esc: appended, never overwritten, so a string
// returned earlier (a map's key) stays as it was. A \u escape of a surrogate is left to
// protojson (it pairs them, or refuses a lone one), as is anything malformed.
func (d *fastDec) unescape(start int) ([]byte, bool) {
	from := len(d.esc)
	d.esc = append(d.esc, d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			s := d.esc[from:]
			return s, utf8.Valid(s)
		case c < 0x20:
			return nil, false
		case c != '\\':
			d.esc = append(d.esc, c)
			d.i++
			continue
		}
		if d.i+1 >= len(d.b) {
			return nil, false
		}
		switch e := d.b[d.i+1]; e {
		case '"', '\\', '/':
			d.esc = append(d.esc, e)
		case 'b':
			d.esc = append(d.esc, '\b')
		case 'f':
			d.esc = append(d.esc, '\f')
		case 'n':
			d.esc = append(d.esc, '\n')
		case 'r':
			d.esc = append(d.esc, '\r')
		case 't':
			d.esc = append(d.esc, '\t')
		case 'u':
			r, ok := hex4(d.b[d.i+2:])
			if !ok || utf16.IsSurrogate(r) {
				return nil, false
			}
			d.esc = utf8.AppendRune(d.esc, r)
			d.i += 4
		default:
			return nil, false
		}
		d.i += 2
	}
	return nil, false
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// message reads an object of message type md and writes its fields.
func (d *fastDec) message(md protoreflect.MessageDescriptor) bool {
	if d.depth++; d.depth > maxFastDepth || !d.next('{') {
		return false
	}
	defer func() { d.depth-- }()
	fields := fieldsOf(md)
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
		return d.field(fd)
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

// field reads the value of fd and writes it: a list as one record per element
// (protobuf's decoder takes unpacked elements of a packed field too), a map as one entry
// message per key.
func (d *fastDec) field(fd protoreflect.FieldDescriptor) bool {
	if d.peek() == 'n' {
		return false // null: protojson's rules for it differ by field
	}
	switch {
	case fd.IsList():
		if !d.next('[') {
			return false
		}
		return d.items(']', func() bool { return d.value(fd) })
	case fd.IsMap():
		if fd.MapKey().Kind() != protoreflect.StringKind || fd.MapValue().Kind() != protoreflect.StringKind || !d.next('{') {
			return false
		}
		keys := map[string]bool{} // a set, not a scan: a large map must not cost its square
		return d.items('}', func() bool {
			k, ok := d.str()
			if !ok || !d.next(':') {
				return false
			}
			v, ok := d.str()
			if !ok || keys[string(k)] {
				return false // protojson refuses a key twice
			}
			keys[string(k)] = true
			start := d.open(fd.Number())
			d.out = protowire.AppendTag(d.out, 1, protowire.BytesType)
			d.out = protowire.AppendBytes(d.out, k)
			d.out = protowire.AppendTag(d.out, 2, protowire.BytesType)
			d.out = protowire.AppendBytes(d.out, v)
			d.close(start)
			return true
		})
	}
	return d.value(fd)
}

// value reads one value of fd (a list's element, or the field's value) and writes it as
// a record of field fd.
func (d *fastDec) value(fd protoreflect.FieldDescriptor) bool {
	num := fd.Number()
	switch fd.Kind() {
	case protoreflect.MessageKind:
		start := d.open(num)
		if !d.message(fd.Message()) {
			return false
		}
		d.close(start)
		return true
	case protoreflect.StringKind:
		s, ok := d.str()
		d.out = protowire.AppendTag(d.out, num, protowire.BytesType)
		d.out = protowire.AppendBytes(d.out, s)
		return ok
	case protoreflect.BoolKind:
		var v uint64
		switch {
		case d.literal("true"):
			v = 1
		case d.literal("false"):
		default:
			return false
		}
		d.out = protowire.AppendTag(d.out, num, protowire.VarintType)
		d.out = protowire.AppendVarint(d.out, v)
		return true
	case protoreflect.BytesKind:
		s, ok := d.str()
		if !ok {
			return false
		}
		// protojson's choice of alphabet and padding.
		enc := base64.StdEncoding
		if strings.ContainsAny(string(s), "-_") {
			enc = base64.URLEncoding
		}
		if len(s)%4 != 0 {
			enc = enc.WithPadding(base64.NoPadding)
		}
		start := d.open(num)
		d.out = append(d.out, make([]byte, enc.DecodedLen(len(s)))...)
		n, err := enc.Decode(d.out[start:], s)
		d.out = d.out[:start+n]
		d.close(start)
		return err == nil
	case protoreflect.Uint64Kind, protoreflect.Uint32Kind:
		limit := uint64(1<<64 - 1)
		if fd.Kind() == protoreflect.Uint32Kind {
			limit = 1<<32 - 1
		}
		u, _, ok := d.number(false, limit)
		d.out = protowire.AppendTag(d.out, num, protowire.VarintType)
		d.out = protowire.AppendVarint(d.out, u)
		return ok
	case protoreflect.Int64Kind, protoreflect.Int32Kind:
		limit := uint64(1<<63 - 1)
		if fd.Kind() == protoreflect.Int32Kind {
			limit = 1<<31 - 1
		}
		v, ok := d.signed(limit)
		d.out = protowire.AppendTag(d.out, num, protowire.VarintType)
		d.out = protowire.AppendVarint(d.out, uint64(v)) // int32 too: sign-extended, as protobuf writes it
		return ok
	}
	return false // enums, floats, fixed and zigzag integers: protojson's
}

// open starts a length-delimited record of field num whose content follows; close
// writes its length in front of the content once it is known, moving the content up by
// the length's size. The schema has no recursive message and nests five deep, so no byte
// moves more than five times (unknown fields, which may nest deeper, are skipped, not
// written).
func (d *fastDec) open(num protowire.Number) int {
	d.out = protowire.AppendTag(d.out, num, protowire.BytesType)
	return len(d.out)
}

func (d *fastDec) close(start int) {
	n := len(d.out) - start
	size := protowire.SizeVarint(uint64(n))
	d.out = append(d.out, make([]byte, size)...)
	copy(d.out[start+size:], d.out[start:start+n])
	protowire.AppendVarint(d.out[start:start], uint64(n))
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
func (d *fastDec) signed(limit uint64) (int64, bool) {
	u, neg, ok := d.number(true, limit+1)
	switch {
	case !ok || (!neg && u > limit):
		return 0, false
	case neg:
		return int64(-u), true // -u wraps to the most negative value at limit+1
	}
	return int64(u), true
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

// skipString passes over a string (an unknown field's name or value), checked as str
// checks one.
func (d *fastDec) skipString() bool {
	_, ok := d.str()
	return ok
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
