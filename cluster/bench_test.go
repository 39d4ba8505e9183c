package cluster

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/internal/natstest"
	"github.com/holdfast/holdfast/persistence"
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

// BenchmarkReplayAfterSnapshot is a new owner's replay of a journal that holds two
// snapshots' worth of records (the older snapshot's are kept to fall back on): 200,000
// records of 100 bytes in batches of 64, the newest snapshot at the half. The replay
// reads the older half too and passes it over, which is what keeping it costs a load
// (FROM=1 replays all of it, for comparison):
//
//	go test ./cluster -run '^$' -bench ReplayAfterSnapshot -benchtime 5x
func BenchmarkReplayAfterSnapshot(b *testing.B) {
	const total, batch, half = 200_000, 64, 100_000
	js := connectJS(b, natstest.Start(b, 1).URL())
	j, err := OpenJournal(context.Background(), JournalConfig{JS: js, Names: NamesFor("holdfast"), Shard: 0, Node: "a", Epoch: 1})
	if err != nil {
		b.Fatal(err)
	}
	for lsn := uint64(1); lsn <= total; lsn += batch {
		if err := j.Append(records(lsn, min(batch, total+1-lsn), 100)); err != nil {
			b.Fatal(err)
		}
	}
	from := uint64(half + 1)
	if v, err := strconv.ParseUint(os.Getenv("FROM"), 10, 64); err == nil && v > 0 {
		from = v
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		next, err := OpenJournal(context.Background(), JournalConfig{JS: js, Names: NamesFor("holdfast"), Shard: 0, Node: "b", Epoch: uint64(2 + i)})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		if err := next.Replay(from, func(persistence.Record) error { n++; return nil }); err != nil || n != total+1-int(from) {
			b.Fatalf("replayed %d records: %v", n, err)
		}
	}
}

// BenchmarkReplicatedStreams: what spreading the same appends over more R3 streams costs
// on one machine (three NATS servers with sync: always, 64 writers each appending to a
// subject of its own with the subject's expected last sequence, as a shard's journal is
// fenced, and waiting for each acknowledgement). One stream is one raft group for every
// writer, as etcd's one log is; eight are a group per shard, as the journals are today:
//
//	go test ./cluster -run '^$' -bench ReplicatedStreams -benchtime 3000x
func BenchmarkReplicatedStreams(b *testing.B) {
	for _, streams := range []int{1, 3, 8} {
		b.Run(strconv.Itoa(streams), func(b *testing.B) { benchStreams(b, streams, 64) })
	}
}

func benchStreams(b *testing.B, streams, writers int) {
	cl := natstest.Start(b, 3)
	ctx := context.Background()
	jss := make([]jetstream.JetStream, len(cl.Servers))
	for i, s := range cl.Servers {
		jss[i] = connectJS(b, s.ClientURL())
	}
	for s := range streams {
		if _, err := jss[0].CreateStream(ctx, jetstream.StreamConfig{Name: "BENCH_" + strconv.Itoa(s),
			Subjects: []string{"bench." + strconv.Itoa(s) + ".>"}, Replicas: 3, Storage: jetstream.FileStorage}); err != nil {
			b.Fatal(err)
		}
	}
	payload := bytes.Repeat([]byte("x"), 200)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			js := jss[w%len(jss)]
			subject := "bench." + strconv.Itoa(w%streams) + "." + strconv.Itoa(w)
			last := uint64(0)
			for next.Add(1) <= int64(b.N) {
				ack, err := js.Publish(ctx, subject, payload, jetstream.WithExpectLastSequencePerSubject(last))
				if err != nil {
					b.Error(err)
					return
				}
				last = ack.Sequence
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "appends/s")
}
