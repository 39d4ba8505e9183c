package contract

import (
	"encoding/base64"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds of the allocator verbs (docs/api.md Part IV).
const (
	MaxLabels        = 8    // labels per lease
	MaxLabelKeyLen   = 63   // a label's key
	MaxLabelValueLen = 256  // a label's value, in bytes
	MaxImportLeases  = 1000 // leases per lease.import
	MaxBulkLimit     = 1000 // leases per shard per lease.release_all or lease.revoke_all
	MaxExcluded      = 4096 // excluded intervals of one range
	MaxStaticBand    = 4096 // values of a range's static band
	MaxFormatLen     = 16   // a range's display format
	DefaultPageLimit = 100  // items per page of the listings with cursors
	MaxPageLimit     = 1000 // at most
)

// Range display formats (the wire stays integers; clients show values in them).
const (
	FormatPort = "port"
	FormatIPv4 = "ipv4"
	FormatMAC  = "mac"
)

// ValidFormat reports whether f is a range format: empty (plain numbers) or a known one.
func ValidFormat(f string) bool {
	return f == "" || f == FormatPort || f == FormatIPv4 || f == FormatMAC
}

// Value states of range.lookup.
const (
	ValueFree     = "free"
	ValueHeld     = "held"
	ValueExcluded = "excluded"
)

// ValidLabelKey reports whether k is 1–63 chars of A-Z a-z 0-9 _ - . /, the first
// alphanumeric (owner_type, owner_uuid, app.kubernetes.io/name).
func ValidLabelKey(k string) bool {
	if len(k) == 0 || len(k) > MaxLabelKeyLen || !isAlnum(k[0]) {
		return false
	}
	for i := 1; i < len(k); i++ {
		c := k[i]
		if !isAlnum(c) && c != '_' && c != '-' && c != '.' && c != '/' {
			return false
		}
	}
	return true
}

// ValidLabelValue reports whether v is free text within a bound: 1–256 bytes of UTF-8,
// printable characters and spaces (no control characters), neither starting nor ending
// with a space — a uuid, a name, "web tier (blue)". Values were once limited to
// A-Z a-z 0-9 _ - . : / @ +; every such value is still valid, so journals replay as
// they were.
func ValidLabelValue(v string) bool {
	if len(v) == 0 || len(v) > MaxLabelValueLen || !utf8.ValidString(v) || v[0] == ' ' || v[len(v)-1] == ' ' {
		return false
	}
	for _, r := range v {
		if r != ' ' && !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// ParseLabel splits a "key=value" selector (lease.list, lease.release_all, ...).
func ParseLabel(s string) (key, value string, ok bool) {
	key, value, ok = strings.Cut(s, "=")
	return key, value, ok && ValidLabelKey(key) && ValidLabelValue(value)
}

// Cursors are opaque to clients: base64url of "<shard>.<position>" (listings ordered by
// shard, then by a number within it) or of an id (listings ordered by id over every
// shard). A cursor from one listing given to another is invalid_request.

// ShardCursor is the cursor after position pos of shard.
func ShardCursor(shard uint32, pos uint64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("s" + strconv.FormatUint(uint64(shard), 10) + "." + strconv.FormatUint(pos, 10)))
}

// ParseShardCursor reads a ShardCursor; "" is the start.
func ParseShardCursor(c string) (shard uint32, pos uint64, ok bool) {
	if c == "" {
		return 0, 0, true
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) < 2 || b[0] != 's' {
		return 0, 0, false
	}
	sh, p, found := strings.Cut(string(b[1:]), ".")
	s, err1 := strconv.ParseUint(sh, 10, 32)
	n, err2 := strconv.ParseUint(p, 10, 64)
	if !found || err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return uint32(s), n, true
}

// KeyCursor is the cursor after key (an id, or a value as its decimal).
func KeyCursor(key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte("k" + key))
}

// ParseKeyCursor reads a KeyCursor; "" is the start (found false).
func ParseKeyCursor(c string) (key string, found, ok bool) {
	if c == "" {
		return "", false, true
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) < 1 || b[0] != 'k' {
		return "", false, false
	}
	return string(b[1:]), true, true
}
