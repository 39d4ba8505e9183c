package bridge

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/messages"
)

// BenchmarkRead measures a resource.get round trip over NATS (decode, route, shard read,
// encode), JSON and protobuf, with parallel clients.
func BenchmarkRead(b *testing.B) {
	s := startStack(b, startNATS(b), stackOptions{shards: 4})
	s.req("t", "resource.create", `{"operation_id":"c","resource_id":"seat"}`).want(b, "ok")
	pb, _ := proto.Marshal(&messages.GetResourceRequest{ResourceId: "seat"})
	hdr := nats.Header{}
	hdr.Set(messages.HeaderContentType, messages.ContentTypeProtobuf)
	for _, enc := range []struct {
		name string
		msg  *nats.Msg
	}{
		{"json", &nats.Msg{Subject: subject("t", "resource.get"), Data: []byte(`{"resource_id":"seat"}`)}},
		{"protobuf", &nats.Msg{Subject: subject("t", "resource.get"), Data: pb, Header: hdr}},
	} {
		b.Run(enc.name, func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					m := *enc.msg
					if _, err := s.client.RequestMsg(&m, 10*time.Second); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkCreate measures a durable write round trip (journal fsync, event publish in
// the background) with parallel clients; group commit batches them.
func BenchmarkCreate(b *testing.B) {
	s := startStack(b, startNATS(b), stackOptions{shards: 4})
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			body := fmt.Sprintf(`{"operation_id":"c%d","resource_id":"r%d"}`, i, i)
			m, err := s.client.Request(subject("t", "resource.create"), []byte(body), 10*time.Second)
			if err != nil {
				b.Error(err)
				return
			}
			if len(m.Data) == 0 {
				b.Error("empty reply")
				return
			}
		}
	})
}

// BenchmarkReserveRelease64 is the load tool's "spread" cycle in-process: 64 concurrent
// clients, each reserving and releasing its own resource, over TCP to the embedded
// server, with every write fsynced and its event published. One op is one cycle.
func BenchmarkReserveRelease64(b *testing.B) {
	for _, shards := range []uint32{1, 8} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			ns := startNATS(b)
			s := startStack(b, ns, stackOptions{shards: shards, cfg: func(c *Config) { c.Workers = 0 }, noEvents: os.Getenv("NOEV") != "",
				kernel: func(k *kernel.Config) {
					*k = kernel.DefaultConfig()
					k.DedupeWindowSlots, k.HistoryWindowSlots = 100, 100 // 1 s: steady-state tables
				}})
			const clients = 64
			conns := make([]*nats.Conn, 4)
			for i := range conns {
				conns[i] = connect(b, ns)
			}
			for c := 0; c < clients; c++ {
				s.req("t", "resource.create", fmt.Sprintf(`{"operation_id":"c%d","resource_id":"r%d"}`, c, c)).want(b, "ok")
			}
			var n, ops atomic.Int64
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for c := 0; c < clients; c++ {
				wg.Add(1)
				go func(c int) {
					defer wg.Done()
					nc := conns[c%len(conns)]
					for n.Add(1) <= int64(b.N) {
						i := ops.Add(1)
						m, err := nc.Request(subject("t", "lease.reserve"), []byte(fmt.Sprintf(
							`{"operation_id":"r%d","holder_id":"h","members":[{"resource_id":"r%d"}],"ttl_ms":60000}`, i, c)), 10*time.Second)
						if err != nil {
							b.Error(err)
							return
						}
						var rep messages.Reply
						if err := messages.UnmarshalJSON(m.Data, &rep); err != nil || rep.Code != "ok" {
							b.Errorf("reserve: %v %s", err, m.Data)
							return
						}
						_, err = nc.Request(subject("t", "lease.release"), []byte(fmt.Sprintf(
							`{"operation_id":"x%d","holder_id":"h","lease_id":%q,"lease_epoch":1}`, i, rep.Lease.LeaseId)), 10*time.Second)
						if err != nil {
							b.Error(err)
							return
						}
					}
				}(c)
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "cycles/s")
			reportHistogramMeans(b, s.metrics.Registry())
		})
	}
}

// reportHistogramMeans reports the mean of the shards' batch size and append latency.
func reportHistogramMeans(b *testing.B, reg *prometheus.Registry) {
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		var sum float64
		var n uint64
		for _, m := range mf.GetMetric() {
			if h := m.GetHistogram(); h != nil {
				sum += h.GetSampleSum()
				n += h.GetSampleCount()
			}
		}
		switch mf.GetName() {
		case "holdfast_shard_batch_entries":
			if n > 0 {
				b.ReportMetric(sum/float64(n), "entries/batch")
			}
		case "holdfast_shard_append_duration_seconds":
			if n > 0 {
				b.ReportMetric(sum/float64(n)*1e6, "append-µs")
			}
		}
	}
}
