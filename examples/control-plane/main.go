// Command control-plane ports a cloud control plane's five allocators to Holdfast (the
// shakenfist plan: one primitive instead of three reimplementations, MACs correct by
// construction instead of by the birthday paradox):
//
//   - VXLAN ids 1..16,777,215, random;
//   - console and VDI ports 30000..50000 per node, three ports in one lease, least
//     recently freed first, with ports other processes use excluded;
//   - vsock CIDs 3..2^32-1, random, with no cluster-wide lock;
//   - MAC addresses under the OUI 52:54:00, random and collision-free (the range hands a
//     value out once), shown formatted;
//   - an address pool per network: the CIDR's hosts, the gateway excluded.
//
// It imports the allocations of an existing deployment (the migration's cut-over), boots
// an instance in one call (its ports, CID, MAC and address: one lease labelled with the
// owner, over four placement keys),
// answers who holds a MAC seen on the wire, hard-deletes the instance by its owner label,
// runs 64 concurrent allocators against one pool and checks no value went twice, and
// grows a node's port range while they run.
//
//	go run ./examples/control-plane --server nats://127.0.0.1:4222
package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/examples/internal/example"
	"github.com/holdfast/holdfast/messages"
)

func main() { example.Main("control-plane", run) }

// plane is the control plane's view of its allocators: the range ids.
type plane struct {
	hf  *client.Client
	out io.Writer
	// vxlan, vsock and mac are one range each; ports are per node, addresses per network.
	vxlan, vsock, mac string
}

func (p *plane) ports(node string) string    { return node + "/ports" }
func (p *plane) addrs(network string) string { return network + "/addresses" }

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := example.NewFlags("control-plane", "cloud-"+client.NewOperationID()[:6])
	allocators := fs.Int("allocators", 64, "concurrent allocators against one pool")
	hf, ctx, done, err := fs.Start(ctx, args, 2*time.Minute)
	if err != nil {
		return err
	}
	defer done()
	p := &plane{hf: hf, out: out, vxlan: "vxlan", vsock: "vsock", mac: "mac"}

	if err := p.createRanges(ctx); err != nil {
		return err
	}
	if err := p.migrate(ctx); err != nil {
		return err
	}
	if err := p.bootAndDelete(ctx); err != nil {
		return err
	}
	return p.concurrent(ctx, *allocators)
}

// must turns a committed domain failure into an error (it names the operation and its
// code): the calls below expect ok.
func must[R interface{ Err() error }](r R, err error) (R, error) {
	if err != nil {
		return r, err
	}
	return r, r.Err()
}

func (p *plane) createRanges(ctx context.Context) error {
	macFirst, macLast, err := client.MACRange("52:54:00")
	if err != nil {
		return err
	}
	netFirst, netLast, err := client.IPv4Range("10.20.0.0/24")
	if err != nil {
		return err
	}
	gateway := netFirst // 10.20.0.1
	specs := []client.RangeSpec{
		{ID: p.vxlan, First: 1, Last: 1<<24 - 1, Strategy: messages.StrategyRandom},
		{ID: p.vsock, First: 3, Last: 1<<32 - 1, Strategy: messages.StrategyRandom},
		{ID: p.mac, First: macFirst, Last: macLast, Strategy: messages.StrategyRandom, Format: client.RangeFormatMAC},
		{ID: p.addrs("net-blue"), First: netFirst, Last: netLast, Format: client.RangeFormatIPv4,
			Excluded: []client.Interval{{First: gateway, Last: gateway}}},
	}
	for _, node := range []string{"node1", "node2"} {
		// Ports other processes listen on are never handed out; the first ten stay for
		// services that name their port (the static band).
		specs = append(specs, client.RangeSpec{ID: p.ports(node), First: 30000, Last: 50000,
			Strategy: messages.StrategyLeastRecentlyFreed, Format: client.RangeFormatPort,
			Excluded:   []client.Interval{{First: 30022, Last: 30022}, {First: 30080, Last: 30080}},
			StaticBand: &client.Interval{First: 30000, Last: 30009}})
	}
	for _, s := range specs {
		if _, err := must(p.hf.CreateRangeSpec(ctx, s)); err != nil {
			return err
		}
	}
	fmt.Fprintf(p.out, "allocators: vxlan, vsock, mac (52:54:00:00:00:00..%s), node1/ports, node2/ports, net-blue/addresses (%s..%s, gateway %s excluded)\n",
		client.FormatMAC(macLast), client.FormatIPv4(netFirst), client.FormatIPv4(netLast), client.FormatIPv4(gateway))
	return nil
}

