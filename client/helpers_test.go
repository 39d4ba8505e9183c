package client

import (
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// startNATS starts an embedded NATS server on 127.0.0.1 at a random port,
// with JetStream when js is set, and returns a connection to it. Both are
// shut down at cleanup.
func startNATS(t testing.TB, js bool) (*server.Server, *nats.Conn) {
	t.Helper()
	opts := &server.Options{
		Host:      "127.0.0.1",
		Port:      -1,
		NoLog:     true,
		NoSigs:    true,
		JetStream: js,
		StoreDir:  t.TempDir(),
	}
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("nats server: %v", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(s.Shutdown)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return s, nc
}

// fake is a scripted responder: it records every request it gets and asks
// its handler what to answer (respond false: stay silent, as a lost reply).
type fake struct {
	mu      sync.Mutex
	reqs    []*nats.Msg
	handler func(n int, m *nats.Msg) (data []byte, hdr nats.Header, respond bool)
}

func (f *fake) requests() []*nats.Msg {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*nats.Msg(nil), f.reqs...)
}

// serve subscribes the fake on subject (wildcards allowed).
func (f *fake) serve(t testing.TB, nc *nats.Conn, subject string) {
	t.Helper()
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		cp := &nats.Msg{Subject: m.Subject, Data: append([]byte(nil), m.Data...), Header: m.Header}
		f.mu.Lock()
		f.reqs = append(f.reqs, cp)
		n := len(f.reqs)
		f.mu.Unlock()
		data, hdr, respond := f.handler(n, cp)
		if !respond {
			return
		}
		_ = m.RespondMsg(&nats.Msg{Data: data, Header: hdr})
	})
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
}

// always answers every request with the same JSON body.
func always(body string) func(int, *nats.Msg) ([]byte, nats.Header, bool) {
	return func(int, *nats.Msg) ([]byte, nats.Header, bool) { return []byte(body), nil, true }
}
