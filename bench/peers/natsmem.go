package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
)

// natsMemSys is the transport's floor: a lock table in one process's memory, served by
// NATS request/reply through the nats-server Holdfast embeds (built from this
// repository's module, a process of its own), no journal, no events, no TTL. Its
// clients connect as Holdfast's do, one connection each, and each request crosses the
// NATS server twice each way as a Holdfast request does. No NATS-fronted service, durable
// or not, answers more requests per second on this machine than this one does; Holdfast's
// rate over this one is the share of the transport it achieves.
type natsMemSys struct {
	server, responder *proc
	url               string
}

const (
	natsMemAcquire = "peers.mem.acquire"
	natsMemRelease = "peers.mem.release"
)

// natsMemReplySize pads every reply to about the size of a Holdfast reserve's JSON reply,
// so the floor moves the bytes Holdfast moves.
const natsMemReplySize = 240

func startNATSMem(ctx context.Context, dir, bin string) (Locker, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	s := &natsMemSys{url: "nats://" + addr}
	if s.server, err = start(dir, "nats-mem-server", "", bin, "-a", "127.0.0.1", "-p", strconv.Itoa(ports[0])); err != nil {
		return nil, err
	}
	if err := waitPort(ctx, addr, 30*time.Second); err != nil {
		s.Close()
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		s.Close()
		return nil, err
	}
	if s.responder, err = start(dir, "nats-mem-responder", "", self, "--nats-mem-responder", s.url); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.responder.waitLog(ctx, "responding", 30*time.Second); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Procs lists the responder first: Close stops it before the server it is connected to.
func (s *natsMemSys) Procs() []*proc { return []*proc{s.responder, s.server} }

func (s *natsMemSys) Close() { stopAll(s.Procs()) }

func (s *natsMemSys) Setup(context.Context, int) error { return nil }

type natsMemClient struct{ nc *nats.Conn }

func (s *natsMemSys) Client(_ context.Context, id int) (LockClient, error) {
	nc, err := nats.Connect(s.url, nats.Name(fmt.Sprintf("peers-%d", id)), nats.MaxReconnects(-1))
	if err != nil {
		return nil, err
	}
	return &natsMemClient{nc: nc}, nil
}

func (c *natsMemClient) Acquire(ctx context.Context, r string, _ time.Duration) (any, bool, error) {
	m, err := c.nc.RequestWithContext(ctx, natsMemAcquire, []byte(r))
	if err != nil {
		return nil, false, err
	}
	tok, held := strings.CutPrefix(string(m.Data), "ok ")
	if !held {
		return nil, false, nil
	}
	tok, _, _ = strings.Cut(tok, " ")
	return tok, true, nil
}

func (c *natsMemClient) Release(ctx context.Context, r string, tok any) error {
	m, err := c.nc.RequestWithContext(ctx, natsMemRelease, []byte(r+" "+tok.(string)))
	if err != nil {
		return err
	}
	if !strings.HasPrefix(string(m.Data), "ok ") {
		return errors.New("release refused: " + strings.TrimSpace(string(m.Data)))
	}
	return nil
}

func (c *natsMemClient) Close() { c.nc.Close() }

// serveNATSMem is the responder process of nats-mem (this tool run again with
// --nats-mem-responder): it holds the lock table until SIGTERM.
func serveNATSMem(url string) error {
	nc, err := nats.Connect(url, nats.Name("peers-mem-responder"))
	if err != nil {
		return err
	}
	defer nc.Close()
	var (
		mu   sync.Mutex
		held = map[string]uint64{}
		next uint64
	)
	pad := strings.Repeat(" ", natsMemReplySize)
	reply := func(m *nats.Msg, s string) {
		if len(s) < natsMemReplySize {
			s += pad[:natsMemReplySize-len(s)]
		}
		_ = m.Respond([]byte(s))
	}
	if _, err := nc.Subscribe(natsMemAcquire, func(m *nats.Msg) {
		r := string(m.Data)
		mu.Lock()
		_, busy := held[r]
		if !busy {
			next++
			held[r] = next
		}
		tok := next
		mu.Unlock()
		if busy {
			reply(m, "busy")
			return
		}
		reply(m, fmt.Sprintf("ok %d", tok))
	}); err != nil {
		return err
	}
	if _, err := nc.Subscribe(natsMemRelease, func(m *nats.Msg) {
		r, tok, _ := strings.Cut(string(m.Data), " ")
		mu.Lock()
		ok := strconv.FormatUint(held[r], 10) == tok
		if ok {
			delete(held, r)
		}
		mu.Unlock()
		if ok {
			reply(m, "ok released")
			return
		}
		reply(m, "not_held")
	}); err != nil {
		return err
	}
	if err := nc.Flush(); err != nil {
		return err
	}
	fmt.Println("responding")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	return nil
}
