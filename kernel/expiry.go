package kernel

// expiryHeap indexes reserved leases by (deadline_slot, lsn): a binary min-heap of lease
// indices whose positions live in the lease records, so insert, remove and re-key are
// O(log n). The total order (ties broken by lsn) makes the due list independent of the
// heap's layout, so a restored snapshot answers exactly as the original.
type expiryHeap struct {
	h []int32
}

func (x *expiryHeap) len() int { return len(x.h) }

func (k *Kernel) expiryLess(a, b int32) bool {
	la, lb := &k.leases[a], &k.leases[b]
	if la.deadline != lb.deadline {
		return la.deadline < lb.deadline
	}
	return la.lsn < lb.lsn
}

func (x *expiryHeap) swap(k *Kernel, i, j int) {
	x.h[i], x.h[j] = x.h[j], x.h[i]
	k.leases[x.h[i]].heapPos = int32(i)
	k.leases[x.h[j]].heapPos = int32(j)
}

func (x *expiryHeap) up(k *Kernel, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !k.expiryLess(x.h[i], x.h[p]) {
			return
		}
		x.swap(k, i, p)
		i = p
	}
}

func (x *expiryHeap) down(k *Kernel, i int) bool {
	start := i
	n := len(x.h)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && k.expiryLess(x.h[r], x.h[l]) {
			m = r
		}
		if !k.expiryLess(x.h[m], x.h[i]) {
			break
		}
		x.swap(k, i, m)
		i = m
	}
	return i > start
}

func (x *expiryHeap) push(k *Kernel, idx int32) {
	x.h = append(x.h, idx)
	k.leases[idx].heapPos = int32(len(x.h) - 1)
	x.up(k, len(x.h)-1)
}

func (x *expiryHeap) remove(k *Kernel, idx int32) {
	i := int(k.leases[idx].heapPos)
	last := len(x.h) - 1
	if i != last {
		x.swap(k, i, last)
	}
	x.h = x.h[:last]
	k.leases[idx].heapPos = -1
	if i != last {
		if !x.down(k, i) {
			x.up(k, i)
		}
	}
}

func (x *expiryHeap) fix(k *Kernel, idx int32) {
	i := int(k.leases[idx].heapPos)
	if !x.down(k, i) {
		x.up(k, i)
	}
}

// Due is a lease whose deadline has come: the shard commits an expire entry for it.
type Due struct {
	Tenant   string
	LeaseLSN uint64
	Deadline uint64
}

// DueExpirations appends at most max leases whose deadline_slot is at or before slot,
// earliest deadline first, then lowest lease id. It walks the heap best-first with a
// small frontier, so the cost is O(max·log max) and the heap is left untouched.
func (k *Kernel) DueExpirations(slot uint64, max int, dst []Due) []Due {
	if len(k.expiry.h) == 0 || max <= 0 {
		return dst
	}
	max = min(max, len(k.expiry.h))
	// frontier is a tiny min-heap of heap positions.
	frontier := make([]int, 0, 2*max+1)
	less := func(a, b int) bool { return k.expiryLess(k.expiry.h[a], k.expiry.h[b]) }
	pushF := func(p int) {
		frontier = append(frontier, p)
		for i := len(frontier) - 1; i > 0; {
			q := (i - 1) / 2
			if !less(frontier[i], frontier[q]) {
				break
			}
			frontier[i], frontier[q] = frontier[q], frontier[i]
			i = q
		}
	}
	popF := func() int {
		top := frontier[0]
		last := len(frontier) - 1
		frontier[0] = frontier[last]
		frontier = frontier[:last]
		for i := 0; ; {
			l, m := 2*i+1, i
			if l < len(frontier) && less(frontier[l], frontier[m]) {
				m = l
			}
			if r := l + 1; r < len(frontier) && less(frontier[r], frontier[m]) {
				m = r
			}
			if m == i {
				break
			}
			frontier[i], frontier[m] = frontier[m], frontier[i]
			i = m
		}
		return top
	}
	pushF(0)
	for n := 0; n < max && len(frontier) > 0; n++ {
		p := popF()
		l := &k.leases[k.expiry.h[p]]
		if l.deadline > slot {
			break
		}
		t, _ := splitKey(k.holders[l.holder].key)
		dst = append(dst, Due{Tenant: t, LeaseLSN: l.lsn, Deadline: l.deadline})
		for _, c := range [2]int{2*p + 1, 2*p + 2} {
			if c < len(k.expiry.h) {
				pushF(c)
			}
		}
	}
	return dst
}

// NextDeadline is the earliest deadline in the expiry index (ok=false when empty), so the
// shard can tell whether a tick has anything to do.
func (k *Kernel) NextDeadline() (uint64, bool) {
	if len(k.expiry.h) == 0 {
		return 0, false
	}
	return k.leases[k.expiry.h[0]].deadline, true
}
