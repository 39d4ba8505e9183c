package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/messages"
)

// A request NATS refuses for the connection's permissions fails at once, definite,
// naming the subject and the permission — not "outcome unknown" after the timeout and
// the retries; one it allows is served as ever.
func TestPermissionRefusalFailsAtOnce(t *testing.T) {
	opts := &server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		Users: []*server.User{
			{Username: "svc", Password: "pw"},
			{Username: "acme", Password: "pw", Permissions: &server.Permissions{
				Publish:   &server.SubjectPermission{Allow: []string{"holdfast.v1.acme.>"}},
				Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>"}},
			}},
			{Username: "noinbox", Password: "pw", Permissions: &server.Permissions{
				Publish:   &server.SubjectPermission{Allow: []string{"holdfast.v1.acme.>"}},
				Subscribe: &server.SubjectPermission{Allow: []string{"nothing.>"}},
			}},
		}}
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(s.Shutdown)
	conn := func(user string) *nats.Conn {
		nc, err := nats.Connect(s.ClientURL(), nats.UserInfo(user, "pw"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	// The service's side: a responder for tenant acme's lease.get.
	svc := conn("svc")
	if _, err := svc.Subscribe("holdfast.v1.*.lease.get", func(m *nats.Msg) {
		_ = m.Respond([]byte(`{"outcome":"committed","code":"lease_not_found","applied_lsn":"3"}`))
	}); err != nil {
		t.Fatal(err)
	}
	if err := svc.Flush(); err != nil {
		t.Fatal(err)
	}

	nc := conn("acme")
	for _, tc := range []struct {
		tenant string
		denied bool
	}{{"acme", false}, {"other", true}, {"acme", false}} {
		c, err := New(nc, WithTenant(tc.tenant), WithTimeout(3*time.Second), WithRetry(3, 100*time.Millisecond, time.Second))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		res, err := c.GetLease(context.Background(), "0-1")
		took := time.Since(start)
		if !tc.denied {
			if err != nil || res.Code != messages.CodeLeaseNotFound {
				t.Fatalf("tenant %s: %v %+v", tc.tenant, err, res)
			}
			continue
		}
		var de *DefiniteError
		if !errors.As(err, &de) || de.Code != CodePermissionDenied {
			t.Fatalf("tenant %s: %v, want a definite %s", tc.tenant, err, CodePermissionDenied)
		}
		subject := contract.VerbGetLease.Subject("holdfast", "other")
		if !strings.Contains(err.Error(), subject) || !strings.Contains(err.Error(), "permissions violation") {
			t.Fatalf("the error names neither the subject %s nor the permission: %v", subject, err)
		}
		if took > 2*time.Second {
			t.Fatalf("refused after %v: it waited for the timeout", took)
		}
	}

	// A connection that may not subscribe to its reply inbox fails its requests at once too.
	c, err := New(conn("noinbox"), WithTenant("acme"), WithTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.GetLease(context.Background(), "0-1")
	var de *DefiniteError
	if !errors.As(err, &de) || de.Code != CodePermissionDenied || !strings.Contains(err.Error(), "subscribe") {
		t.Fatalf("no inbox: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("refused after %v", took)
	}
}
