package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Header names and values selecting the encoding of a request and its reply.
const (
	// HeaderContentType is the NATS header that selects the encoding.
	HeaderContentType = "Content-Type"
	// ContentTypeProtobuf selects the protobuf binary encoding of request and
	// reply. Without it (or with any other value) both are JSON.
	ContentTypeProtobuf = "application/protobuf"
	// ContentTypeJSON names the default JSON encoding.
	ContentTypeJSON = "application/json"
)

var (
	jsonMarshal = protojson.MarshalOptions{UseProtoNames: true}
	// Strict: unknown fields are an error (protojson's default).
	jsonStrict = protojson.UnmarshalOptions{DiscardUnknown: false}
	// Tolerant: unknown fields are skipped.
	jsonTolerant  = protojson.UnmarshalOptions{DiscardUnknown: true}
	protoStrict   = proto.UnmarshalOptions{}
	protoTolerant = proto.UnmarshalOptions{DiscardUnknown: true}
)

// DecodeError is the error of UnmarshalJSON and UnmarshalProto (and their
// tolerant variants): the bytes are not a valid encoding of the message. Its
// text is meant for Reply.message of an invalid_request reply and names the
// offending field, e.g.
//
//	invalid JSON holdfast.v1.ReserveRequest: (line 1:35): unknown field "ttl"
type DecodeError struct {
	// Format is "JSON" or "protobuf".
	Format string
	// Message is the full name of the message being decoded.
	Message string
	// Err is the underlying error (from protojson or proto, or an
	// unknown-field error of UnmarshalProto).
	Err error
}

func (e *DecodeError) Error() string {
	return "invalid " + e.Format + " " + e.Message + ": " + protoFieldNames(trimProtoPrefix(e.Err.Error()))
}

func (e *DecodeError) Unwrap() error { return e.Err }

// trimProtoPrefix removes the "proto: " prefix of protobuf-go errors (which
// that library spells with either normal or non-breaking spaces).
func trimProtoPrefix(s string) string {
	for _, p := range []string{"proto: ", "proto:\u00a0"} {
		if t, ok := strings.CutPrefix(s, p); ok {
			return t
		}
	}
	return s
}

// invalidValue matches protojson's type errors, which name the field by its
// lowerCamelCase JSON name.
var invalidValue = regexp.MustCompile(`invalid value for \w+ field ([A-Za-z0-9]+):`)

// protoFieldNames rewrites the field names of protojson's type errors to the
// snake_case names of the wire ("poolId" to "pool_id"). All field names of
// holdfast.proto are lowercase words joined by single underscores, so the
// reverse of the JSON name mapping is exact.
func protoFieldNames(s string) string {
	return invalidValue.ReplaceAllStringFunc(s, func(m string) string {
		sub := invalidValue.FindStringSubmatchIndex(m)
		name := m[sub[2]:sub[3]]
		var sb strings.Builder
		for _, r := range name {
			if 'A' <= r && r <= 'Z' {
				sb.WriteByte('_')
				r += 'a' - 'A'
			}
			sb.WriteRune(r)
		}
		return m[:sub[2]] + sb.String() + m[sub[3]:]
	})
}

// jsonBufSize covers a reply or an event with a lease of a few members in one
// allocation, instead of growing the buffer field by field.
const jsonBufSize = 512

// MarshalJSON encodes m in the JSON form of the wire: the protobuf JSON
// mapping with original (snake_case) field names, 64-bit integers as decimal
// strings, zero/empty/false fields omitted, on one line without insignificant
// whitespace. The output is stable (protojson alone randomizes whitespace).
func MarshalJSON(m proto.Message) ([]byte, error) {
	switch x := m.(type) {
	case *Reply:
		return AppendReplyJSON(make([]byte, 0, jsonBufSize), x), nil // the hot path: see fastjson.go
	case *Event:
		return AppendEventJSON(make([]byte, 0, jsonBufSize), x), nil
	}
	if b, ok := appendMessageJSON(make([]byte, 0, jsonBufSize/2), m.ProtoReflect()); ok {
		return b, nil // requests: see fastencode.go
	}
	return marshalJSONSlow(m)
}

