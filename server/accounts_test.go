package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

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
	defer ns.Shutdown()

	k := kernel.DefaultConfig()
	k.SlotMillis = 10
	srv, err := Start(context.Background(), Config{Data: filepath.Join(dir, "data"), Shards: 2, Slot: 10 * time.Millisecond,
		Kernel: k, NATSURL: ns.ClientURL(), NATSOptions: []nats.Option{nats.UserInfo("holdfast", "holdfast-secret")}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Shutdown(context.Background()) }()

	as := func(user, password, tenant string) *client.Client {
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
}
