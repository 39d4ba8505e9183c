package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/bridge"
	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/messages"
)

// deploy/nats-accounts.conf, run by a real nats-server: one account per tenant importing
// only its tenant's subjects, a worker role that may hold leases but not revoke them, an
// operator role that may. Holdfast serves through it; a worker's revoke is refused by
// NATS before it reaches Holdfast, the operator's is answered, and one tenant cannot reach
// another's subjects at all.
func TestNATSAccountsAndRoles(t *testing.T) {
	ns, as := startAccounts(t, bridge.Holders{})
	ctx := context.Background()
	operator := as("acme-operator", "acme-operator-secret", "acme")
	worker := as("acme-worker", "acme-worker-secret", "acme")

	if r, err := operator.CreateResource(ctx, "gpu0"); err != nil || !r.OK() {
		t.Fatalf("operator create: %v %+v", err, r)
	}
	if _, err := worker.CreateResource(ctx, "gpu1"); err == nil {
		t.Fatal("a worker created a resource")
	}
	res, err := worker.Reserve(ctx, client.ReserveRequest{Holder: "w1", Activate: true, Members: []*messages.Member{client.Resource("gpu0")}})
	if err != nil || !res.OK() {
		t.Fatalf("worker reserve: %v %+v", err, res)
	}
	id := res.Fence().LeaseID
	if _, err := worker.Revoke(ctx, id); err == nil {
		t.Fatal("a worker's revoke went through")
	}
	if got, err := operator.GetLease(ctx, id); err != nil || got.Lease.GetState() != "active" {
		t.Fatalf("after the worker's refused revoke: %v %+v", err, got.Lease)
	}
	if r, err := operator.Revoke(ctx, id); err != nil || !r.OK() {
		t.Fatalf("operator revoke: %v %+v", err, r)
	}
	if r, err := operator.Reclaim(ctx, id); err != nil || !r.OK() {
		t.Fatalf("operator reclaim: %v %+v", err, r)
	}
	// The allocators: a worker looks values up and frees what it holds; revoking a
	// value whoever holds it, excluding and importing are an operator's.
	if r, err := operator.CreateRange(ctx, "ports", 30000, 30009, ""); err != nil || !r.OK() {
		t.Fatalf("operator range: %v %+v", err, r)
	}
	if r, err := worker.Reserve(ctx, client.ReserveRequest{Holder: "w1", Activate: true, Members: []*messages.Member{client.RangeValue("ports", 30001)}}); err != nil || !r.OK() {
		t.Fatalf("worker reserve a port: %v %+v", err, r)
	}
	if r, err := worker.LookupValue(ctx, "ports", 30001); err != nil || r.State != client.ValueHeld {
		t.Fatalf("worker lookup: %v %+v", err, r)
	}
	if _, err := worker.RevokeValue(ctx, "ports", 30001); err == nil {
		t.Fatal("a worker revoked a value")
	}
	if _, err := worker.Exclude(ctx, "ports", 30005, 30005); err == nil {
		t.Fatal("a worker excluded a value")
	}
	if r, err := worker.ReleaseValue(ctx, "w1", "ports", 30001, 0, false); err != nil || !r.OK() {
		t.Fatalf("worker release by value: %v %+v", err, r)
	}
	// Deleting is the operator's too.
	if _, err := worker.DeleteResource(ctx, "gpu0"); err == nil {
		t.Fatal("a worker deleted a resource")
	}
	if r, err := operator.DeleteResource(ctx, "gpu0"); err != nil || !r.OK() {
		t.Fatalf("operator delete: %v %+v", err, r)
	}

	// Another tenant's account has no route to acme's subjects: the client talks to
	// holdfast.v1.acme.* and nothing there answers it.
	other := as("globex-operator", "globex-operator-secret", "acme")
	_, err = other.GetLease(ctx, id)
	var de *client.DefiniteError
	var ie *client.IndefiniteError
	if err == nil || !(errors.As(err, &de) || errors.As(err, &ie)) {
		t.Fatalf("globex reading acme's lease: %v", err)
	}
	mine := as("globex-operator", "globex-operator-secret", "globex")
	if r, err := mine.CreateResource(ctx, "gpu0"); err != nil || !r.OK() {
		t.Fatalf("globex in its own tenant: %v %+v", err, r)
	}

	tenantReplaysItsOwnEvents(t, ns.ClientURL(), operator, worker)
}

