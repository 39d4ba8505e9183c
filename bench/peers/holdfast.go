package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/messages"
)

var holdfastProtobuf = flag.Bool("holdfast-protobuf", false, "Holdfast's client sends protobuf (default: JSON, the client's default)")

// holdfastSys is `holdfast serve` with its defaults: one process (file journal, fsync
// per batch), or three with their embedded NATS servers clustered as the README's three
// commands are (--replicas 3, --raft-timing faster, JetStream sync always: so the
// journals are the events stream's subjects, --journal-layout auto).
type holdfastSys struct {
	procs []*proc
	url   string
}

func startHoldfast(ctx context.Context, dir, bin string, nodes int, extra []string) (Locker, error) {
	ports, err := freePorts(2 * nodes)
	if err != nil {
		return nil, err
	}
	s := &holdfastSys{}
	var urls, routes []string
	for i := 0; i < nodes; i++ {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", ports[i]))
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[nodes+i]))
	}
	for i := 0; i < nodes; i++ {
		args := []string{"serve", "--data", filepath.Join(dir, fmt.Sprintf("n%d", i+1)), "--listen", strings.TrimPrefix(urls[i], "nats://"),
			"--metrics-listen", ""}
		if nodes > 1 {
			args = append(args, "--node", fmt.Sprintf("n%d", i+1), "--cluster", routes[i], "--routes", strings.Join(routes, ","),
				"--replicas", "3", "--raft-timing", "faster")
		}
		args = append(args, extra...)
		p, err := start(dir, fmt.Sprintf("holdfast-n%d", i+1), "", bin, args...)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.procs = append(s.procs, p)
	}
	for _, p := range s.procs {
		if err := p.waitLog(ctx, "msg=ready", 60*time.Second); err != nil {
			s.Close()
			return nil, err
		}
	}
	s.url = strings.Join(urls, ",")
	if nodes > 1 {
		time.Sleep(5 * time.Second) // the shards settle on their owners
	}
	return s, nil
}

func (s *holdfastSys) Procs() []*proc { return s.procs }

func (s *holdfastSys) Close() { stopAll(s.procs) }

func (s *holdfastSys) connect(name string) (*client.Client, *nats.Conn, error) {
	nc, err := nats.Connect(s.url, nats.Name(name), nats.MaxReconnects(-1))
	if err != nil {
		return nil, nil, err
	}
	enc := client.JSON
	if *holdfastProtobuf {
		enc = client.Protobuf
	}
	c, err := client.New(nc, client.WithEncoding(enc))
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return c, nc, nil
}

func (s *holdfastSys) Setup(ctx context.Context, resources int) error {
	c, nc, err := s.connect("peers-setup")
	if err != nil {
		return err
	}
	defer nc.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < resources; i += 32 {
				r, err := c.CreateResource(ctx, fmt.Sprintf("r%d", i))
				if err == nil && r.Code != messages.CodeOK && r.Code != messages.CodeAlreadyExists {
					err = r.Err()
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

type holdfastClient struct {
	c      *client.Client
	nc     *nats.Conn
	holder string
}

func (s *holdfastSys) Client(_ context.Context, id int) (LockClient, error) {
	c, nc, err := s.connect(fmt.Sprintf("peers-%d", id))
	if err != nil {
		return nil, err
	}
	return &holdfastClient{c: c, nc: nc, holder: fmt.Sprintf("h%d", id)}, nil
}

func (h *holdfastClient) Acquire(ctx context.Context, r string, ttl time.Duration) (any, bool, error) {
	res, err := h.c.Reserve(ctx, client.ReserveRequest{Holder: h.holder, TTL: ttl, Members: []*messages.Member{client.Resource(r)}})
	if err != nil {
		return nil, false, err
	}
	switch res.Code {
	case messages.CodeOK:
		return res.Fence(), true, nil
	case messages.CodeResourceBusy:
		return nil, false, nil
	}
	return nil, false, res.Err()
}

func (h *holdfastClient) Release(ctx context.Context, _ string, tok any) error {
	res, err := h.c.Release(ctx, h.holder, tok.(client.Fence))
	if err != nil {
		return err
	}
	return res.Err()
}

func (h *holdfastClient) Close() { h.nc.Close() }
