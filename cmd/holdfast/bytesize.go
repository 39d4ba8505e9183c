package main

import (
	"fmt"
	"strconv"
	"strings"
)

// byteSize is a flag of bytes written as a whole number with an optional binary or
// decimal unit: 1073741824, 1GiB, 512MiB, 16GB.
type byteSize uint64

var byteUnits = []struct {
	suffix string
	mult   uint64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
}

func (b *byteSize) Set(s string) error {
	num, mult := strings.TrimSpace(s), uint64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || (mult > 1 && n > ^uint64(0)/mult) {
		return fmt.Errorf("want a whole number of bytes with an optional unit (e.g. 512MiB, 16GiB), got %q", s)
	}
	*b = byteSize(n * mult)
	return nil
}

func (b *byteSize) String() string {
	v := uint64(*b)
	for _, u := range []struct {
		suffix string
		mult   uint64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v >= u.mult && v%u.mult == 0 {
			return fmt.Sprintf("%d%s", v/u.mult, u.suffix)
		}
	}
	return strconv.FormatUint(v, 10)
}

// UnmarshalText lets kong parse a byteSize flag.
func (b *byteSize) UnmarshalText(text []byte) error { return b.Set(string(text)) }
