package messages

import (
	"encoding/json"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"
)

func genString(t *rapid.T, label string) string {
	return rapid.OneOf(rapid.Just(""), rapid.StringMatching(`[A-Za-z0-9_:/@+-]{1,12}`),
		rapid.String()).Draw(t, label)
}

func genU64(t *rapid.T, label string) uint64 {
	return rapid.OneOf(rapid.Just(uint64(0)), rapid.Uint64Range(1, 1000), rapid.Uint64()).Draw(t, label)
}

func genLease(t *rapid.T) *Lease {
	l := &Lease{LeaseId: genString(t, "lease_id"), HolderId: genString(t, "holder"), State: genString(t, "state"),
		LeaseEpoch: genU64(t, "epoch"), CreatedLsn: genU64(t, "created"), DeadlineSlot: genU64(t, "deadline"),
		ReleasedLsn: genU64(t, "released"), RetireAfterSlot: genU64(t, "retire"), KeepaliveSlots: genU64(t, "keepalive")}
	for i, n := 0, rapid.IntRange(0, 4).Draw(t, "members"); i < n; i++ {
		m := &Member{ResourceId: genString(t, "res"), PoolId: genString(t, "pool"), Quantity: genU64(t, "qty"),
			RangeId: genString(t, "range")}
		if rapid.Bool().Draw(t, "has_value") {
			v := genU64(t, "value")
			m.Value = &v
		}
		if rapid.Bool().Draw(t, "has_work") {
			m.Work = &WorkRef{RunId: genString(t, "wrun"), Name: genString(t, "wname")}
		}
		l.Members = append(l.Members, m)
	}
	return l
}

func genBytes(t *rapid.T, label string) []byte {
	return rapid.OneOf(rapid.Just([]byte(nil)), rapid.SliceOfN(rapid.Byte(), 1, 20)).Draw(t, label)
}

func genRun(t *rapid.T) *Run {
	return &Run{RunId: genString(t, "run_id"), Status: genString(t, "run_status"), Reason: genString(t, "run_reason"),
		Work: genU64(t, "run_work"), Active: genU64(t, "run_active"), Claimed: genU64(t, "run_claimed"),
		Done: genU64(t, "run_done"), Split: genU64(t, "run_split"), Parked: genU64(t, "run_parked")}
}

func genWork(t *rapid.T) *Work {
	w := &Work{RunId: genString(t, "w_run"), Name: genString(t, "w_name"), Start: genBytes(t, "w_start"),
		End: genBytes(t, "w_end"), Metadata: genBytes(t, "w_meta"), Status: genString(t, "w_status"),
		LeaseId: genString(t, "w_lease"), LeaseEpoch: genU64(t, "w_epoch"), Claims: genU64(t, "w_claims"),
		Parent: genString(t, "w_parent"), Reason: genString(t, "w_reason")}
	if rapid.Bool().Draw(t, "w_cursor") {
		w.Cursor = &Cursor{LastKey: genBytes(t, "w_key"), Token: genBytes(t, "w_token")}
	}
	for i, n := 0, rapid.IntRange(0, 3).Draw(t, "w_children"); i < n; i++ {
		w.Children = append(w.Children, genString(t, "w_child"))
	}
	return w
}

func genReply(t *rapid.T) *Reply {
	r := &Reply{Outcome: genString(t, "outcome"), Code: genString(t, "code"), Category: genString(t, "category"),
		Lsn: genU64(t, "lsn"), FromRetryCache: rapid.Bool().Draw(t, "retry"), Message: genString(t, "message"),
		AppliedLsn: genU64(t, "applied"), Truncated: rapid.Bool().Draw(t, "truncated")}
	if rapid.Bool().Draw(t, "resource") {
		r.Resource = &Resource{ResourceId: genString(t, "rid"), State: genString(t, "rstate"),
			CurrentLeaseId: genString(t, "cur"), Version: genU64(t, "version")}
	}
	if rapid.Bool().Draw(t, "lease") {
		r.Lease = genLease(t)
	}
	if rapid.Bool().Draw(t, "pool") {
		r.Pool = &Pool{PoolId: genString(t, "pid"), Capacity: genU64(t, "cap"), Reserved: genU64(t, "resv"),
			Active: genU64(t, "act"), Available: genU64(t, "avail")}
	}
	if rapid.Bool().Draw(t, "range") {
		r.Range = &Range{RangeId: genString(t, "rgid"), First: genU64(t, "first"), Last: genU64(t, "last"),
			Strategy: genString(t, "strategy"), Allocated: genU64(t, "alloc"), Free: genU64(t, "free")}
	}
	for i, n := 0, rapid.IntRange(0, 3).Draw(t, "leases"); i < n; i++ {
		r.Leases = append(r.Leases, genLease(t))
	}
	for i, n := 0, rapid.IntRange(0, 3).Draw(t, "shards"); i < n; i++ {
		r.AppliedLsns = append(r.AppliedLsns, &ShardLsn{Shard: uint32(i), Lsn: genU64(t, "slsn")})
	}
	for i, n := 0, rapid.IntRange(0, 3).Draw(t, "nodes"); i < n; i++ {
		node := &ClusterNode{Node: genString(t, "node")}
		for j, m := 0, rapid.IntRange(0, 3).Draw(t, "node_shards"); j < m; j++ {
			node.Shards = append(node.Shards, rapid.Uint32().Draw(t, "node_shard"))
		}
		r.Nodes = append(r.Nodes, node)
	}
	for i, n := 0, rapid.IntRange(0, 3).Draw(t, "cluster_shards"); i < n; i++ {
		r.Shards = append(r.Shards, &ClusterShard{Shard: uint32(i), Owner: genString(t, "owner"), AppliedLsn: genU64(t, "clsn")})
	}
	if rapid.Bool().Draw(t, "has_shard") {
		k := rapid.OneOf(rapid.Just(uint32(0)), rapid.Uint32()).Draw(t, "shard")
		r.Shard = &k
	}
	if rapid.Bool().Draw(t, "run") {
		r.Run = genRun(t)
	}
	if rapid.Bool().Draw(t, "work") {
		r.Work = genWork(t)
	}
	for i, n := 0, rapid.IntRange(0, 3).Draw(t, "children"); i < n; i++ {
		r.Children = append(r.Children, genWork(t))
	}
	if rapid.Bool().Draw(t, "capacity") {
		r.Capacity = &Capacity{Claimable: genU64(t, "claimable"), EarliestDeadlineSlot: genU64(t, "cap_earliest")}
	}
	r.EarliestDeadlineSlot = genU64(t, "earliest")
	return r
}

