package client

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/holdfast/holdfast/contract"
)

// Formats: ranges hold integers on the wire; these map the values control planes
// allocate — MAC addresses under an OUI, IPv4 addresses of a network, ports — to and from
// them. A range's Format field says which one its clients show.

// Range formats (RangeSpec.Format, Range.Format).
const (
	RangeFormatPort = contract.FormatPort
	RangeFormatIPv4 = contract.FormatIPv4
	RangeFormatMAC  = contract.FormatMAC
)

// MACRange is the range of MAC addresses under a 3-byte OUI ("52:54:00"): its 2^24
// addresses as 48-bit integers.
func MACRange(oui string) (first, last uint64, err error) {
	v, err := parseHexBytes(oui, 3)
	if err != nil {
		return 0, 0, fmt.Errorf("oui %q: %w", oui, err)
	}
	return v << 24, v<<24 | 0xffffff, nil
}

// FormatMAC shows a 48-bit value as a MAC address, "52:54:00:12:34:56".
func FormatMAC(v uint64) string {
	var b strings.Builder
	for i := 5; i >= 0; i-- {
		fmt.Fprintf(&b, "%02x", byte(v>>(8*i)))
		if i > 0 {
			b.WriteByte(':')
		}
	}
	return b.String()
}

// ParseMAC reads a MAC address as its 48-bit value.
func ParseMAC(s string) (uint64, error) {
	v, err := parseHexBytes(s, 6)
	if err != nil {
		return 0, fmt.Errorf("mac %q: %w", s, err)
	}
	return v, nil
}

func parseHexBytes(s string, n int) (uint64, error) {
	parts := strings.FieldsFunc(s, func(r rune) bool { return r == ':' || r == '-' })
	if len(parts) != n {
		return 0, fmt.Errorf("want %d bytes separated by ':'", n)
	}
	var v uint64
	for _, p := range parts {
		b, err := strconv.ParseUint(p, 16, 8)
		if err != nil || len(p) > 2 {
			return 0, fmt.Errorf("byte %q is not hex", p)
		}
		v = v<<8 | b
	}
	return v, nil
}

// IPv4Range is the range of host addresses of an IPv4 network ("10.0.0.0/24"): without
// the network and broadcast addresses, except for /31 and /32 (RFC 3021), as 32-bit
// integers.
func IPv4Range(cidr string) (first, last uint64, err error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil || !p.Addr().Is4() {
		return 0, 0, fmt.Errorf("cidr %q: an IPv4 network, e.g. 10.0.0.0/24", cidr)
	}
	p = p.Masked()
	bits := p.Bits()
	base := ipv4Value(p.Addr())
	size := uint64(1) << (32 - bits)
	first, last = base, base+size-1
	if bits < 31 {
		first, last = first+1, last-1
	}
	return first, last, nil
}

func ipv4Value(a netip.Addr) uint64 {
	b := a.As4()
	return uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])
}

// FormatIPv4 shows a 32-bit value as a dotted IPv4 address.
func FormatIPv4(v uint64) string {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String()
}

// ParseIPv4 reads a dotted IPv4 address as its 32-bit value.
func ParseIPv4(s string) (uint64, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return 0, fmt.Errorf("ipv4 %q: a dotted IPv4 address", s)
	}
	return ipv4Value(a), nil
}

// FormatValue shows a range value in the range's format (a port and "" as a number).
func FormatValue(format string, v uint64) string {
	switch format {
	case RangeFormatIPv4:
		if v <= 0xffffffff {
			return FormatIPv4(v)
		}
	case RangeFormatMAC:
		if v <= 0xffffffffffff {
			return FormatMAC(v)
		}
	}
	return strconv.FormatUint(v, 10)
}

// ParseValue reads a range value in the range's format; a number is accepted in any.
func ParseValue(format, s string) (uint64, error) {
	if v, err := strconv.ParseUint(s, 10, 64); err == nil {
		if format == RangeFormatPort && v > 65535 {
			return 0, fmt.Errorf("port %d: at most 65535", v)
		}
		return v, nil
	}
	switch format {
	case RangeFormatIPv4:
		return ParseIPv4(s)
	case RangeFormatMAC:
		return ParseMAC(s)
	}
	return 0, fmt.Errorf("value %q: a number", s)
}
