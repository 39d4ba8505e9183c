package messages

import (
	"encoding/base64"
	"slices"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// appendMessageJSON appends the JSON form of any message of the wire as MarshalJSON
// defines it (protojson with original names, compacted) by walking its descriptor:
// fields in declaration order, unpopulated ones left out, 64-bit integers quoted, bytes
// in padded base64, map entries by key. A client's request then costs a fraction of
// protojson's reflection and the compaction pass after it. It reports false for what it
// does not handle as protojson would (a string that is not UTF-8, which protojson
// refuses, or a kind the schema does not use); MarshalJSON then asks protojson.
// TestFastEncodeMatchesProtojson holds it to protojson's output on every message type.
func appendMessageJSON(b []byte, m protoreflect.Message) ([]byte, bool) {
	b = append(b, '{')
	fields := m.Descriptor().Fields()
	first := true
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if !m.Has(fd) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendJSONString(b, string(fd.Name()))
		b = append(b, ':')
		var ok bool
		switch v := m.Get(fd); {
		case fd.IsList():
			b, ok = appendListJSON(b, fd, v.List())
		case fd.IsMap():
			b, ok = appendMapJSON(b, fd, v.Map())
		default:
			b, ok = appendValueJSON(b, fd, v)
		}
		if !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

func appendListJSON(b []byte, fd protoreflect.FieldDescriptor, l protoreflect.List) ([]byte, bool) {
	b = append(b, '[')
	for i := 0; i < l.Len(); i++ {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = appendValueJSON(b, fd, l.Get(i)); !ok {
			return b, false
		}
	}
	return append(b, ']'), true
}

func appendMapJSON(b []byte, fd protoreflect.FieldDescriptor, mp protoreflect.Map) ([]byte, bool) {
	if fd.MapKey().Kind() != protoreflect.StringKind {
		return b, false
	}
	keys := make([]string, 0, mp.Len())
	mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
		keys = append(keys, k.String())
		return true
	})
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		if !utf8.ValidString(k) {
			return b, false
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		var ok bool
		if b, ok = appendValueJSON(b, fd.MapValue(), mp.Get(protoreflect.ValueOfString(k).MapKey())); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

// appendValueJSON appends one value of fd's kind (an element, for a list).
func appendValueJSON(b []byte, fd protoreflect.FieldDescriptor, v protoreflect.Value) ([]byte, bool) {
	switch fd.Kind() {
	case protoreflect.StringKind:
		s := v.String()
		if !utf8.ValidString(s) {
			return b, false
		}
		return appendJSONString(b, s), true
	case protoreflect.BoolKind:
		return strconv.AppendBool(b, v.Bool()), true
	case protoreflect.Uint32Kind:
		return strconv.AppendUint(b, v.Uint(), 10), true
	case protoreflect.Int32Kind:
		return strconv.AppendInt(b, v.Int(), 10), true
	case protoreflect.Uint64Kind:
		b = append(b, '"')
		return append(strconv.AppendUint(b, v.Uint(), 10), '"'), true
	case protoreflect.Int64Kind:
		b = append(b, '"')
		return append(strconv.AppendInt(b, v.Int(), 10), '"'), true
	case protoreflect.BytesKind:
		b = append(b, '"')
		return append(base64.StdEncoding.AppendEncode(b, v.Bytes()), '"'), true
	case protoreflect.MessageKind:
		return appendMessageJSON(b, v.Message())
	}
	return b, false
}
