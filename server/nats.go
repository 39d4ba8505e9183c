package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
)

// natsLog sends the embedded server's log lines to slog (its notices at debug level).
type natsLog struct{ l *slog.Logger }

func (n natsLog) Noticef(f string, v ...any) { n.l.Debug(fmt.Sprintf(f, v...)) }
func (n natsLog) Warnf(f string, v ...any)   { n.l.Warn(fmt.Sprintf(f, v...)) }
func (n natsLog) Fatalf(f string, v ...any)  { n.l.Error(fmt.Sprintf(f, v...)) }
func (n natsLog) Errorf(f string, v ...any)  { n.l.Error(fmt.Sprintf(f, v...)) }
func (n natsLog) Debugf(f string, v ...any)  { n.l.Debug(fmt.Sprintf(f, v...)) }
func (n natsLog) Tracef(f string, v ...any)  { n.l.Debug(fmt.Sprintf(f, v...)) }

// startEmbeddedNATS runs the in-process NATS server with JetStream stored under data,
// listening on listen. It returns the server and the URL clients should use.
func startEmbeddedNATS(listen, data string, log *slog.Logger) (*natsserver.Server, string, error) {
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
	ns, err := natsserver.NewServer(&natsserver.Options{
		ServerName: "holdfast",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   store,
		NoSigs:     true,
	})
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
