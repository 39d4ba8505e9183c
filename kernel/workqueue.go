package kernel

// Each run keeps two binary min-heaps of its work shards, so that claiming the next one
// and answering none_available cost O(log n), not a scan of a run that may hold tens of
// thousands of work shards (BenchmarkClaimNext):
//
//   - ready: the active, unclaimed ones, by (claims so far, name) — claim-next's choice;
//   - held: the claimed ones, by (their claim's deadline, lease lsn) — until when the
//     run may have nothing to claim.
//
// Keys are unique (names within a run, lease lsns), so the minimum, and with it every
// answer, is a function of the state alone, whatever order the heaps were built in.
// Snapshots do not store them: Restore rebuilds them from the work shards and leases.

type workQueue uint8

const (
	qReady workQueue = iota
	qHeld
)

func (k *Kernel) queue(r int32, q workQueue) *[]int32 {
	if q == qReady {
		return &k.runs[r].ready
	}
	return &k.runs[r].held
}

func (k *Kernel) queuePos(w int32, q workQueue) *int32 {
	if q == qReady {
		return &k.works[w].readyPos
	}
	return &k.works[w].heldPos
}

func (k *Kernel) queueLess(q workQueue, a, b int32) bool {
	wa, wb := &k.works[a], &k.works[b]
	if q == qReady {
		if wa.claims != wb.claims {
			return wa.claims < wb.claims
		}
		return wa.name < wb.name
	}
	da, db := k.claimDeadline(wa.lease), k.claimDeadline(wb.lease)
	if da != db {
		return da < db
	}
	return wa.lease < wb.lease
}

func (k *Kernel) queueSwap(h []int32, q workQueue, i, j int) {
	h[i], h[j] = h[j], h[i]
	*k.queuePos(h[i], q) = int32(i)
	*k.queuePos(h[j], q) = int32(j)
}

func (k *Kernel) queueUp(h []int32, q workQueue, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !k.queueLess(q, h[i], h[p]) {
			return
		}
		k.queueSwap(h, q, i, p)
		i = p
	}
}

func (k *Kernel) queueDown(h []int32, q workQueue, i int) bool {
	start := i
	for {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		m := l
		if r := l + 1; r < len(h) && k.queueLess(q, h[r], h[l]) {
			m = r
		}
		if !k.queueLess(q, h[m], h[i]) {
			break
		}
		k.queueSwap(h, q, i, m)
		i = m
	}
	return i > start
}

// enqueue adds work shard w to its run's queue q.
func (k *Kernel) enqueue(w int32, q workQueue) {
	hp := k.queue(k.works[w].run, q)
	*hp = append(*hp, w)
	*k.queuePos(w, q) = int32(len(*hp) - 1)
	k.queueUp(*hp, q, len(*hp)-1)
}

// dequeue removes work shard w from its run's queue q, if it is there.
func (k *Kernel) dequeue(w int32, q workQueue) {
	pos := k.queuePos(w, q)
	i := int(*pos)
	if i < 0 {
		return
	}
	hp := k.queue(k.works[w].run, q)
	h := *hp
	last := len(h) - 1
	if i != last {
		k.queueSwap(h, q, i, last)
	}
	*hp = h[:last]
	*pos = -1
	if i != last && !k.queueDown(*hp, q, i) {
		k.queueUp(*hp, q, i)
	}
}

// requeue restores the order after w's key changed (a renewed claim's deadline).
func (k *Kernel) requeue(w int32, q workQueue) {
	i := int(*k.queuePos(w, q))
	if i < 0 {
		return
	}
	h := *k.queue(k.works[w].run, q)
	if !k.queueDown(h, q, i) {
		k.queueUp(h, q, i)
	}
}

// rebuildWorkQueues fills every run's queues from the work shards and their claims
// (Restore, once the leases are back).
func (k *Kernel) rebuildWorkQueues() {
	for i := range k.runs {
		k.runs[i].ready, k.runs[i].held = k.runs[i].ready[:0], k.runs[i].held[:0]
	}
	for i := range k.works {
		w := &k.works[i]
		w.readyPos, w.heldPos = -1, -1
		if w.key == "" || !k.liveRun(w.run) {
			continue // free, or a deleted run's: in no queue
		}
		switch {
		case w.lease != 0:
			k.enqueue(int32(i), qHeld)
		case w.status == WorkActive:
			k.enqueue(int32(i), qReady)
		}
	}
}
