package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

// natsLog sends the embedded server's log lines to slog (its notices at debug level).
type natsLog struct{ l *slog.Logger }

func (n natsLog) Noticef(f string, v ...any) { n.l.Debug(fmt.Sprintf(f, v...)) }
func (n natsLog) Warnf(f string, v ...any)   { n.l.Warn(fmt.Sprintf(f, v...)) }
func (n natsLog) Fatalf(f string, v ...any)  { n.l.Error(fmt.Sprintf(f, v...)) }
func (n natsLog) Errorf(f string, v ...any) {
	msg := fmt.Sprintf(f, v...)
	if strings.HasPrefix(msg, "Error trying to connect to route") {
		n.l.Debug(msg) // a peer not up yet (or gone): the routes retry, cluster status shows it
		return
	}
	n.l.Error(msg)
}
func (n natsLog) Debugf(f string, v ...any) { n.l.Debug(fmt.Sprintf(f, v...)) }
func (n natsLog) Tracef(f string, v ...any) { n.l.Debug(fmt.Sprintf(f, v...)) }

// EmbeddedCluster clusters the embedded NATS server, with nats-server's own terms: Listen
// is this node's route listener (--cluster nats://HOST:PORT), Routes the other nodes'
// (--routes), Name the cluster's (--cluster_name).
type EmbeddedCluster struct {
	Listen string
	Routes []string
	Name   string
}

// Check reports a malformed listener or route, or routes or a name without a listener.
func (c EmbeddedCluster) Check() error {
	var o natsserver.Options
	return c.apply(&o, "check")
}

// Enabled reports whether the embedded server joins a cluster.
func (c EmbeddedCluster) Enabled() bool { return c.Listen != "" }

// parseRouteURL reads nats://HOST:PORT (the scheme optional) as host and port.
func parseRouteURL(flag, s string) (*url.URL, string, int, error) {
	if !strings.Contains(s, "://") {
		s = "nats://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return nil, "", 0, fmt.Errorf("%s %q: want nats://HOST:PORT", flag, s)
	}
	host, portStr, err := net.SplitHostPort(u.Host)
	port, perr := strconv.Atoi(portStr)
	if err != nil || perr != nil || port < 0 || port > 65535 {
		return nil, "", 0, fmt.Errorf("%s %q: want nats://HOST:PORT", flag, s)
	}
	return u, host, port, nil
}

// clusterOptions applies c to the embedded server's options: a route listener, the
// routes to the other nodes, the cluster's name, and this node's name as the server's
// (JetStream tells its servers apart by name).
func (c EmbeddedCluster) apply(o *natsserver.Options, node string) error {
	if !c.Enabled() {
		if len(c.Routes) > 0 || c.Name != "" {
			return errors.New("--routes and --cluster_name need --cluster (this node's route listener)")
		}
		return nil
	}
	_, host, port, err := parseRouteURL("--cluster", c.Listen)
	if err != nil {
		return err
	}
	name := c.Name
	if name == "" {
		name = "holdfast"
	}
	o.Cluster = natsserver.ClusterOpts{Name: name, Host: host, Port: port}
	for _, r := range c.Routes {
		u, _, _, err := parseRouteURL("--routes", r)
		if err != nil {
			return err
		}
		o.Routes = append(o.Routes, u)
	}
	o.ServerName = node
	return nil
}

// startEmbeddedNATS runs the in-process NATS server with JetStream stored under data,
// listening on listen, clustered with other nodes when cl says so. It returns the server
// and the URL clients should use.
func startEmbeddedNATS(listen, data, node string, cl EmbeddedCluster, log *slog.Logger) (*natsserver.Server, string, error) {
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, "", fmt.Errorf("--listen %q: %w", listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, "", fmt.Errorf("--listen %q: bad port", listen)
	}
	// Fail fast and clearly when the address is taken (the server would only log it).
	probe, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, "", fmt.Errorf("--listen %s: %w", listen, err)
	}
	probe.Close()
	if port == 0 {
		port = natsserver.RANDOM_PORT
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		log.Warn("the embedded NATS server listens beyond this machine without authentication: anyone who can reach it can read events and revoke leases; listen on 127.0.0.1, or run a NATS deployment with accounts and use --nats",
			"listen", listen)
	}
	store := filepath.Join(data, "nats")
	opts := &natsserver.Options{
		ServerName: "holdfast",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   store,
		NoSigs:     true,
		// An acknowledged write is fsynced (docs/api.md §4): JetStream's own default
		// syncs every two minutes, which a replicated journal must not rely on.
		SyncAlways: cl.Enabled(),
		// A clustered server stops in lame duck mode (stopEmbeddedNATS): it hands its
		// raft leaderships (the cluster bucket's, the events stream's, journals') over
		// first, then closes its clients over these two seconds.
		LameDuckDuration:    2 * time.Second,
		LameDuckGracePeriod: 500 * time.Millisecond,
	}
	if err := cl.apply(opts, node); err != nil {
		return nil, "", err
	}
	ns, err := natsserver.NewServer(opts)
	if err != nil {
		return nil, "", fmt.Errorf("embedded NATS: %w", err)
	}
	ns.SetLoggerV2(natsLog{l: log}, log.Enabled(context.Background(), slog.LevelDebug), false, false)
	go ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		ns.Shutdown()
		return nil, "", fmt.Errorf("embedded NATS did not become ready on %s (store %s)", listen, store)
	}
	addr, ok := ns.Addr().(*net.TCPAddr)
	if !ok {
		ns.Shutdown()
		return nil, "", errors.New("embedded NATS: no client listener")
	}
	adv := host
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		adv = "127.0.0.1"
	}
	return ns, "nats://" + net.JoinHostPort(adv, strconv.Itoa(addr.Port)), nil
}

// stopEmbeddedNATS stops the embedded server. A clustered one goes through lame duck
// mode, which transfers the raft leaderships it holds before it stops: a plain shutdown
// leaves every stream it led without a leader until the others elect one (4–9 s with
// nats-server's raft timers), and a cluster bucket without a leader for longer than
// three quarters of the ownership TTL makes every other node give its shards up.
func stopEmbeddedNATS(ns *natsserver.Server, clustered bool) {
	if clustered {
		ns.LameDuckShutdown()
	} else {
		ns.Shutdown()
	}
	ns.WaitForShutdown()
}
