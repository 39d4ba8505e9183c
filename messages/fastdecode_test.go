package messages

import (
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"pgregory.net/rapid"
)

// everyMessage is a new message of each type of the wire's schema.
func everyMessage(t testing.TB) []func() proto.Message {
	var out []func() proto.Message
	msgs := File_holdfast_proto.Messages()
	for i := 0; i < msgs.Len(); i++ {
		mt, err := protoregistry.GlobalTypes.FindMessageByName(msgs.Get(i).FullName())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, func() proto.Message { return mt.New().Interface() })
	}
	return out
}

// TestFastDecodeMatchesProtojson: every message of the schema, filled through
// protoreflect and written by protojson (original or lowerCamelCase names) or by
// MarshalJSON, is taken by the fast decoder — strict and tolerant — as the same message
// protojson decodes. So the fast path is used for what clients write, not only kept
// safe by its fallback.
func TestFastDecodeMatchesProtojson(t *testing.T) {
	types := everyMessage(t)
	rapid.Check(t, func(t *rapid.T) {
		want := rapid.SampledFrom(types).Draw(t, "type")()
		fill(t, want.ProtoReflect(), 3)
		var data []byte
		var err error
		switch rapid.IntRange(0, 2).Draw(t, "writer") {
		case 0:
			data, err = protojson.MarshalOptions{UseProtoNames: true}.Marshal(want)
		case 1:
			data, err = protojson.Marshal(want)
		default:
			data, err = MarshalJSON(want)
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, tolerant := range []bool{false, true} {
			got := want.ProtoReflect().New()
			if !decodeFast(data, got, tolerant) {
				t.Fatalf("fast decoder (tolerant %v) did not take %s", tolerant, data)
			}
			if !proto.Equal(got.Interface(), want) {
				t.Fatalf("fast decoder (tolerant %v) of %s:\n got %v\nwant %v", tolerant, data, got.Interface(), want)
			}
		}
	})
}

// TestFastDecodeLeavesTheRestToProtojson: what the fast decoder declines, protojson
// decides, with its own answer and error text.
func TestFastDecodeLeavesTheRestToProtojson(t *testing.T) {
	for _, tc := range []struct {
		in       string
		tolerant bool
		fast     bool
	}{
		{`{"operation_id":"op","ttl_ms":1000,"members":[{"resource_id":"r"}]}`, false, true},
		{`{"operationId":"op","ttlMs":"1000"}`, false, true},
		{` { "holder_id" : "h" , "members" : [ ] } `, false, true},
		{`{"operation_id":"o\u00e9\u00E9"}`, false, true},
		{`{"operation_id":"a\"b\\c\/d\n\t\b\f\r","holder_id":"\u0000"}`, false, true},
		{`{"labels":{"k\"1":"v\\1","k2":"\u20ac"}}`, false, true}, // a key unescaped before its value
		{`{"\u006fperation_id":"op"}`, false, true},               // a name with an escape
		{`{"operation_id":"\ud83d\ude00"}`, false, false},         // a surrogate pair: protojson's
		{`{"operation_id":"\ud800"}`, false, false},               // a lone surrogate
		{`{"operation_id":"\u00g0"}`, false, false},
		{`{"operation_id":"\u00"}`, false, false},
		{`{"operation_id":"\x41"}`, false, false},
		{`{"operation_id":"a\`, false, false},
		{"{\"operation_id\":\"a\\n\x01\"}", false, false}, // a raw control character after an escape
		{`{"ttl_ms":1e3}`, false, false},                  // an exponent
		{`{"ttl_ms":1.0}`, false, false},                  // a fraction
		{`{"ttl_ms":01}`, false, false},                   // a leading zero
		{`{"ttl_ms":null}`, false, false},
		{`{"ttl_ms":18446744073709551616}`, false, false}, // beyond uint64
		{`{"nope":1}`, false, false},
		{`{"nope":{"a":[1,-2.5e3,"x\n",true,null]}}`, true, true},
		{`{"nope":"\ud800"}`, true, false},
		{`{"holder_id":"a","holderId":"b"}`, false, false}, // the same field twice
		{`{"holder_id":"a"} x`, false, false},
		{``, false, false},
	} {
		m := &ReserveRequest{}
		if got := decodeFast([]byte(tc.in), m.ProtoReflect(), tc.tolerant); got != tc.fast {
			t.Errorf("decodeFast(%s, tolerant %v) = %v, want %v", tc.in, tc.tolerant, got, tc.fast)
		}
		fastAgrees(t, []byte(tc.in), func() proto.Message { return &ReserveRequest{} })
	}
}

// fastAgrees checks, for any input, that a message the fast decoder takes is one
// protojson takes the same way.
func fastAgrees(t interface{ Fatalf(string, ...any) }, in []byte, newMsg func() proto.Message) {
	for _, tolerant := range []bool{false, true} {
		fast := newMsg()
		if !decodeFast(in, fast.ProtoReflect(), tolerant) {
			continue
		}
		slow := newMsg()
		opts := protojson.UnmarshalOptions{DiscardUnknown: tolerant}
		if err := opts.Unmarshal(in, slow); err != nil {
			t.Fatalf("fast decoder (tolerant %v) took %q, protojson refuses it: %v", tolerant, in, err)
		}
		if !proto.Equal(fast, slow) {
			t.Fatalf("fast decoder (tolerant %v) of %q:\n got %v\nwant %v", tolerant, in, fast, slow)
		}
	}
}

// TestFastEncodeMatchesProtojson: every message of the schema, filled through
// protoreflect, is written by the generic fast encoder byte for byte as protojson
// writes it (compacted).
func TestFastEncodeMatchesProtojson(t *testing.T) {
	types := everyMessage(t)
	rapid.Check(t, func(t *rapid.T) {
		m := rapid.SampledFrom(types).Draw(t, "type")()
		fill(t, m.ProtoReflect(), 3)
		want, err := marshalJSONSlow(m)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendMessageJSON(nil, m.ProtoReflect())
		if !ok {
			t.Fatalf("fast encoder declined %v", m)
		}
		if string(got) != string(want) {
			t.Fatalf("fast encoder:\n got %s\nwant %s", got, want)
		}
	})
}

// Strings of any runes are escaped as protojson escapes them, read back by the decoder
// (or by protojson, for what the fast decoder leaves to it), and a string that is not
// UTF-8 is left to protojson's error.
func TestFastCodecStrings(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &ReserveRequest{OperationId: rapid.String().Draw(t, "op"), HolderId: rapid.StringN(0, 3, -1).Draw(t, "holder"),
			Labels: map[string]string{rapid.String().Draw(t, "key"): rapid.String().Draw(t, "value")}}
		want, err := marshalJSONSlow(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := MarshalJSON(m)
		if err != nil || string(got) != string(want) {
			t.Fatalf("MarshalJSON: %v\n got %s\nwant %s", err, got, want)
		}
		var back ReserveRequest
		if err := UnmarshalJSON(got, &back); err != nil || !proto.Equal(&back, m) {
			t.Fatalf("back: %v %v", err, &back)
		}
		fastAgrees(t, got, func() proto.Message { return &ReserveRequest{} })
	})
	bad := &ReserveRequest{OperationId: "\xff"}
	if _, ok := appendMessageJSON(nil, bad.ProtoReflect()); ok {
		t.Fatal("the fast encoder took a string that is not UTF-8")
	}
	if _, err := MarshalJSON(bad); err == nil {
		t.Fatal("MarshalJSON of a string that is not UTF-8: no error")
	}
}

// TestSchemaNestsShallow holds decodeFast's bound on the bytes it moves (fastDec.close):
// no message of the schema contains itself, and none nests more than five deep.
func TestSchemaNestsShallow(t *testing.T) {
	var depth func(md protoreflect.MessageDescriptor, path map[protoreflect.FullName]bool) int
	depth = func(md protoreflect.MessageDescriptor, path map[protoreflect.FullName]bool) int {
		if path[md.FullName()] {
			t.Fatalf("%s contains itself: fastDec.close's bound no longer holds", md.FullName())
		}
		path[md.FullName()] = true
		defer delete(path, md.FullName())
		d := 1
		fs := md.Fields()
		for i := 0; i < fs.Len(); i++ {
			if f := fs.Get(i); f.Message() != nil && !f.IsMap() {
				d = max(d, 1+depth(f.Message(), path))
			}
		}
		return d
	}
	msgs := File_holdfast_proto.Messages()
	for i := 0; i < msgs.Len(); i++ {
		if d := depth(msgs.Get(i), map[protoreflect.FullName]bool{}); d > 5 {
			t.Errorf("%s nests %d deep: fastDec.close's comment says five", msgs.Get(i).FullName(), d)
		}
	}
}
