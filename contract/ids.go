// Package contract is the wire vocabulary every layer of Holdfast shares: the id, tenant
// and prefix rules, the lease id format, placement, subjects and names. It is a leaf: the
// standard library only, so the kernel, the service, the client and the tools import the
// one definition of each rule instead of keeping copies in step.
package contract

import "strconv"

// Identifier bounds of docs/api.md §2.
const (
	MaxTenantLen      = 64
	MaxObjectIDLen    = 128
	MaxOperationIDLen = 64
)

// ValidTenant reports whether s is 1–64 chars of A-Z a-z 0-9 _ -.
func ValidTenant(s string) bool {
	if len(s) == 0 || len(s) > MaxTenantLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isAlnum(c) && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// ValidObjectID reports whether s is a valid resource, pool, range or holder id:
// 1–128 chars of A-Z a-z 0-9 _ - : / @ +, the first alphanumeric.
func ValidObjectID(s string) bool { return validID(s, MaxObjectIDLen) }

// ValidObjectIDPrefix reports whether s can start an object id (a listing's prefix).
func ValidObjectIDPrefix(s string) bool { return s == "" || validID(s, MaxObjectIDLen) }

// ValidOperationID reports whether s is a valid operation id (1–64 chars, same form).
func ValidOperationID(s string) bool { return validID(s, MaxOperationIDLen) }

func validID(s string, max int) bool {
	if len(s) == 0 || len(s) > max || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isAlnum(c) && c != '_' && c != '-' && c != ':' && c != '/' && c != '@' && c != '+' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// PlacementKey is the part of an object id before its first '/', or the whole id.
// Objects sharing a placement key share a shard and may be leased together.
func PlacementKey(id string) string {
	for i := 0; i < len(id); i++ {
		if id[i] == '/' {
			return id[:i]
		}
	}
	return id
}

// ShardOf is the shard of a placement key: a pure function of (tenant, key, shard count),
// FNV-1a over "tenant\x00key", so every process of a deployment agrees without talking.
func ShardOf(tenant, key string, shards uint32) uint32 {
	if shards <= 1 {
		return 0
	}
	h := uint64(fnvOffset64)
	h = fnvString(h, tenant)
	h *= fnvPrime64 // the "\x00" between them: FNV-1a of a zero byte
	h = fnvString(h, key)
	return uint32(h % uint64(shards))
}

// FNV-1a: plain arithmetic, the same in every process and on every replay (never the
// runtime's seeded hash).
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime64
	}
	return h
}

// FormatLeaseID renders the opaque lease id of the lease committed at (shard, lsn).
func FormatLeaseID(shard uint32, lsn uint64) string {
	var b [32]byte
	out := strconv.AppendUint(b[:0], uint64(shard), 10)
	out = append(out, '-')
	out = strconv.AppendUint(out, lsn, 10)
	return string(out)
}

// AppendLeaseID appends the lease id to b without allocating.
func AppendLeaseID(b []byte, shard uint32, lsn uint64) []byte {
	b = strconv.AppendUint(b, uint64(shard), 10)
	b = append(b, '-')
	return strconv.AppendUint(b, lsn, 10)
}

// ParseLeaseID parses a lease id: "<shard>-<lsn>", both decimal without leading zeros,
// lsn ≥ 1. Anything else cannot be a lease id (invalid_request).
func ParseLeaseID(s string) (shard uint32, lsn uint64, ok bool) {
	dash := -1
	for i := 0; i < len(s); i++ {
		if s[i] == '-' {
			dash = i
			break
		}
	}
	if dash <= 0 || dash == len(s)-1 {
		return 0, 0, false
	}
	sh, ok1 := parseDecimal(s[:dash])
	l, ok2 := parseDecimal(s[dash+1:])
	if !ok1 || !ok2 || sh > 0xFFFFFFFF || l == 0 {
		return 0, 0, false
	}
	return uint32(sh), l, true
}

func parseDecimal(s string) (uint64, bool) {
	if len(s) == 0 || len(s) > 20 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}
