// Package natstest starts NATS servers with JetStream for tests, in the test's process:
// one server, or a JetStream cluster of three on loopback, as nats-server's own tests do.
// Every server runs with sync: always, the configuration Holdfast's durability claims
// are made for (docs/cluster.md).
package natstest

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Cluster is a set of running NATS servers.
type Cluster struct {
	t       testing.TB
	Servers []*natsserver.Server
	opts    []*natsserver.Options
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Start runs n servers (1, or 3 for a JetStream cluster) and stops them when the test ends;
// each option adjusts every server's options (a JetStream limit, say). The route ports
// were free a moment before the servers listen on them: a server that does not come up
// (another test process took its port meanwhile) makes the cluster start again, on other
// ports, up to three times.
func Start(t testing.TB, n int, options ...func(*natsserver.Options)) *Cluster {
	t.Helper()
	var c *Cluster
	startAgain(t, func() (err error) {
		c, err = start(t, n, options)
		return err
	})
	t.Cleanup(c.Shutdown)
	c.WaitForJetStream()
	return c
}

// startAgain runs attempt until it starts the servers, three times at most: route ports
// are chosen a moment before the servers listen on them, and another test process may
// take one meanwhile.
func startAgain(t testing.TB, attempt func() error) {
	t.Helper()
	for n := 1; ; n++ {
		err := attempt()
		if err == nil {
			return
		}
		if n == 3 {
			t.Fatal(err)
		}
		t.Logf("%v; starting the servers again on other ports", err)
	}
}

// start is one attempt of Start: the servers, or an error with none left running.
func start(t testing.TB, n int, options []func(*natsserver.Options)) (*Cluster, error) {
	dir := t.TempDir()
	c := &Cluster{t: t}
	routes := make([]int, n)
	for i := range routes {
		routes[i] = freePort(t)
	}
	for i := 0; i < n; i++ {
		o := &natsserver.Options{
			ServerName: fmt.Sprintf("n%d", i),
			Host:       "127.0.0.1",
			Port:       -1,
			JetStream:  true,
			StoreDir:   filepath.Join(dir, fmt.Sprintf("n%d", i)),
			SyncAlways: true,
			NoSigs:     true,
			NoLog:      true,
		}
		if n > 1 {
			o.Cluster = natsserver.ClusterOpts{Name: "holdfast-test", Host: "127.0.0.1", Port: routes[i]}
			for _, p := range routes {
				o.Routes = append(o.Routes, natsserver.RoutesFromStr(fmt.Sprintf("nats://127.0.0.1:%d", p))...)
			}
		}
		for _, f := range options {
			f(o)
		}
		ns, err := c.run(o)
		if err != nil {
			c.Shutdown()
			return nil, err
		}
		o.Port = ns.Addr().(*net.TCPAddr).Port // a restart comes back on the same port
		c.opts = append(c.opts, o)
		c.Servers = append(c.Servers, ns)
	}
	return c, nil
}

func (c *Cluster) run(o *natsserver.Options) (*natsserver.Server, error) {
	ns, err := natsserver.NewServer(o)
	if err != nil {
		return nil, err
	}
	fatal := &fatalLog{}
	if !o.NoLog {
		ns.ConfigureLogger() // an embedded server logs only when asked (LogFile, Debug)
	} else {
		ns.SetLogger(fatal, false, false)
	}
	go ns.Start()
	for deadline := time.Now().Add(30 * time.Second); !ns.ReadyForConnections(50 * time.Millisecond); {
		// A listener that cannot bind (a route port taken) is only logged, and the server
		// then never becomes ready: seen in the log, it is an error at once.
		if msg := fatal.msg.Load(); msg != nil {
			ns.Shutdown()
			return nil, fmt.Errorf("NATS server %s: %s", o.ServerName, *msg)
		}
		if time.Now().After(deadline) {
			ns.Shutdown()
			return nil, fmt.Errorf("NATS server %s not ready", o.ServerName)
		}
	}
	return ns, nil
}

// fatalLog is the logger of a server that logs nothing: it keeps the first fatal error.
type fatalLog struct{ msg atomic.Pointer[string] }

func (f *fatalLog) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	f.msg.CompareAndSwap(nil, &msg)
}
func (*fatalLog) Noticef(string, ...any) {}
func (*fatalLog) Warnf(string, ...any)   {}
func (*fatalLog) Errorf(string, ...any)  {}
func (*fatalLog) Debugf(string, ...any)  {}
func (*fatalLog) Tracef(string, ...any)  {}

// WaitForJetStream waits until the JetStream meta group has a leader and every server
// is current with it (a cluster), or JetStream is enabled (one server).
func (c *Cluster) WaitForJetStream() {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		leader, current := false, 0
		for _, s := range c.Servers {
			if s == nil || !s.Running() || !s.JetStreamEnabled() {
				continue
			}
			if len(c.Servers) == 1 {
				return
			}
			if s.JetStreamIsLeader() && len(s.JetStreamClusterPeers()) == len(c.Servers) {
				leader = true // the leader sees every peer online with JetStream
			}
			if s.JetStreamIsCurrent() {
				current++
			}
		}
		// Every server caught up with the meta group, and the leader seeing all of them:
		// a replicated asset can be placed at once.
		if leader && current == len(c.Servers) {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	c.t.Fatal("JetStream did not become ready")
}

// URL is a client URL naming every server (also one that is stopped: clients reconnect
// to it when it is back).
func (c *Cluster) URL() string {
	var urls []string
	for _, o := range c.opts {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", o.Port))
	}
	return strings.Join(urls, ",")
}

// ServerURL is server i's client URL alone (a client on that server's side of a cut).
func (c *Cluster) ServerURL(i int) string { return fmt.Sprintf("nats://127.0.0.1:%d", c.opts[i].Port) }

// Stop shuts server i down (a lost machine); Restart brings it back with its store.
func (c *Cluster) Stop(i int) {
	if s := c.Servers[i]; s != nil {
		s.Shutdown()
		s.WaitForShutdown()
	}
}

// Restart starts server i again on the same store and ports.
func (c *Cluster) Restart(i int) {
	c.Stop(i)
	ns, err := c.run(c.opts[i].Clone())
	if err != nil {
		c.t.Fatal(err)
	}
	c.Servers[i] = ns
}

// Shutdown stops every server.
func (c *Cluster) Shutdown() {
	for i := range c.Servers {
		c.Stop(i)
	}
}

// Connect is a client connection to the servers at url with its JetStream context, both
// closed with the test.
func Connect(t testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}