// owner labels a lease with the object that owns it, as the seed's allocation rows do.
func owner(kind, uuid string) map[string]string {
	return map[string]string{"owner_type": kind, "owner_uuid": uuid}
}

// migrate imports an existing deployment's allocations at cut-over: 300 networks' VXLAN
// ids and 40 instances' ports and MACs, in calls of at most 1000 leases, each its own
// lease with its own owner, permanent (active) — an instance's lease over two placement
// keys (node1's ports, the cloud's MACs), all 40 in one call, all or nothing. A retry of a
// call is safe: same operation id.
func (p *plane) migrate(ctx context.Context) error {
	var vx []client.ImportLease
	for i := range 300 {
		vx = append(vx, client.ImportLease{Holder: "network-service", Activate: true,
			Members: []*messages.Member{client.RangeValue(p.vxlan, uint64(1000+7*i))}, Labels: owner("network", fmt.Sprintf("net-%03d", i))})
	}
	res, err := must(p.hf.Import(ctx, vx, client.WithOperationID("migrate-vxlan")))
	if err != nil {
		return err
	}
	again, err := must(p.hf.Import(ctx, vx, client.WithOperationID("migrate-vxlan")))
	if err != nil {
		return err
	}
	if !again.FromRetryCache || again.Leases[0].LeaseId != res.Leases[0].LeaseId {
		return fmt.Errorf("a retried import is not the same import")
	}
	var ports []client.ImportLease
	macBase, _, err := client.MACRange("52:54:00")
	if err != nil {
		return err
	}
	for i := range 40 {
		base := uint64(30100 + 3*i)
		ports = append(ports, client.ImportLease{Holder: "compute", Activate: true,
			Members: []*messages.Member{client.RangeValue(p.ports("node1"), base), client.RangeValue(p.ports("node1"), base+1),
				client.RangeValue(p.ports("node1"), base+2), client.RangeValue(p.mac, macBase+0x10000+uint64(i))},
			Labels: owner("instance", fmt.Sprintf("old-%02d", i))})
	}
	if _, err := must(p.hf.Import(ctx, ports)); err != nil {
		return err
	}
	// A value imported twice is refused, all or nothing, naming the lease.
	clash, err := p.hf.Import(ctx, []client.ImportLease{
		{Holder: "network-service", Activate: true, Members: []*messages.Member{client.RangeValue(p.vxlan, 99)}},
		{Holder: "network-service", Activate: true, Members: []*messages.Member{client.RangeValue(p.vxlan, 1007)}},
	})
	if err != nil {
		return err
	}
	if clash.Code != messages.CodeValueBusy || clash.Item == nil || *clash.Item != 1 {
		return fmt.Errorf("a clashing import answered %s", clash.Code)
	}
	if l, err := p.hf.LookupValue(ctx, p.vxlan, 99); err != nil || l.State != client.ValueFree {
		return fmt.Errorf("a failed import left value 99 %v (%v)", l.State, err)
	}
	vr, _ := p.hf.GetRange(ctx, p.vxlan)
	pr, _ := p.hf.GetRange(ctx, p.ports("node1"))
	mr, _ := p.hf.GetRange(ctx, p.mac)
	fmt.Fprintf(p.out, "migration: imported %d networks (vxlan allocated=%d) and %d instances' ports and MACs (node1 allocated=%d, mac allocated=%d); a clashing import: %s at leases[%d]\n",
		len(res.Leases), vr.Range.GetAllocated(), len(ports), pr.Range.GetAllocated(), mr.Range.GetAllocated(), clash.Code, *clash.Item)

	// Reconciliation pages through what a range handed out, as the old table's rows.
	n, cursor := 0, ""
	for {
		page, err := must(p.hf.ListAllocations(ctx, p.vxlan, client.Page{Cursor: cursor, Limit: 128}))
		if err != nil {
			return err
		}
		n += len(page.Allocations)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	fmt.Fprintf(p.out, "reconciliation: %d vxlan allocations listed\n", n)
	if n != 300 {
		return fmt.Errorf("listed %d vxlan allocations, imported 300", n)
	}
	return nil
}

// instance is what one boot took: one lease over every allocator's values, whatever
// shards they live on — the node's ports, the cloud-wide vsock CID and MAC, the network's
// address — so one fence, and nothing to clean up when a boot fails half-way.
type instance struct {
	uuid                    string
	lease                   client.Lease
	portValues              []uint64
	cidValue, macV, addrVal uint64
}

func value(l client.Lease, i int) uint64 { return l.Members[i].GetValue() }

// boot takes everything an instance needs in one call: all of it or none of it.
func (p *plane) boot(ctx context.Context, uuid, node string) (*instance, error) {
	r, err := must(p.hf.Reserve(ctx, client.ReserveRequest{Holder: "compute", Activate: true, Labels: owner("instance", uuid),
		Members: []*messages.Member{client.RangeAny(p.ports(node)), client.RangeAny(p.ports(node)), client.RangeAny(p.ports(node)),
			client.RangeAny(p.vsock), client.RangeAny(p.mac), client.RangeAny(p.addrs("net-blue"))}}))
	if err != nil {
		return nil, err
	}
	l := r.Lease
	return &instance{uuid: uuid, lease: l, portValues: []uint64{value(l, 0), value(l, 1), value(l, 2)},
		cidValue: value(l, 3), macV: value(l, 4), addrVal: value(l, 5)}, nil
}

func (p *plane) bootAndDelete(ctx context.Context) error {
	in, err := p.boot(ctx, "vm-7f3a", "node1")
	if err != nil {
		return err
	}
	for _, v := range in.portValues {
		if v >= 30000 && v <= 30009 || v == 30022 || v == 30080 {
			return fmt.Errorf("a boot took port %d: the band and the excluded ports are not for 'any'", v)
		}
	}
	fmt.Fprintf(p.out, "boot vm-7f3a in one call: ports %v, cid %d, mac %s, address %s: one lease, %d members\n",
		in.portValues, in.cidValue, client.FormatMAC(in.macV), client.FormatIPv4(in.addrVal), len(in.lease.Members))

	// A MAC seen on the wire: who holds it?
	who, err := must(p.hf.LookupValue(ctx, p.mac, in.macV))
	if err != nil {
		return err
	}
	fmt.Fprintf(p.out, "who holds %s: %s lease %s owner %s/%s\n", client.FormatMAC(in.macV), who.State, who.Lease.LeaseId,
		who.Lease.Labels["owner_type"], who.Lease.Labels["owner_uuid"])
	if who.Lease.LeaseId != in.lease.LeaseId {
		return fmt.Errorf("lookup names lease %s, the boot took %s", who.Lease.LeaseId, in.lease.LeaseId)
	}
	// A console port is freed by its number, as a port release does — but it shares its
	// lease with the instance's other values, and a hold is never released in part.
	part, err := p.hf.ReleaseValue(ctx, "compute", p.ports("node1"), in.portValues[0], 0, false)
	if err != nil {
		return err
	}
	fmt.Fprintf(p.out, "release port %d alone: %s\n", in.portValues[0], part.Code)

	// Hard delete: everything the instance owns, whoever holds it, in a loop of calls.
	calls, freed := 0, uint64(0)
	for more := true; more; calls++ {
		r, err := must(p.hf.RevokeAll(ctx, "owner_uuid=vm-7f3a", 2, true))
		if err != nil {
			return err
		}
		freed, more = freed+r.Count, r.More
	}
	left, err := must(p.hf.ListLeasesPage(ctx, client.LeaseQuery{Label: "owner_uuid=vm-7f3a"}))
	if err != nil {
		return err
	}
	for _, c := range []struct {
		rng string
		v   uint64
	}{{p.ports("node1"), in.portValues[2]}, {p.vsock, in.cidValue}, {p.mac, in.macV}, {p.addrs("net-blue"), in.addrVal}} {
		if err := p.freed(ctx, c.rng, c.v); err != nil {
			return err
		}
	}
	fmt.Fprintf(p.out, "hard delete vm-7f3a: %d lease freed in %d calls; %d left; its ports, cid, mac and address are free\n",
		freed, calls, len(left.Leases))
	return nil
}

// freed waits until value v of range rng is free: the values a lease holds on other
// shards than its home are freed a moment after the home ends the lease.
func (p *plane) freed(ctx context.Context, rng string, v uint64) error {
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		l, err := must(p.hf.LookupValue(ctx, rng, v))
		if err != nil {
			return err
		}
		if l.State == client.ValueFree {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s %d is %s after the hard delete", rng, v, l.State)
		}
	}
}

