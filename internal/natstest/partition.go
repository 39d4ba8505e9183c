package natstest

import (
	"fmt"
	"net"
	"sync"
	"testing"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

// Net is the network between a cluster's servers, made of one TCP proxy per ordered pair
// of servers: server i reaches server j's route port only through proxy (i, j). It cuts
// links — both ways, or one way only — and heals them, as a partition would (Jepsen's
// nemeses: a node isolated, a bridge, a one-way link, a flapping one). A cut link closes
// the route connections it carries and refuses new ones; a one-way cut stalls the bytes
// going that way (the sender's writes back up until its write deadline ends the route,
// which the other side cannot reopen). Servers advertise an unreachable route address, so
// gossip cannot route around a cut.
type Net struct {
	t testing.TB
	// links[i][j] carries the route connections server i opened to server j.
	links [][]*link
}

// link is one proxy: from server i to server j.
type link struct {
	ln       net.Listener
	to       string // server j's route address
	cut      bool   // refuse connections and carry nothing
	stall    [2]bool
	conns    map[*proxied]struct{}
	mu       sync.Mutex
	released chan struct{} // closed to let stalled copies go on (after a heal)
}

// proxied is one route connection through a link: dir 0 is i→j (the opener's bytes),
// dir 1 is j→i.
type proxied struct{ a, b net.Conn }

// StartPartitionable runs a JetStream cluster of n servers whose routes go through a Net.
// Like Start, it starts again on other route ports, up to three times, when a server does
// not come up (another test process took a port between its choice and the listen).
func StartPartitionable(t testing.TB, n int, options ...func(*natsserver.Options)) (*Cluster, *Net) {
	t.Helper()
	var c *Cluster
	var nw *Net
	startAgain(t, func() (err error) {
		c, nw, err = startPartitionable(t, n, options)
		return err
	})
	t.Cleanup(nw.close)
	t.Cleanup(c.Shutdown)
	c.WaitForJetStream()
	return c, nw
}

// startPartitionable is one attempt of StartPartitionable: the servers and their Net,
// or an error with neither left running.
func startPartitionable(t testing.TB, n int, options []func(*natsserver.Options)) (*Cluster, *Net, error) {
	nw := &Net{t: t}
	routes := make([]int, n)
	for i := range routes {
		routes[i] = freePort(t)
	}
	nw.links = make([][]*link, n)
	for i := range n {
		nw.links[i] = make([]*link, n)
		for j := range n {
			if i == j {
				continue
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				nw.close()
				return nil, nil, err
			}
			l := &link{ln: ln, to: fmt.Sprintf("127.0.0.1:%d", routes[j]), conns: map[*proxied]struct{}{}, released: make(chan struct{})}
			nw.links[i][j] = l
			go l.serve()
		}
	}
	server := 0
	opts := append([]func(*natsserver.Options){func(o *natsserver.Options) {
		i := server
		server++
		o.Cluster.Port = routes[i]
		o.Cluster.Advertise = "127.0.0.1:1" // gossip must not route around a cut
		o.Routes = nil
		for j := range n {
			if j != i {
				o.Routes = append(o.Routes, natsserver.RoutesFromStr("nats://"+nw.links[i][j].ln.Addr().String())...)
			}
		}
	}}, options...)
	c, err := start(t, n, opts)
	if err != nil {
		nw.close()
		return nil, nil, err
	}
	return c, nw, nil
}

func (l *link) serve() {
	for {
		a, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.mu.Lock()
		cut := l.cut
		l.mu.Unlock()
		if cut {
			a.Close()
			continue
		}
		b, err := net.Dial("tcp", l.to)
		if err != nil {
			a.Close()
			continue
		}
		p := &proxied{a: a, b: b}
		l.mu.Lock()
		l.conns[p] = struct{}{}
		l.mu.Unlock()
		go l.copy(p, b, a, 0)
		go l.copy(p, a, b, 1)
	}
}

// copy carries one direction of p, holding while that direction is stalled.
func (l *link) copy(p *proxied, dst, src net.Conn, dir int) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			for {
				l.mu.Lock()
				stalled, released := l.stall[dir], l.released
				l.mu.Unlock()
				if !stalled {
					break
				}
				<-released
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil { // either end gone (io.EOF among them): the route connection ends
			l.drop(p)
			return
		}
	}
}

func (l *link) drop(p *proxied) {
	p.a.Close()
	p.b.Close()
	l.mu.Lock()
	delete(l.conns, p)
	l.mu.Unlock()
}

// set cuts or heals the link and stalls or releases each direction; it closes the
// connections a cut or a healed stall leaves in a state no network would.
func (l *link) set(cut bool, stall [2]bool) {
	l.mu.Lock()
	wasStalled := l.stall[0] || l.stall[1]
	l.cut, l.stall = cut, stall
	var closing []*proxied
	if cut || (wasStalled && !stall[0] && !stall[1]) {
		for p := range l.conns {
			closing = append(closing, p)
		}
	}
	if !stall[0] && !stall[1] {
		close(l.released)
		l.released = make(chan struct{})
	}
	l.mu.Unlock()
	for _, p := range closing {
		l.drop(p)
	}
}

// Cut cuts the link between servers i and j both ways.
func (nw *Net) Cut(i, j int) {
	nw.links[i][j].set(true, [2]bool{})
	nw.links[j][i].set(true, [2]bool{})
}

// Isolate cuts server i from every other server.
func (nw *Net) Isolate(i int) {
	for j := range nw.links {
		if j != i {
			nw.Cut(i, j)
		}
	}
}

// CutOneWay stalls the bytes server from sends to server to; the other way flows.
func (nw *Net) CutOneWay(from, to int) {
	nw.links[from][to].set(false, [2]bool{true, false}) // routes from opened: its own bytes
	nw.links[to][from].set(false, [2]bool{false, true}) // routes to opened: the answers
}

// Heal restores every link.
func (nw *Net) Heal() {
	for i := range nw.links {
		for j, l := range nw.links[i] {
			if l != nil && i != j {
				l.set(false, [2]bool{})
			}
		}
	}
}

func (nw *Net) close() {
	nw.Heal()
	for i := range nw.links {
		for _, l := range nw.links[i] {
			if l != nil {
				l.ln.Close()
				l.set(true, [2]bool{})
			}
		}
	}
}
