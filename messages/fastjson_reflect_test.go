package messages

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"pgregory.net/rapid"
)

// fill sets every field of m (present and future: it walks the descriptor, not a list
// kept by hand) to a drawn value: scalars of each kind, nested messages to a depth,
// lists of 0–2 elements, optional fields present or not. A field added to the .proto and
// forgotten by the fast encoders then shows up as a difference from protojson.
func fill(t *rapid.T, m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		label := string(fd.FullName())
		if fd.HasPresence() && fd.Kind() != protoreflect.MessageKind && !rapid.Bool().Draw(t, label+"?") {
			continue
		}
		switch {
		case fd.IsList():
			list := m.Mutable(fd).List()
			for j, n := 0, rapid.IntRange(0, 2).Draw(t, label+"#"); j < n; j++ {
				if fd.Kind() == protoreflect.MessageKind {
					if depth == 0 {
						break
					}
					e := list.NewElement()
					fill(t, e.Message(), depth-1)
					list.Append(e)
					continue
				}
				list.Append(scalar(t, fd, label))
			}
		case fd.IsMap():
			if fd.MapKey().Kind() != protoreflect.StringKind || fd.MapValue().Kind() != protoreflect.StringKind {
				t.Fatalf("%s: a map field of other kinds; teach fill and the fast encoders about it", label)
			}
			mp := m.Mutable(fd).Map()
			for j, n := 0, rapid.IntRange(0, 3).Draw(t, label+"#"); j < n; j++ {
				k := rapid.StringMatching(`[a-z0-9_]{1,6}`).Draw(t, label+".key")
				mp.Set(protoreflect.ValueOfString(k).MapKey(), scalar(t, fd.MapValue(), label+".value"))
			}
		case fd.Kind() == protoreflect.MessageKind:
			if depth > 0 && rapid.Bool().Draw(t, label+"?") {
				fill(t, m.Mutable(fd).Message(), depth-1)
			}
		default:
			m.Set(fd, scalar(t, fd, label))
		}
	}
}

func scalar(t *rapid.T, fd protoreflect.FieldDescriptor, label string) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(rapid.OneOf(rapid.Just(""), rapid.StringMatching(`[a-z0-9_:/-]{1,8}`)).Draw(t, label))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes(rapid.SliceOfN(rapid.Byte(), 0, 6).Draw(t, label))
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(rapid.Bool().Draw(t, label))
	case protoreflect.Uint32Kind:
		return protoreflect.ValueOfUint32(rapid.OneOf(rapid.Just(uint32(0)), rapid.Uint32()).Draw(t, label))
	case protoreflect.Uint64Kind:
		return protoreflect.ValueOfUint64(rapid.OneOf(rapid.Just(uint64(0)), rapid.Uint64()).Draw(t, label))
	}
	t.Fatalf("%s: kind %s; teach fill and the fast encoders about it", label, fd.Kind())
	return protoreflect.Value{}
}

// TestFastJSONCoversEveryField: replies and events filled through protoreflect encode
// as protojson does, so no field of the schema can be missed by the hand-written
// encoders.
func TestFastJSONCoversEveryField(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := &Reply{}
		fill(t, r.ProtoReflect(), 3)
		slow, err := jsonMarshal.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, AppendReplyJSON(nil, r), slow, true)

		e := &Event{}
		fill(t, e.ProtoReflect(), 3)
		slow, err = jsonMarshal.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, AppendEventJSON(nil, e), slow, false)
		var back Event
		if err := UnmarshalJSON(AppendEventJSON(nil, e), &back); err != nil || !proto.Equal(&back, e) {
			t.Fatalf("event round trip: %v\n%v\n%v", err, &back, e)
		}
	})
}
