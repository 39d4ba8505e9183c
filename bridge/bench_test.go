package bridge

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

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