// startAccounts runs a real nats-server with deploy/nats-accounts.conf and Holdfast on
// it with holders h; as connects a client as a user of the configuration to a tenant.
func startAccounts(t *testing.T, h bridge.Holders) (*natsserver.Server, func(user, password, tenant string) *client.Client) {
	t.Helper()
	conf, err := os.ReadFile("../deploy/nats-accounts.conf")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	text := strings.Replace(string(conf), `store_dir: "/var/lib/nats"`, `store_dir: "`+filepath.Join(dir, "js")+`"`, 1)
	path := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := natsserver.ProcessConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	opts.Host, opts.Port, opts.NoLog, opts.NoSigs = "127.0.0.1", -1, true, true
	ns, err := natsserver.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(ns.Shutdown)

	k := kernel.DefaultConfig()
	k.SlotMillis = 10
	srv, err := Start(context.Background(), Config{Data: filepath.Join(dir, "data"), Shards: 2, Slot: 10 * time.Millisecond,
		Kernel: k, NATSURL: ns.ClientURL(), NATSOptions: []nats.Option{nats.UserInfo("holdfast", "holdfast-secret")}, Holders: h})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })

	return ns, func(user, password, tenant string) *client.Client {
		t.Helper()
		nc, err := nats.Connect(ns.ClientURL(), nats.UserInfo(user, password), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		c, err := client.New(nc, client.WithTenant(tenant), client.WithTimeout(500*time.Millisecond), client.WithRetry(2, 10*time.Millisecond, 10*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
}

// --holders bound on a real nats-server with the accounts configuration: a holder id
// belongs to the NATS user that sends it (its name, or one under "<user>/"), read from the
// Nats-Request-Info header its tenant's import shares. A worker cannot reserve as, renew,
// release or free by value another worker's leases, nor list or see who holds them; the
// operator acts for any holder and sees every one; another tenant reaches nothing.
func TestHoldersBoundToNATSUsers(t *testing.T) {
	_, as := startAccounts(t, bridge.Holders{Bound: true, Operators: []string{"acme-operator"}})
	ctx := context.Background()
	operator := as("acme-operator", "acme-operator-secret", "acme")
	w1 := as("acme-worker", "acme-worker-secret", "acme")
	w2 := as("acme-worker-2", "acme-worker-2-secret", "acme")
	denied := func(what string, err error) {
		t.Helper()
		var de *client.DefiniteError
		if !errors.As(err, &de) || de.Code != messages.CodePermissionDenied || !strings.Contains(de.Message, "holder") {
			t.Fatalf("%s: %v, want permission_denied naming the holder", what, err)
		}
	}
	for _, id := range []string{"n1/gpu0", "gpu1"} {
		if r, err := operator.CreateResource(ctx, id); err != nil || !r.OK() {
			t.Fatalf("operator create: %v %+v", err, r)
		}
	}
	if r, err := operator.CreateRange(ctx, "n1/ports", 30000, 30009, ""); err != nil || !r.OK() {
		t.Fatalf("operator range: %v %+v", err, r)
	}

	// Worker 1 holds as itself, or under its name; not as anybody else.
	res, err := w1.Reserve(ctx, client.ReserveRequest{Holder: "acme-worker/job-1", Activate: true,
		Members: []*messages.Member{client.Resource("n1/gpu0"), client.RangeValue("n1/ports", 30001)}, Labels: map[string]string{"owner_uuid": "vm-1"}})
	if err != nil || !res.OK() {
		t.Fatalf("worker 1 reserving as acme-worker/job-1: %v %+v", err, res)
	}
	fence := res.Fence()
	if res.Lease.GetHolderId() != "acme-worker/job-1" {
		t.Fatalf("the holder sees its own holder id: %+v", res.Lease)
	}
	_, err = w1.Reserve(ctx, client.ReserveRequest{Holder: "acme-worker-2", TTL: time.Minute, Members: []*messages.Member{client.Resource("gpu1")}})
	denied("worker 1 reserving as worker 2", err)
	_, err = w1.Reserve(ctx, client.ReserveRequest{Holder: "acme-worker-2/x", TTL: time.Minute, Members: []*messages.Member{client.Resource("gpu1")}})
	denied("worker 1 reserving under worker 2's name", err)

	// Worker 2 knows the lease id, the holder id and the epoch: none of it lets it act.
	_, err = w2.Release(ctx, "acme-worker/job-1", fence)
	denied("worker 2 releasing worker 1's lease", err)
	_, err = w2.Renew(ctx, "acme-worker/job-1", fence, time.Minute)
	denied("worker 2 renewing worker 1's lease", err)
	_, err = w2.ReleaseValueFenced(ctx, "acme-worker/job-1", "n1/ports", 30001, fence, true)
	denied("worker 2 freeing worker 1's port", err)
	if r, err := w2.ReleaseValue(ctx, "acme-worker-2", "n1/ports", 30001, 0, true); err != nil || r.Code != messages.CodeHolderMismatch {
		t.Fatalf("worker 2 freeing worker 1's port as itself: %v %+v", err, r)
	}
	_, err = w2.ReleaseAll(ctx, "acme-worker/job-1", "owner_uuid=vm-1", 10)
	denied("worker 2 releasing worker 1's leases by label", err)
	_, err = w2.ListLeases(ctx, "acme-worker/job-1", 10)
	denied("worker 2 listing worker 1's leases", err)

	// A header naming worker 1, forged by worker 2, is replaced by its NATS server's.
	forged := nats.NewMsg("holdfast.v1.acme.lease.release")
	forged.Header.Set("Nats-Request-Info", `{"acc":"ACME","user":"acme-worker"}`)
	forged.Data = []byte(fmt.Sprintf(`{"operation_id":"forged","lease_id":%q,"holder_id":"acme-worker/job-1","lease_epoch":%d}`, fence.LeaseID, fence.Epoch))
	if m, err := w2.Conn().RequestMsg(forged, 2*time.Second); err != nil || !strings.Contains(string(m.Data), `"permission_denied"`) {
		t.Fatalf("worker 2 with a forged caller header: %v %s", err, m.Data)
	}

	// Nor does it see who holds them: the lease, its members and state, not its holder.
	got, err := w2.GetLease(ctx, fence.LeaseID)
	if err != nil || got.Lease.GetState() != "active" || got.Lease.GetHolderId() != "" || len(got.Lease.GetMembers()) != 2 {
		t.Fatalf("worker 2 reading worker 1's lease: %v %+v", err, got.Lease)
	}
	look, err := w2.LookupValue(ctx, "n1/ports", 30001)
	if err != nil || look.State != client.ValueHeld || look.Lease.GetHolderId() != "" || look.Lease.GetLeaseId() != fence.LeaseID {
		t.Fatalf("worker 2 looking up worker 1's port: %v %+v", err, look)
	}
	byLabel, err := w2.ListLeasesPage(ctx, client.LeaseQuery{Label: "owner_uuid=vm-1"})
	if err != nil || len(byLabel.Leases) != 1 || byLabel.Leases[0].GetHolderId() != "" {
		t.Fatalf("worker 2 listing by label: %v %+v", err, byLabel)
	}
	if got, err := w1.GetLease(ctx, fence.LeaseID); err != nil || got.Lease.GetHolderId() != "acme-worker/job-1" {
		t.Fatalf("worker 1 reading its own lease: %v %+v", err, got.Lease)
	}
	if got, err := operator.GetLease(ctx, fence.LeaseID); err != nil || got.Lease.GetHolderId() != "acme-worker/job-1" || got.Lease.GetState() != "active" {
		t.Fatalf("the operator reading worker 1's lease, still active: %v %+v", err, got.Lease)
	}

	// The operator acts for any holder; worker 1 frees its own lease.
	if r, err := operator.Reserve(ctx, client.ReserveRequest{Holder: "acme-worker-2", TTL: time.Minute, Members: []*messages.Member{client.Resource("gpu1")}}); err != nil || !r.OK() {
		t.Fatalf("the operator reserving for worker 2: %v %+v", err, r)
	}
	if r, err := w1.Release(ctx, "acme-worker/job-1", fence); err != nil || !r.OK() {
		t.Fatalf("worker 1 releasing its own lease: %v %+v", err, r)
	}

	// Another tenant's users reach nothing of acme's, and in their own tenant hold nothing
	// as acme's users.
	stranger := as("globex-operator", "globex-operator-secret", "acme")
	if _, err := stranger.GetLease(ctx, fence.LeaseID); err == nil {
		t.Fatal("globex read acme's lease")
	}
	globex := as("globex-operator", "globex-operator-secret", "globex")
	if r, err := globex.CreateResource(ctx, "gpu0"); err != nil || !r.OK() {
		t.Fatalf("globex in its own tenant: %v %+v", err, r)
	}
	_, err = globex.Reserve(ctx, client.ReserveRequest{Holder: "acme-worker", TTL: time.Minute, Members: []*messages.Member{client.Resource("gpu0")}})
	denied("globex reserving as acme's worker", err)
	if r, err := globex.Reserve(ctx, client.ReserveRequest{Holder: "globex-operator", TTL: time.Minute, Members: []*messages.Member{client.Resource("gpu0")}}); err != nil || !r.OK() {
		t.Fatalf("globex's user as itself: %v %+v", err, r)
	}
}

// tenantReplaysItsOwnEvents: acme's operator creates its events mirror from
// deploy/tenant-events/acme.json; acme's worker replays it (holdfast watch --from-start)
// and finds every event of acme and none of globex; globex, asking for acme's events in a
// mirror of its own, gets none; and the service's stream refuses deletes and purges.
func tenantReplaysItsOwnEvents(t *testing.T, url string, operator, worker *client.Client) {
	ctx := context.Background()
	raw, err := os.ReadFile("../deploy/tenant-events/acme.json")
	if err != nil {
		t.Fatal(err)
	}
	var mirror jetstream.StreamConfig
	if err := json.Unmarshal(raw, &mirror); err != nil {
		t.Fatal(err)
	}
	ojs, err := jetstream.New(operator.Conn())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ojs.CreateStream(ctx, mirror); err != nil {
		t.Fatalf("acme's operator creating its events mirror: %v", err)
	}
	// More events of both tenants after the mirror exists, too.
	if r, err := operator.CreateResource(ctx, "gpu7"); err != nil || !r.OK() {
		t.Fatalf("create: %v %+v", err, r)
	}
	svc, err := nats.Connect(url, nats.UserInfo("holdfast", "holdfast-secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	sjs, _ := jetstream.New(svc)
	events, err := sjs.Stream(ctx, "HOLDFAST_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	count := func(tenant string) uint64 {
		info, err := events.Info(ctx, jetstream.WithSubjectFilter("holdfast.v1."+tenant+".events.>"))
		if err != nil {
			t.Fatal(err)
		}
		n := uint64(0)
		for _, c := range info.State.Subjects {
			n += c
		}
		return n
	}
	want := count("acme")
	if want < 5 || count("globex") == 0 {
		t.Fatalf("the service's stream: %d events of acme, %d of globex", want, count("globex"))
	}
	// The worker replays from the start of its tenant's stream.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got []client.Event
		w, err := worker.Watch(ctx, client.WatchOptions{FromStart: true})
		if err != nil {
			t.Fatalf("acme's worker replaying its events: %v", err)
		}
	read:
		for {
			select {
			case ev, ok := <-w.Events():
				if !ok {
					break read
				}
				got = append(got, ev)
				if ev.CaughtUp {
					break read
				}
			case <-w.Empty():
				break read
			case <-time.After(3 * time.Second):
				break read
			}
		}
		w.Stop()
		if err := w.Err(); err != nil {
			t.Fatalf("acme's worker replaying its events: %v", err)
		}
		for _, ev := range got {
			if ev.GetTenant() != "acme" || !strings.HasPrefix(ev.Subject, "holdfast.v1.acme.events.") {
				t.Fatalf("acme's replay holds another tenant's event: %s %s", ev.Subject, ev.GetTenant())
			}
		}
		// Events are published after the reply: the service's count may have grown.
		if want = count("acme"); uint64(len(got)) == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("acme's replay: %d events, the service stored %d of acme", len(got), want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Globex cannot mirror acme's events: no import leads to that consumer.
	gl, err := nats.Connect(url, nats.UserInfo("globex-operator", "globex-operator-secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer gl.Close()
	gjs, _ := jetstream.New(gl)
	steal := mirror
	steal.Name = "STOLEN"
	if s, err := gjs.CreateStream(ctx, steal); err == nil {
		time.Sleep(time.Second)
		if info, err := s.Info(ctx); err == nil && info.State.Msgs != 0 {
			t.Fatalf("globex mirrored %d of acme's events", info.State.Msgs)
		}
	}
	// The events stream is an audit trail.
	info, err := events.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Config.DenyDelete || !info.Config.DenyPurge {
		t.Fatalf("HOLDFAST_EVENTS deny_delete %v deny_purge %v", info.Config.DenyDelete, info.Config.DenyPurge)
	}
	if err := events.DeleteMsg(ctx, info.State.FirstSeq); err == nil {
		t.Fatal("a message of HOLDFAST_EVENTS was deleted")
	}
	if err := events.Purge(ctx); err == nil {
		t.Fatal("HOLDFAST_EVENTS was purged")
	}
}