// marshalJSONSlow is MarshalJSON by protojson, compacted: what the fast encoders are
// held to.
func marshalJSONSlow(m proto.Message) ([]byte, error) {
	b, err := jsonMarshal.Marshal(m)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(len(b))
	if err := json.Compact(&buf, b); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// UnmarshalJSON decodes the JSON form of m strictly, as for requests: 64-bit
// integers are accepted as numbers or strings, field names as the original
// snake_case name (or, as the protobuf JSON mapping allows, the lowerCamelCase
// name), and any unknown field, duplicate field, wrongly typed value or
// trailing data is a *DecodeError naming the field. m is reset first.
func UnmarshalJSON(b []byte, m proto.Message) error {
	proto.Reset(m)
	if decodeFast(b, m.ProtoReflect(), false) {
		return nil
	}
	if err := jsonStrict.Unmarshal(b, m); err != nil {
		md := m.ProtoReflect().Descriptor()
		if text := jsonFieldError(b, md, err.Error()); text != "" {
			err = errors.New(text)
		}
		return &DecodeError{Format: "JSON", Message: string(md.FullName()), Err: err}
	}
	return nil
}

// UnmarshalJSONTolerant is UnmarshalJSON that skips unknown fields. Use it for
// replies and events, which a newer server may extend with new fields.
func UnmarshalJSONTolerant(b []byte, m proto.Message) error {
	proto.Reset(m)
	if decodeFast(b, m.ProtoReflect(), true) {
		return nil
	}
	if err := jsonTolerant.Unmarshal(b, m); err != nil {
		return &DecodeError{Format: "JSON", Message: string(m.ProtoReflect().Descriptor().FullName()), Err: err}
	}
	return nil
}

// MarshalProto encodes m in protobuf binary form.
func MarshalProto(m proto.Message) ([]byte, error) {
	return proto.Marshal(m)
}

// UnmarshalProto decodes the protobuf binary form of m strictly, as for
// requests: like the JSON form, a field unknown to this schema is rejected
// (a *DecodeError naming its number and where it is) rather than kept
// silently, and so are malformed input and invalid UTF-8 in strings.
// m is reset first.
func UnmarshalProto(b []byte, m proto.Message) error {
	name := string(m.ProtoReflect().Descriptor().FullName())
	if err := protoStrict.Unmarshal(b, m); err != nil {
		return &DecodeError{Format: "protobuf", Message: name, Err: err}
	}
	if err := checkUnknown(m.ProtoReflect()); err != nil {
		return &DecodeError{Format: "protobuf", Message: name, Err: err}
	}
	return nil
}

// UnmarshalProtoTolerant is UnmarshalProto that skips unknown fields. Use it
// for replies and events, which a newer server may extend with new fields.
func UnmarshalProtoTolerant(b []byte, m proto.Message) error {
	if err := protoTolerant.Unmarshal(b, m); err != nil {
		return &DecodeError{Format: "protobuf", Message: string(m.ProtoReflect().Descriptor().FullName()), Err: err}
	}
	return nil
}

// checkUnknown returns an error naming the first unknown field found in m or
// its sub-messages. The path to it is put together only when one is found:
// every request is checked, and almost none has one.
func checkUnknown(m protoreflect.Message) error {
	num, where, found := firstUnknown(m)
	if !found {
		return nil
	}
	if where != "" {
		where = " in " + where[1:]
	}
	return fmt.Errorf("unknown field number %d%s", num, where)
}

// firstUnknown finds the first unknown field in m or its sub-messages: its number and
// the path to the message holding it, each step with a leading dot ("" for m itself).
func firstUnknown(m protoreflect.Message) (num protowire.Number, where string, found bool) {
	if u := m.GetUnknown(); len(u) > 0 {
		num, _, _ = protowire.ConsumeField(u)
		return num, "", true
	}
	// The message fields only, by the descriptor: Range would box every scalar set.
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len() && !found; i++ {
		fd := fields.Get(i)
		if fd.Message() == nil || fd.IsMap() || !m.Has(fd) {
			continue
		}
		if !fd.IsList() {
			if num, where, found = firstUnknown(m.Get(fd).Message()); found {
				where = "." + string(fd.Name()) + where
			}
			continue
		}
		l := m.Get(fd).List()
		for j := 0; j < l.Len() && !found; j++ {
			if num, where, found = firstUnknown(l.Get(j).Message()); found {
				where = "." + string(fd.Name()) + "[" + strconv.Itoa(j) + "]" + where
			}
		}
	}
	return num, where, found
}