// concurrent runs n allocators against one pool (node2's ports): each boots and frees
// instances; meanwhile the range grows. Every value held at once must be distinct, and
// every lease's values must be inside the bounds in force when it was granted.
func (p *plane) concurrent(ctx context.Context, n int) error {
	rng := p.ports("node2")
	var mu sync.Mutex
	holders := map[uint64]string{} // value → lease holding it, as the allocators see it
	var dup error
	var wg sync.WaitGroup
	errs := make(chan error, n)
	const rounds = 6
	for a := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				res, err := p.hf.Reserve(ctx, client.ReserveRequest{Holder: fmt.Sprintf("allocator-%d", a), Activate: true,
					Members: []*messages.Member{client.RangeAny(rng)}, Labels: owner("instance", fmt.Sprintf("c-%d-%d", a, r))})
				if err == nil {
					err = res.Err()
				}
				if err != nil {
					errs <- err
					return
				}
				v := value(res.Lease, 0)
				mu.Lock()
				if other, taken := holders[v]; taken && dup == nil {
					dup = fmt.Errorf("port %d handed to %s while %s held it", v, res.Lease.LeaseId, other)
				}
				holders[v] = res.Lease.LeaseId
				mu.Unlock()
				if r%2 == 1 { // free every other one, by its number
					mu.Lock()
					delete(holders, v)
					mu.Unlock()
					// Fenced by the lease's token: a late copy of this release never
					// frees a later lease of the same port.
					if rel, err := p.hf.ReleaseValueFenced(ctx, fmt.Sprintf("allocator-%d", a), rng, v, res.Lease.Fence(), false); err != nil || !rel.OK() {
						errs <- fmt.Errorf("release %d: %v %v", v, err, rel)
						return
					}
				}
			}
		}()
	}
	// Meanwhile an operator grows the range in place (a node's hardware changed).
	last := uint64(60000) // only the end moves: the start stays where it is
	resized, err := must(p.hf.ResizeRangeBounds(ctx, rng, nil, &last, nil))
	if err != nil {
		return err
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	if dup != nil {
		return dup
	}
	// What the allocators hold is what the range says is allocated, value by value.
	listed, cursor := 0, ""
	for {
		page, err := must(p.hf.ListAllocations(ctx, rng, client.Page{Cursor: cursor, Limit: 1000}))
		if err != nil {
			return err
		}
		for _, a := range page.Allocations {
			if holders[a.GetValue()] != a.GetLease().GetLeaseId() {
				return fmt.Errorf("port %d: listed with lease %s, the allocators hold it with %q", a.GetValue(), a.GetLease().GetLeaseId(), holders[a.GetValue()])
			}
			listed++
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if listed != len(holders) {
		return fmt.Errorf("%d ports listed, the allocators hold %d", listed, len(holders))
	}
	fmt.Fprintf(p.out, "%d concurrent allocators: %d boots, no port handed out twice, %d held; range resized under load to [%d..%d]\n",
		n, n*rounds, listed, resized.Range.GetFirst(), resized.Range.GetLast())
	return nil
}
