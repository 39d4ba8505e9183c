package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/internal/natstest"
)

// The leader's read means what the KV client's read means: a value at its revision, a
// key never written, and a key whose last message is a delete, a purge or a TTL's expiry.
func TestLeaderGetReadsAsTheKVClient(t *testing.T) {
	js := connectJS(t, natstest.Start(t, 1).URL())
	ctx := context.Background()
	kv, err := OpenBucket(ctx, js, NamesFor("lg"), 1)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := js.KeyValue(ctx, NamesFor("lg").Bucket())
	if err != nil {
		t.Fatal(err)
	}
	rev, _ := kv.Put(ctx, "a", []byte("1"))
	if _, err := kv.Create(ctx, "d", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "p", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "ttl", []byte("x"), jetstream.KeyTTL(time.Second)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // the TTL lapses and its marker is written
	for _, key := range []string{"a", "d", "p", "ttl", "never"} {
		got, gerr := kv.Get(ctx, key)
		want, werr := plain.Get(ctx, key)
		if !errors.Is(gerr, werr) && (gerr == nil || werr == nil || gerr.Error() != werr.Error()) {
			t.Fatalf("%s: leader get error %v, KV client %v", key, gerr, werr)
		}
		if (got == nil) != (want == nil) {
			t.Fatalf("%s: leader entry %v, KV client %v", key, got, want)
		}
		if got != nil && (string(got.Value()) != string(want.Value()) || got.Revision() != want.Revision() || got.Operation() != want.Operation()) {
			t.Fatalf("%s: leader entry %q@%d %v, KV client %q@%d %v", key, got.Value(), got.Revision(), got.Operation(), want.Value(), want.Revision(), want.Operation())
		}
	}
	if e, _ := kv.Get(ctx, "a"); e == nil || e.Revision() != rev {
		t.Fatalf("a: %v, want revision %d", e, rev)
	}
}
