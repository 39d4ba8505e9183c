package messages

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// protojson reports where a request went wrong as "(line L:C)", and names the field only
// for scalar type errors, without the path ("resource_id", not "members[1].resource_id").
// A structural error ("unexpected token {" where a list belongs) names nothing. So on any
// positioned error, jsonFieldError walks the request to that position, and says which
// field it is, what the field must be (from the message's descriptor) and what was there.

var jsonPosition = regexp.MustCompile(`\(line (\d+):(\d+)\)`)

// jsonFieldError rewrites a protojson error about b (a request of md) into
// "<path>: must be <kind>, got <token> (line L:C)", or returns "" when the error is not
// about a field's value (unknown and duplicate fields already say which).
func jsonFieldError(b []byte, md protoreflect.MessageDescriptor, msg string) string {
	if strings.Contains(msg, "unknown field") || strings.Contains(msg, "duplicate field") {
		return ""
	}
	m := jsonPosition.FindStringSubmatch(msg)
	if m == nil {
		return ""
	}
	line, _ := strconv.Atoi(m[1])
	col, _ := strconv.Atoi(m[2])
	at := byteOffset(b, line, col)
	if at < 0 {
		return ""
	}
	path, fd, inList := fieldAt(b, at, md)
	if fd == nil {
		return ""
	}
	want := kindName(fd, inList)
	got := describeToken(b[at:])
	return fmt.Sprintf("%s: must be %s, got %s %s", path, want, got, m[0])
}

// byteOffset turns protojson's 1-based line and rune column into a byte offset.
func byteOffset(b []byte, line, col int) int {
	off := 0
	for l := 1; l < line; l++ {
		i := bytes.IndexByte(b[off:], '\n')
		if i < 0 {
			return -1
		}
		off += i + 1
	}
	for c := 1; c < col; c++ {
		if off >= len(b) {
			return -1
		}
		_, n := utf8.DecodeRune(b[off:])
		off += n
	}
	return off
}

// frame is one level of the walk: an object (fields of md) or a list (elements of fd).
type frame struct {
	md      protoreflect.MessageDescriptor
	list    protoreflect.FieldDescriptor // in a list of this field
	index   int
	key     protoreflect.FieldDescriptor // the field whose value comes next (objects)
	path    string
	wantKey bool
}

// fieldAt walks b's tokens up to byte offset at and returns the path of the value that
// starts there, its field, and whether it stands as an element of that (list) field.
func fieldAt(b []byte, at int, md protoreflect.MessageDescriptor) (string, protoreflect.FieldDescriptor, bool) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var stack []frame
	valuePath := func() (string, protoreflect.FieldDescriptor, bool) {
		if len(stack) == 0 {
			return "", nil, false
		}
		f := &stack[len(stack)-1]
		if f.list != nil {
			return fmt.Sprintf("%s[%d]", f.path, f.index), f.list, true
		}
		if f.key == nil || f.wantKey {
			return "", nil, false // not at a value: a syntax error, which protojson's text says
		}
		return joinPath(f.path, string(f.key.Name())), f.key, false
	}
	for {
		start := int(d.InputOffset())
		tok, err := d.Token()
		// The token begins after any whitespace, comma or colon the decoder skipped.
		for start < len(b) && strings.IndexByte(" \t\r\n,:", b[start]) >= 0 {
			start++
		}
		if err != nil {
			return "", nil, false
		}
		if start >= at {
			return valuePath()
		}
		path, fd, inList := valuePath()
		top := len(stack) - 1
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				var sub protoreflect.MessageDescriptor
				if len(stack) == 0 {
					sub = md
				} else if fd != nil && fd.Message() != nil && (inList || !fd.IsList()) {
					sub = fd.Message()
				}
				if len(stack) > 0 && sub == nil {
					return path, fd, inList // an object where something else belongs
				}
				stack = append(stack, frame{md: sub, path: path, wantKey: true})
			case '[':
				if fd == nil || !fd.IsList() || inList {
					return path, fd, inList
				}
				stack = append(stack, frame{list: fd, path: path})
			case '}', ']':
				stack = stack[:top]
				if len(stack) > 0 {
					advance(&stack[len(stack)-1])
				}
			}
		default:
			f := &stack[top]
			if f.list == nil && f.wantKey {
				name, _ := t.(string)
				f.key = f.md.Fields().ByJSONName(name)
				if f.key == nil {
					f.key = f.md.Fields().ByName(protoreflect.Name(name))
				}
				f.wantKey = false
				continue
			}
			advance(f)
		}
	}
}

// advance moves a frame past one value.
func advance(f *frame) {
	if f.list != nil {
		f.index++
	} else {
		f.wantKey = true
	}
}

func joinPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// kindName says what a field's JSON value must be.
func kindName(fd protoreflect.FieldDescriptor, inList bool) string {
	if fd.IsList() && !inList {
		return "a list"
	}
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return "an object"
	case protoreflect.StringKind, protoreflect.BytesKind:
		return "a string"
	case protoreflect.BoolKind:
		return "true or false"
	case protoreflect.EnumKind:
		return "a name"
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return "a number"
	default:
		return "a whole number (or a string of one)"
	}
}

// describeToken names the JSON value that starts b, briefly.
func describeToken(b []byte) string {
	if len(b) == 0 {
		return "the end of the input"
	}
	switch c := b[0]; {
	case c == '{':
		return "an object"
	case c == '[':
		return "a list"
	case c == '"':
		end := 1
		for end < len(b) && end < 40 && b[end] != '"' {
			if b[end] == '\\' {
				end++
			}
			end++
		}
		if end < len(b) && b[end] == '"' {
			return "the string " + string(b[:end+1])
		}
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || (c >= '0' && c <= '9'):
		end := 0
		for end < len(b) && end < 24 && strings.IndexByte("+-.eE0123456789", b[end]) >= 0 {
			end++
		}
		return "the number " + string(b[:end])
	}
	return strconv.Quote(string(b[:min(len(b), 8)]))
}
