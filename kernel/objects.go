package kernel

import (
	"math"

	"github.com/holdfast/holdfast/contract"
)

// objectTable is what the create verbs need of one object table.
type objectTable[T any] struct {
	rows  *[]T
	index map[string]int32
	free  *[]int32
	max   int
	kind  objKind
	full  Code
	event EventKind
	view  func(int32, *Output)
}

// createObject is every create verb's rule: an id taken answers already_exists with the
// object as it is, a full table its table's code; otherwise row(key) is inserted, indexed
// and listed.
func createObject[T any](k *Kernel, c *Command, out *Output, t objectTable[T], row func(key string) T) {
	if idx, ok := t.index[string(k.tenantKey(c.Tenant, c.ObjectID))]; ok {
		out.Code = contract.CodeAlreadyExists
		t.view(idx, out)
		return
	}
	idx, ok := takeSlot(t.free, len(*t.rows), t.max)
	if !ok {
		out.Code = t.full
		return
	}
	key := string(k.keyBuf)
	put(t.rows, idx, row(key))
	t.index[key] = idx
	k.ix.objects[t.kind].ReplaceOrInsert(objItem{key: key, slot: idx})
	out.Event = t.event
	t.view(idx, out)
}

// createResource inserts a resource in state available.
func (k *Kernel) createResource(c *Command, out *Output) {
	createObject(k, c, out, objectTable[resource]{&k.res, k.resIdx, &k.free.res, k.shape.MaxResources, objResource,
		contract.CodeResourceTableFull, EventResourceCreated, k.viewResource},
		func(key string) resource { return resource{key: key} })
}

// createPool inserts a pool with all its capacity available.
func (k *Kernel) createPool(c *Command, out *Output) {
	createObject(k, c, out, objectTable[pool]{&k.pools, k.poolIdx, &k.free.pools, k.shape.MaxPools, objPool,
		contract.CodePoolTableFull, EventPoolCreated, k.viewPool},
		func(key string) pool { return pool{key: key, capacity: c.Capacity} })
}

// createRange inserts a value range with nothing allocated.
func (k *Kernel) createRange(c *Command, out *Output) {
	createObject(k, c, out, objectTable[valueRange]{&k.ranges, k.rangeIdx, &k.free.ranges, k.shape.MaxRanges, objRange,
		contract.CodeRangeTableFull, EventRangeCreated, k.viewRange},
		func(key string) valueRange {
			rg := valueRange{key: key, first: c.First, last: c.Last, strategy: c.Strategy, band: c.Band, hasBand: c.HasBand, format: c.Format}
			var ex []Interval
			for _, iv := range c.Excluded {
				ex = mergeInterval(ex, iv)
			}
			rg.setExcluded(ex)
			return rg
		})
}

func (k *Kernel) viewResource(idx int32, out *Output) {
	r := &k.res[idx]
	t, id := splitKey(r.key)
	out.Object = ObjectResource
	shard, lsn := k.leaseID(r.lease)
	out.Resource = ResourceView{Tenant: t, ID: id, State: r.state, LeaseLSN: lsn, LeaseShard: shard, Version: r.version}
}

func (k *Kernel) viewPool(idx int32, out *Output) {
	p := &k.pools[idx]
	t, id := splitKey(p.key)
	out.Object = ObjectPool
	out.Pool = PoolView{Tenant: t, ID: id, Capacity: p.capacity, Reserved: p.reserved, Active: p.active,
		Consumed: p.consumed, Available: p.capacity - p.reserved - p.active - p.consumed}
}

func (k *Kernel) viewRange(idx int32, out *Output) {
	r := &k.ranges[idx]
	t, id := splitKey(r.key)
	out.Object = ObjectRange
	allocated := r.allocated.Len()
	free, full := r.freeCount()
	if full {
		free = math.MaxUint64 // 2^64 values left: saturate
	}
	out.Range = RangeView{Tenant: t, ID: id, First: r.first, Last: r.last, Strategy: r.strategy,
		Allocated: allocated, Free: free, Excluded: r.excludedTotal(), Band: r.band, HasBand: r.hasBand,
		Format: r.format}
}

// GetResource reads a resource of tenant: ok or resource_not_found.
func (k *Kernel) GetResource(tenant, id string, out *Output) {
	out.reset(k.lastLSN)
	if idx, ok := k.resIdx[string(k.tenantKey(tenant, id))]; ok {
		k.viewResource(idx, out)
		return
	}
	out.Code = contract.CodeResourceNotFound
}

// GetPool reads a pool of tenant: ok or pool_not_found.
func (k *Kernel) GetPool(tenant, id string, out *Output) {
	out.reset(k.lastLSN)
	if idx, ok := k.poolIdx[string(k.tenantKey(tenant, id))]; ok {
		k.viewPool(idx, out)
		return
	}
	out.Code = contract.CodePoolNotFound
}

// GetRange reads a range of tenant: ok or range_not_found.
func (k *Kernel) GetRange(tenant, id string, out *Output) {
	out.reset(k.lastLSN)
	if idx, ok := k.rangeIdx[string(k.tenantKey(tenant, id))]; ok {
		k.viewRange(idx, out)
		return
	}
	out.Code = contract.CodeRangeNotFound
}
