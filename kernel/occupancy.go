package kernel

import (
	"math/bits"
	"slices"
	"strings"
)

// Occupancy is how full one range or pool is, for metrics ("a pool 90 % allocated is
// something to alert on"): Used of Size. A range's Size leaves its excluded values out
// (they are never handed out); a pool's Used counts reserved, active and consumed units.
type Occupancy struct {
	Tenant, ID string
	Used, Size uint64 // Size 0: 2^64 (a range of all u64 values)
}

// fuller orders occupancies by fill, fullest first, then by tenant and id: Used/Size
// compared exactly by cross-multiplying in 128 bits (the kernel has no floats).
func fuller(a, b Occupancy) int {
	ah, al := bits.Mul64(a.Used, sizeOrMax(b.Size))
	bh, bl := bits.Mul64(b.Used, sizeOrMax(a.Size))
	switch {
	case ah != bh:
		return cmpU64(bh, ah)
	case al != bl:
		return cmpU64(bl, al)
	case a.Tenant != b.Tenant:
		return strings.Compare(a.Tenant, b.Tenant)
	}
	return strings.Compare(a.ID, b.ID)
}

func sizeOrMax(s uint64) uint64 {
	if s == 0 {
		return ^uint64(0)
	}
	return s
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Fullest returns the n fullest ranges and the n fullest pools of the shard, fullest
// first: a bounded set of metric labels whatever the number of objects and tenants.
// O(objects · log n); the runtime calls it about once a second, not per entry.
func (k *Kernel) Fullest(n int) (ranges, pools []Occupancy) {
	top := func(dst []Occupancy, o Occupancy) []Occupancy {
		i, _ := slices.BinarySearchFunc(dst, o, fuller)
		if i >= n {
			return dst
		}
		dst = slices.Insert(dst, i, o)
		if len(dst) > n {
			dst = dst[:n]
		}
		return dst
	}
	if n <= 0 {
		return nil, nil
	}
	k.ix.objects[objRange].Ascend(func(it objItem) bool {
		r := &k.ranges[it.slot]
		t, id := splitKey(r.key)
		size := r.last - r.first + 1 // 0: 2^64
		if ex := r.excludedTotal(); ex != 0 {
			size -= ex
		}
		ranges = top(ranges, Occupancy{Tenant: t, ID: id, Used: r.allocated.Len(), Size: size})
		return true
	})
	k.ix.objects[objPool].Ascend(func(it objItem) bool {
		p := &k.pools[it.slot]
		t, id := splitKey(p.key)
		pools = top(pools, Occupancy{Tenant: t, ID: id, Used: p.reserved + p.active + p.consumed, Size: p.capacity})
		return true
	})
	return ranges, pools
}
