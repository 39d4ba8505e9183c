package cluster

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/internal/natstest"
)

// BenchmarkSnapshotObjectRoundTrip stores a snapshot of SNAPSHOT_MB megabytes (default
// 363: a shard at the default table bounds, full) in the object store and loads it back,
// the part of a failover's load that the cluster adds to the kernel's restore:
//
//	SNAPSHOT_MB=363 go test ./cluster -run '^$' -bench SnapshotObject -benchtime 1x
func BenchmarkSnapshotObjectRoundTrip(b *testing.B) {
	mb := 363
	if v, err := strconv.Atoi(os.Getenv("SNAPSHOT_MB")); err == nil && v > 0 {
		mb = v
	}
	js := connectJS(b, natstest.Start(b, 1).URL())
	ctx := context.Background()
	kv, err := OpenBucket(ctx, js, NamesFor("holdfast"), 1)
	if err != nil {
		b.Fatal(err)
	}
	obs, err := openSnapshots(ctx, js, NamesFor("holdfast"), 1)
	if err != nil {
		b.Fatal(err)
	}
	st := &Storage{JS: js, Names: NamesFor("holdfast"), Shard: 0, Node: "a", Epoch: 1, Objects: obs, Bucket: kv,
		Timeout: 10 * time.Minute}
	payload := bytes.Repeat([]byte("holdfast"), mb<<20/8)
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if err := st.WriteSnapshot(uint64(i+1), 1, payload); err != nil {
			b.Fatal(err)
		}
		wrote := time.Since(start)
		start = time.Now()
		s, ok, err := st.LoadSnapshot()
		if err != nil || !ok || len(s.Payload) != len(payload) {
			b.Fatalf("load: %v %v %d", ok, err, len(s.Payload))
		}
		b.ReportMetric(wrote.Seconds(), "write-s")
		b.ReportMetric(time.Since(start).Seconds(), "load-s")
	}
}

// BenchmarkOwners reads who holds each of 1,024 shards, as every node does every
// balancing round (a quarter of the ownership TTL):
//
//	go test ./cluster -run '^$' -bench Owners
func BenchmarkOwners(b *testing.B) {
	const shards = 1024
	js := connectJS(b, natstest.Start(b, 1).URL())
	ctx := context.Background()
	n, err := Join(ctx, Config{JS: js, Names: NamesFor("holdfast"), Node: "a", Shards: shards, OwnershipTTL: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Abandon()
	for k := uint32(0); k < shards; k += 2 { // half of them claimed
		if _, err := n.kv.Create(ctx, shardKey(k), []byte(`{"node":"a"}`), jetstream.KeyTTL(time.Minute)); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		owners := n.owners(ctx)
		if owners[0] != "a" || owners[1] != "" || owners[shards-2] != "a" {
			b.Fatalf("owners: %v", owners[:4])
		}
	}
}