// sameJSON compares two JSON texts as values. protojson omits "shard": 0; the fast
// encoders always emit it, so a zero shard is dropped before comparing.
// A reply's own optional shard (cluster.status) is emitted by both when present.
func sameJSON(t *rapid.T, fast, slow []byte, keepTop bool) {
	var a, b any
	if err := json.Unmarshal(fast, &a); err != nil {
		t.Fatalf("fast encoding is not JSON: %v\n%s", err, fast)
	}
	if err := json.Unmarshal(slow, &b); err != nil {
		t.Fatal(err)
	}
	if top, ok := a.(map[string]any); ok && keepTop {
		for k, v := range top {
			if k != "shard" {
				dropZeroShard(v)
			}
		}
	} else {
		dropZeroShard(a)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("fast and protojson differ:\nfast: %s\nslow: %s", fast, slow)
	}
}

func dropZeroShard(v any) {
	switch x := v.(type) {
	case map[string]any:
		if s, ok := x["shard"].(float64); ok && s == 0 {
			delete(x, "shard")
		}
		for _, e := range x {
			dropZeroShard(e)
		}
	case []any:
		for _, e := range x {
			dropZeroShard(e)
		}
	}
}

func TestFastJSONMatchesProtojson(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := genReply(t)
		fast := AppendReplyJSON(nil, r)
		slow, err := jsonMarshal.Marshal(r)
		if err != nil {
			t.Skip("protojson refuses it (invalid UTF-8)")
		}
		sameJSON(t, fast, slow, true)
		var back Reply
		if err := UnmarshalJSON(fast, &back); err != nil {
			t.Fatalf("strict decode of the fast encoding: %v\n%s", err, fast)
		}
		if !proto.Equal(&back, r) {
			t.Fatalf("round trip differs:\n%v\n%v", &back, r)
		}

		e := &Event{Event: genString(t, "event"), Tenant: genString(t, "tenant"), Shard: rapid.Uint32().Draw(t, "shard"),
			Lsn: genU64(t, "elsn"), Slot: genU64(t, "slot"), Lease: r.Lease, Resource: r.Resource, Pool: r.Pool, Range: r.Range,
			Run: r.Run, Work: r.Work}
		fast = AppendEventJSON(nil, e)
		slow, _ = jsonMarshal.Marshal(e)
		sameJSON(t, fast, slow, false)
	})
}

func TestFastJSONShardZero(t *testing.T) {
	got := string(AppendEventJSON(nil, &Event{Event: "lease.reserved", Tenant: "t", Lsn: 17}))
	if want := `{"event":"lease.reserved","tenant":"t","shard":0,"lsn":"17"}`; got != want {
		t.Fatalf("got %s want %s", got, want)
	}
	got = string(AppendReplyJSON(nil, &Reply{Outcome: "committed", Code: "ok", AppliedLsns: []*ShardLsn{{Shard: 0, Lsn: 17}}}))
	if want := `{"outcome":"committed","code":"ok","applied_lsns":[{"shard":0,"lsn":"17"}]}`; got != want {
		t.Fatalf("got %s want %s", got, want)
	}
}

func BenchmarkReplyJSON(b *testing.B) {
	v := uint64(7)
	r := &Reply{Outcome: "committed", Code: "ok", Lsn: 1042, Lease: &Lease{LeaseId: "3-1042", HolderId: "worker-7",
		State: "reserved", LeaseEpoch: 1, CreatedLsn: 1042, DeadlineSlot: 17632000000,
		Members: []*Member{{ResourceId: "node14/gpu0"}, {RangeId: "node14/vx", Value: &v}}}}
	b.Run("fast", func(b *testing.B) {
		var buf []byte
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			buf = AppendReplyJSON(buf[:0], r)
		}
	})
	b.Run("protojson", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := jsonMarshal.Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
