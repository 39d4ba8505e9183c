package valueset

import (
	"encoding/binary"
	"errors"
)

// ErrMalformed is wrapped by every decoding error, so callers can tell bad
// input apart without matching strings.
var ErrMalformed = errors.New("valueset: malformed encoding")

func malformed(what string) error {
	return &decodeError{what: what}
}

type decodeError struct{ what string }

func (e *decodeError) Error() string { return ErrMalformed.Error() + ": " + e.what }
func (e *decodeError) Unwrap() error { return ErrMalformed }

// readUvarint reads one uvarint from the front of b. Unlike binary.Uvarint
// it rejects overlong encodings (a trailing 0x00 continuation byte), so each
// value has exactly one accepted encoding and decoding followed by encoding
// reproduces the input bytes: replicas comparing snapshots byte for byte
// cannot disagree over equal content.
func readUvarint(b []byte) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	switch {
	case n == 0:
		return 0, nil, malformed("truncated varint")
	case n < 0:
		return 0, nil, malformed("varint overflows 64 bits")
	case n > 1 && b[n-1] == 0:
		return 0, nil, malformed("non-minimal varint")
	}
	return v, b[n:], nil
}
