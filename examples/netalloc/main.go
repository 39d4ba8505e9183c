// Command netalloc allocates network identifiers from Holdfast ranges — VXLAN
// ids and console ports — for one owner, then releases everything the owner
// holds, as a decommissioning job would: ListLeases, then Release each.
//
//	go run ./examples/netalloc --server nats://127.0.0.1:4222
//
// The ranges are "<site>/vxlan" (24-bit VNIs, lowest free first) and
// "<site>/console" (ports 7000-7047, least recently freed first, so a port
// just given back is not handed out again at once).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/examples/internal/example"
	"github.com/holdfast/holdfast/messages"
)

func main() { example.Main("netalloc", run) }

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := example.NewFlags("netalloc", "default")
	site := fs.String("site", "site-"+client.NewOperationID()[:8], "site id (the placement key of its ranges)")
	owner := fs.String("owner", "router-"+client.NewOperationID()[:8], "the holder that gets the ids")
	hf, ctx, done, err := fs.Start(ctx, args, time.Minute)
	if err != nil {
		return err
	}
	defer done()

	vxlan, console := *site+"/vxlan", *site+"/console"
	for _, r := range []struct {
		id          string
		first, last uint64
		strategy    string
	}{
		{vxlan, 4096, 1<<24 - 1, messages.StrategyLowestFree},
		{console, 7000, 7047, messages.StrategyLeastRecentlyFreed},
	} {
		res, err := hf.CreateRange(ctx, r.id, r.first, r.last, r.strategy)
		if err != nil {
			return err
		}
		if res.Code != messages.CodeOK && res.Code != messages.CodeAlreadyExists {
			return res.Err()
		}
	}
	fmt.Fprintf(out, "site %s: ranges %s [4096..16777215] and %s [7000..7047]\n", *site, vxlan, console)

	grant := func(what string, r client.ReserveRequest) (*client.LeaseResult, error) {
		r.Holder = *owner
		res, err := hf.Reserve(ctx, r)
		if err != nil {
			return nil, err
		}
		if err := res.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		fmt.Fprintf(out, "%s: lease %s %s, values %v\n", what, res.Lease.LeaseId, res.Lease.State, values(res.Lease.Members))
		return res, nil
	}
	// A tenant network: any free VNI and any free console port, one lease.
	if _, err := grant("network blue", client.ReserveRequest{
		Members:  []*messages.Member{client.RangeAny(vxlan), client.RangeAny(console)},
		Activate: true,
	}); err != nil {
		return err
	}
	// A network with a VNI fixed by an outside system.
	if _, err := grant("network green", client.ReserveRequest{
		Members:  []*messages.Member{client.RangeValue(vxlan, 5000)},
		Activate: true,
	}); err != nil {
		return err
	}
	// Two VNIs held for a minute while a peering is negotiated: several "any"
	// members of one range get distinct values.
	peering, err := grant("peering hold", client.ReserveRequest{
		Members: []*messages.Member{client.RangeAny(vxlan), client.RangeAny(vxlan)},
		TTL:     time.Minute,
	})
	if err != nil {
		return err
	}
	if v := values(peering.Lease.Members); len(v) != 2 || v[0] == v[1] {
		return fmt.Errorf("peering hold got values %v, want two distinct", v)
	}

	// Someone else wants VNI 5000: taken.
	other, err := hf.Reserve(ctx, client.ReserveRequest{Holder: "other-" + *owner, Members: []*messages.Member{client.RangeValue(vxlan, 5000)}, Activate: true})
	if err != nil {
		return err
	}
	if other.Code != messages.CodeValueBusy {
		return fmt.Errorf("second claim of VNI 5000: got %s, want value_busy", other.Code)
	}
	fmt.Fprintf(out, "another owner asks for VNI 5000: %s\n", other.Code)

	// Decommission: release everything the owner holds.
	list, err := hf.ListLeases(ctx, *owner, 0)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s holds %d leases\n", *owner, len(list.Leases))
	if len(list.Leases) != 3 {
		return fmt.Errorf("owner holds %d leases, want 3", len(list.Leases))
	}
	for _, l := range list.Leases {
		rel, err := hf.Release(ctx, *owner, l.Fence())
		if err != nil {
			return err
		}
		if err := rel.Err(); err != nil {
			return fmt.Errorf("release %s: %w", l.LeaseId, err)
		}
		fmt.Fprintf(out, "released %s (%s, values %v)\n", rel.Lease.LeaseId, l.State, values(l.Members))
	}
	list, err = hf.ListLeases(ctx, *owner, 0)
	if err != nil {
		return err
	}
	if len(list.Leases) != 0 {
		return fmt.Errorf("owner still holds %d leases", len(list.Leases))
	}
	v, err := hf.GetRange(ctx, vxlan)
	if err != nil {
		return err
	}
	c, err := hf.GetRange(ctx, console)
	if err != nil {
		return err
	}
	if v.Range.GetAllocated() != 0 || c.Range.GetAllocated() != 0 {
		return errors.New("values still allocated after the release")
	}
	fmt.Fprintf(out, "%s holds nothing; %s allocated=%d, %s allocated=%d\n", *owner, vxlan, v.Range.Allocated, console, c.Range.Allocated)
	return nil
}

// values lists the values of the range members.
func values(ms []*messages.Member) []uint64 {
	var vs []uint64
	for _, m := range ms {
		if m.Value != nil {
			vs = append(vs, m.GetValue())
		}
	}
	return vs
}
