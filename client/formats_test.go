package client

import "testing"

func TestFormats(t *testing.T) {
	first, last, err := MACRange("52:54:00")
	if err != nil || FormatMAC(first) != "52:54:00:00:00:00" || FormatMAC(last) != "52:54:00:ff:ff:ff" {
		t.Fatalf("MACRange: %x %x %v", first, last, err)
	}
	if v, err := ParseMAC("52:54:00:12:34:56"); err != nil || FormatMAC(v) != "52:54:00:12:34:56" || v != 0x525400123456 {
		t.Fatalf("ParseMAC: %x %v", v, err)
	}
	for _, bad := range []string{"52:54", "52:54:00:12:34:5g", "525:4:00:12:34:56", ""} {
		if _, err := ParseMAC(bad); err == nil {
			t.Errorf("ParseMAC(%q) accepted", bad)
		}
	}
	first, last, err = IPv4Range("10.1.2.77/24")
	if err != nil || FormatIPv4(first) != "10.1.2.1" || FormatIPv4(last) != "10.1.2.254" {
		t.Fatalf("IPv4Range /24: %s %s %v", FormatIPv4(first), FormatIPv4(last), err)
	}
	first, last, err = IPv4Range("10.1.2.4/31")
	if err != nil || FormatIPv4(first) != "10.1.2.4" || FormatIPv4(last) != "10.1.2.5" {
		t.Fatalf("IPv4Range /31: %s %s %v", FormatIPv4(first), FormatIPv4(last), err)
	}
	if _, _, err := IPv4Range("fd00::/64"); err == nil {
		t.Error("IPv4Range took an IPv6 network")
	}
	if v, err := ParseIPv4("192.168.0.1"); err != nil || v != 0xc0a80001 {
		t.Fatalf("ParseIPv4: %x %v", v, err)
	}
	for _, c := range []struct {
		format, in, out string
	}{{RangeFormatIPv4, "10.0.0.9", "10.0.0.9"}, {RangeFormatMAC, "52:54:00:00:00:01", "52:54:00:00:00:01"},
		{RangeFormatPort, "30001", "30001"}, {"", "42", "42"}, {RangeFormatIPv4, "167772161", "10.0.0.1"}} {
		v, err := ParseValue(c.format, c.in)
		if err != nil || FormatValue(c.format, v) != c.out {
			t.Errorf("%s %q: %d %v -> %q", c.format, c.in, v, err, FormatValue(c.format, v))
		}
	}
	if _, err := ParseValue(RangeFormatPort, "70000"); err == nil {
		t.Error("port 70000 accepted")
	}
}
