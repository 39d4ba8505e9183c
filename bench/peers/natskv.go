package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsKVSys is NATS's own key-value store as a lock service, on the nats-server version
// Holdfast embeds (built from this repository's module): one server, or three clustered
// with an R3 bucket, every server with JetStream's `sync_interval: always` as Holdfast's
// cluster runs them. An acquire creates the key with a per-key TTL (refused when it
// exists); a release deletes it only at the revision the acquire created (the fence).
// It is the floor of any lock service journaled in JetStream: one replicated message per
// write, no service in between — what Holdfast's cluster adds to it, it pays for.
type natsKVSys struct {
	procs []*proc
	url   string
	nc    *nats.Conn
}

const natsKVBucket = "LOCKS"

func startNATSKV(ctx context.Context, dir, bin string, servers int) (Locker, error) {
	ports, err := freePorts(2 * servers)
	if err != nil {
		return nil, err
	}
	var urls, routes []string
	for i := 0; i < servers; i++ {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", ports[i]))
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[servers+i]))
	}
	s := &natsKVSys{url: strings.Join(urls, ",")}
	for i := 0; i < servers; i++ {
		conf := fmt.Sprintf("server_name: kv%d\nlisten: %q\njetstream { store_dir: %q, sync_interval: always }\n",
			i+1, strings.TrimPrefix(urls[i], "nats://"), filepath.Join(dir, fmt.Sprintf("kv%d", i+1)))
		if servers > 1 {
			conf += fmt.Sprintf("cluster { name: kv, listen: %q, routes: [%s] }\n",
				strings.TrimPrefix(routes[i], "nats://"), strings.Join(routes, ", "))
		}
		path := filepath.Join(dir, fmt.Sprintf("kv%d.conf", i+1))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			return nil, err
		}
		p, err := start(dir, fmt.Sprintf("nats-kv%d", i+1), "", bin, "-c", path)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.procs = append(s.procs, p)
	}
	for _, u := range urls {
		if err := waitPort(ctx, strings.TrimPrefix(u, "nats://"), 30*time.Second); err != nil {
			s.Close()
			return nil, err
		}
	}
	if s.nc, err = nats.Connect(s.url, nats.MaxReconnects(-1)); err != nil {
		s.Close()
		return nil, err
	}
	js, _ := jetstream.New(s.nc)
	// A cluster's servers elect JetStream's meta leader first: ask until the bucket is made.
	deadline := time.Now().Add(60 * time.Second)
	for {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = js.CreateKeyValue(actx, jetstream.KeyValueConfig{Bucket: natsKVBucket, History: 1,
			Storage: jetstream.FileStorage, Replicas: servers, LimitMarkerTTL: time.Second})
		cancel()
		if err == nil {
			return s, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.Close()
			return nil, fmt.Errorf("creating the bucket: %w", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (s *natsKVSys) Procs() []*proc { return s.procs }

func (s *natsKVSys) Close() {
	if s.nc != nil {
		s.nc.Close()
	}
	stopAll(s.procs)
}

func (s *natsKVSys) Setup(context.Context, int) error { return nil } // keys need no creating

type natsKVClient struct {
	nc *nats.Conn
	kv jetstream.KeyValue
}

func (s *natsKVSys) Client(ctx context.Context, id int) (LockClient, error) {
	nc, err := nats.Connect(s.url, nats.Name(fmt.Sprintf("peers-%d", id)), nats.MaxReconnects(-1))
	if err != nil {
		return nil, err
	}
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(ctx, natsKVBucket)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &natsKVClient{nc: nc, kv: kv}, nil
}

func (c *natsKVClient) Acquire(ctx context.Context, r string, ttl time.Duration) (any, bool, error) {
	rev, err := c.kv.Create(ctx, r, []byte("held"), jetstream.KeyTTL(ttl))
	var apiErr *jetstream.APIError
	if errors.Is(err, jetstream.ErrKeyExists) || (errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)) {
		// Held; or (a create over a deleted key, which is a second, revision-checked
		// write) another client's create landed first.
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return rev, true, nil
}

func (c *natsKVClient) Release(ctx context.Context, r string, tok any) error {
	return c.kv.Delete(ctx, r, jetstream.LastRevision(tok.(uint64)))
}

func (c *natsKVClient) Close() { c.nc.Close() }
