package main

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisSys is Debian's Redis with the append-only file fsynced on every write
// (appendonly yes, appendfsync always). An acquire is SET key token NX PX ttl; a release
// deletes the key only if it still holds the token (a Lua compare-and-delete: the
// fence).
type redisSys struct {
	p    *proc
	addr string
}

var releaseScript = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)

func startRedis(ctx context.Context, dir string) (Locker, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	p, err := start(dir, "redis", "", "redis-server", "--bind", "127.0.0.1", "--port", fmt.Sprint(ports[0]), "--dir", dir,
		"--appendonly", "yes", "--appendfsync", "always", "--save", "", "--protected-mode", "no")
	if err != nil {
		return nil, err
	}
	if err := waitPort(ctx, addr, 30*time.Second); err != nil {
		p.stop()
		return nil, err
	}
	return &redisSys{p: p, addr: addr}, nil
}

func (s *redisSys) Procs() []*proc { return []*proc{s.p} }

func (s *redisSys) Close()                           { s.p.stop() }
func (s *redisSys) Setup(context.Context, int) error { return nil }

type redisClient struct {
	c   *redis.Client
	id  int
	seq uint64
}

func (s *redisSys) Client(ctx context.Context, id int) (LockClient, error) {
	c := redis.NewClient(&redis.Options{Addr: s.addr, PoolSize: 1, MinIdleConns: 1})
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, err
	}
	return &redisClient{c: c, id: id}, nil
}

func (r *redisClient) Acquire(ctx context.Context, key string, ttl time.Duration) (any, bool, error) {
	r.seq++
	tok := fmt.Sprintf("%d-%d", r.id, r.seq)
	ok, err := r.c.SetNX(ctx, "locks/"+key, tok, ttl).Result()
	if err != nil || !ok {
		return nil, false, err
	}
	return tok, true, nil
}

func (r *redisClient) Release(ctx context.Context, key string, tok any) error {
	return releaseScript.Run(ctx, r.c, []string{"locks/" + key}, tok.(string)).Err()
}

func (r *redisClient) Close() { r.c.Close() }
