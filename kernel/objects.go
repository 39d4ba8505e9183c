package kernel

import (
	"math"

	"github.com/holdfast/holdfast/contract"
)

// createResource inserts a resource in state available.
func (k *Kernel) createResource(c *Command, out *Output) {
	if idx, ok := k.resIdx[string(k.tenantKey(c.Tenant, c.ObjectID))]; ok {
		out.Code = contract.CodeAlreadyExists
		k.viewResource(idx, out)
		return
	}
	idx, ok := takeSlot(&k.free.res, len(k.res), k.shape.MaxResources)
	if !ok {
		out.Code = contract.CodeResourceTableFull
		return
	}
	key := string(k.keyBuf)
	put(&k.res, idx, resource{key: key})
	k.resIdx[key] = idx
	k.ix.objects[objResource].ReplaceOrInsert(objItem{key: key, slot: idx})
	out.Event = EventResourceCreated
	k.viewResource(idx, out)
}

// createPool inserts a pool with all its capacity available.
func (k *Kernel) createPool(c *Command, out *Output) {
	if idx, ok := k.poolIdx[string(k.tenantKey(c.Tenant, c.ObjectID))]; ok {
		out.Code = contract.CodeAlreadyExists
		k.viewPool(idx, out)
		return
	}
	idx, ok := takeSlot(&k.free.pools, len(k.pools), k.shape.MaxPools)
	if !ok {
		out.Code = contract.CodePoolTableFull
		return
	}
	key := string(k.keyBuf)
	put(&k.pools, idx, pool{key: key, capacity: c.Capacity})
	k.poolIdx[key] = idx
	k.ix.objects[objPool].ReplaceOrInsert(objItem{key: key, slot: idx})
	out.Event = EventPoolCreated
	k.viewPool(idx, out)
}

// createRange inserts a value range with nothing allocated.
func (k *Kernel) createRange(c *Command, out *Output) {
	if idx, ok := k.rangeIdx[string(k.tenantKey(c.Tenant, c.ObjectID))]; ok {
		out.Code = contract.CodeAlreadyExists
		k.viewRange(idx, out)
		return
	}
	idx, ok := takeSlot(&k.free.ranges, len(k.ranges), k.shape.MaxRanges)
	if !ok {
		out.Code = contract.CodeRangeTableFull
		return
	}
	key := string(k.keyBuf)
	rg := valueRange{key: key, first: c.First, last: c.Last, strategy: c.Strategy, band: c.Band, hasBand: c.HasBand, format: c.Format}
	var ex []Interval
	for _, iv := range c.Excluded {
		ex = mergeInterval(ex, iv)
	}
	rg.setExcluded(ex)
	put(&k.ranges, idx, rg)
	k.rangeIdx[key] = idx
	k.ix.objects[objRange].ReplaceOrInsert(objItem{key: key, slot: idx})
	out.Event = EventRangeCreated
	k.viewRange(idx, out)
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
