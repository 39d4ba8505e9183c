package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdSys is Debian's etcd (3.4), one member or three, default durability (raft, fsync
// of the WAL before an answer). A client holds one lease of the TTL, kept alive (an etcd
// session, as etcd's own lock recipe does); an acquire is one transaction putting the key
// under that lease if it does not exist; a release deletes it if its create revision is
// still the one the acquire got (the fence).
type etcdSys struct {
	procs     []*proc
	endpoints []string
}

func (s *etcdSys) Procs() []*proc { return s.procs }

func startEtcd(ctx context.Context, dir string, members int) (Locker, error) {
	ports, err := freePorts(2 * members)
	if err != nil {
		return nil, err
	}
	var cluster []string
	for i := 0; i < members; i++ {
		cluster = append(cluster, fmt.Sprintf("m%d=http://127.0.0.1:%d", i+1, ports[members+i]))
	}
	s := &etcdSys{}
	for i := 0; i < members; i++ {
		client := fmt.Sprintf("http://127.0.0.1:%d", ports[i])
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[members+i])
		p, err := start(dir, fmt.Sprintf("etcd-m%d", i+1), "", "etcd", "--name", fmt.Sprintf("m%d", i+1),
			"--data-dir", filepath.Join(dir, fmt.Sprintf("m%d", i+1)), "--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", strings.Join(cluster, ","),
			"--initial-cluster-state", "new", "--initial-cluster-token", "peers")
		if err != nil {
			s.Close()
			return nil, err
		}
		s.procs = append(s.procs, p)
		s.endpoints = append(s.endpoints, client)
	}
	for i := range s.procs {
		if err := waitPort(ctx, strings.TrimPrefix(s.endpoints[i], "http://"), 30*time.Second); err != nil {
			s.Close()
			return nil, err
		}
	}
	c, err := s.client()
	if err != nil {
		s.Close()
		return nil, err
	}
	defer c.Close()
	for deadline := time.Now().Add(30 * time.Second); ; {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := c.Put(cctx, "ready", "1")
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			s.Close()
			return nil, fmt.Errorf("etcd not answering: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return s, nil
}

func (s *etcdSys) client() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: s.endpoints, DialTimeout: 5 * time.Second})
}

func (s *etcdSys) Close() { stopAll(s.procs) }

func (s *etcdSys) Setup(context.Context, int) error { return nil } // keys need no creating

type etcdClient struct {
	c     *clientv3.Client
	lease clientv3.LeaseID
	stop  context.CancelFunc
}

func (s *etcdSys) Client(ctx context.Context, _ int) (LockClient, error) {
	c, err := s.client()
	if err != nil {
		return nil, err
	}
	g, err := c.Grant(ctx, 30)
	if err != nil {
		c.Close()
		return nil, err
	}
	kctx, stop := context.WithCancel(context.Background())
	ch, err := c.KeepAlive(kctx, g.ID)
	if err != nil {
		stop()
		c.Close()
		return nil, err
	}
	go func() {
		for range ch {
		}
	}()
	return &etcdClient{c: c, lease: g.ID, stop: stop}, nil
}

func (e *etcdClient) Acquire(ctx context.Context, r string, _ time.Duration) (any, bool, error) {
	key := "locks/" + r
	resp, err := e.c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, "held", clientv3.WithLease(e.lease))).Commit()
	if err != nil {
		return nil, false, err
	}
	if !resp.Succeeded {
		return nil, false, nil
	}
	return resp.Header.Revision, true, nil
}

func (e *etcdClient) Release(ctx context.Context, r string, tok any) error {
	key := "locks/" + r
	_, err := e.c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", tok.(int64))).
		Then(clientv3.OpDelete(key)).Commit()
	return err
}

func (e *etcdClient) Close() {
	e.stop()
	_, _ = e.c.Revoke(context.Background(), e.lease)
	e.c.Close()
}
