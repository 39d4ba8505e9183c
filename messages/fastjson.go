package messages

import (
	"encoding/base64"
	"slices"
	"strconv"
	"unicode/utf8"
)

// The reply and event encoders below write the protobuf JSON mapping of Reply and Event
// by hand: protojson walks messages by reflection and costs several microseconds per
// reply, which on a two-core machine is a large share of a request. They follow
// protojson with UseProtoNames exactly — fields in field-number order, zero values and
// nil messages omitted, 64-bit integers as decimal strings, optional fields emitted
// when present — with one deliberate difference that docs/api.md asks for: `shard` is always
// emitted in events, in applied_lsns and in a cluster.status reply's shards, so shard 0
// reads {"shard": 0, ...}.
// TestFastJSONMatchesProtojson checks them against protojson on random messages, and
// TestFastJSONCoversEveryField on messages filled through protoreflect (every field).

// AppendReplyJSON appends the JSON form of m.
func AppendReplyJSON(b []byte, m *Reply) []byte {
	w := jw{b: append(b, '{')}
	w.str("outcome", m.Outcome)
	w.str("code", m.Code)
	w.str("category", m.Category)
	w.u64("lsn", m.Lsn)
	w.boolean("from_retry_cache", m.FromRetryCache)
	w.str("message", m.Message)
	object(&w, "resource", m.Resource, w.resource)
	object(&w, "lease", m.Lease, w.lease)
	object(&w, "pool", m.Pool, w.pool)
	object(&w, "range", m.Range, w.rng)
	w.u64("applied_lsn", m.AppliedLsn)
	list(&w, "leases", m.Leases, w.lease)
	w.boolean("truncated", m.Truncated)
	list(&w, "applied_lsns", m.AppliedLsns, func(s *ShardLsn) {
		w.object(func() {
			w.shard(s.GetShard())
			w.u64("lsn", s.GetLsn())
		})
	})
	w.cluster(m)
	if m.Shard != nil {
		w.shard(m.GetShard())
	}
	object(&w, "run", m.Run, w.run)
	object(&w, "work", m.Work, w.work)
	list(&w, "children", m.Children, w.work)
	if c := m.Capacity; c != nil {
		w.key("capacity")
		w.object(func() {
			w.u64("claimable", c.Claimable)
			w.u64("earliest_deadline_slot", c.EarliestDeadlineSlot)
		})
	}
	w.u64("earliest_deadline_slot", m.EarliestDeadlineSlot)
	w.u64("slot_ms", m.SlotMs)
	w.str("next_cursor", m.NextCursor)
	w.pages(m)
	w.str("value_state", m.ValueState)
	w.u64("count", m.Count)
	w.boolean("more", m.More)
	if m.Item != nil {
		w.key("item")
		w.b = strconv.AppendUint(w.b, uint64(*m.Item), 10)
	}
	w.u64String("value", m.Value)
	return append(w.b, '}')
}

// pages writes the listings' and pages' items.
func (w *jw) pages(m *Reply) {
	list(w, "resources", m.Resources, w.resource)
	list(w, "pools", m.Pools, w.pool)
	list(w, "ranges", m.Ranges, w.rng)
	list(w, "runs", m.Runs, w.run)
	list(w, "works", m.Works, w.work)
	list(w, "allocations", m.Allocations, func(a *Allocation) {
		w.object(func() {
			w.u64("value", a.Value)
			object(w, "lease", a.Lease, w.lease)
		})
	})
	list(w, "excluded", m.Excluded, w.interval)
}

// cluster writes cluster.status's nodes and shards.
func (w *jw) cluster(m *Reply) {
	list(w, "nodes", m.Nodes, func(n *ClusterNode) {
		w.object(func() {
			w.str("node", n.GetNode())
			list(w, "shards", n.GetShards(), func(k uint32) {
				w.b = strconv.AppendUint(w.b, uint64(k), 10)
			})
			w.boolean("lapsing", n.GetLapsing())
			w.u64("renewal_age_ms", n.GetRenewalAgeMs())
			w.boolean("lost", n.GetLost())
			w.u64("lost_ago_ms", n.GetLostAgoMs())
			list(w, "held", n.GetHeld(), func(k uint32) {
				w.b = strconv.AppendUint(w.b, uint64(k), 10)
			})
		})
	})
	list(w, "shards", m.Shards, func(s *ClusterShard) {
		w.object(func() {
			w.shard(s.GetShard())
			w.str("owner", s.GetOwner())
			w.u64("applied_lsn", s.GetAppliedLsn())
		})
	})
}

// AppendEventJSON appends the JSON form of m.
func AppendEventJSON(b []byte, m *Event) []byte {
	w := jw{b: append(b, '{')}
	w.str("event", m.Event)
	w.str("tenant", m.Tenant)
	w.shard(m.Shard)
	w.u64("lsn", m.Lsn)
	w.u64("slot", m.Slot)
	object(&w, "lease", m.Lease, w.lease)
	object(&w, "resource", m.Resource, w.resource)
	object(&w, "pool", m.Pool, w.pool)
	object(&w, "range", m.Range, w.rng)
	object(&w, "run", m.Run, w.run)
	object(&w, "work", m.Work, w.work)
	w.str("reason", m.Reason)
	return append(w.b, '}')
}

// jw writes the fields of JSON objects into b; key puts the comma from b's last byte.
type jw struct {
	b []byte
}

func (w *jw) key(k string) {
	w.comma()
	w.b = append(w.b, '"')
	w.b = append(w.b, k...)
	w.b = append(w.b, '"', ':')
}

// comma separates a field from the one before it in the object being written.
func (w *jw) comma() {
	if len(w.b) > 0 && w.b[len(w.b)-1] != '{' {
		w.b = append(w.b, ',')
	}
}

func (w *jw) str(k, v string) {
	if v == "" {
		return
	}
	w.key(k)
	w.b = appendJSONString(w.b, v)
}

func (w *jw) u64(k string, v uint64) {
	if v == 0 {
		return
	}
	w.key(k)
	w.b = append(w.b, '"')
	w.b = strconv.AppendUint(w.b, v, 10)
	w.b = append(w.b, '"')
}

// shard writes the shard number even when it is 0 (the one field docs/api.md asks to
// be always present), as a JSON number like protojson's uint32.
func (w *jw) shard(v uint32) {
	w.key("shard")
	w.b = strconv.AppendUint(w.b, uint64(v), 10)
}

// list writes k: [ each element ], or nothing for an empty list as protojson omits it.
// object writes k and v by write when v is set.
func object[T any](w *jw, k string, v *T, write func(*T)) {
	if v != nil {
		w.key(k)
		write(v)
	}
}

func list[T any](w *jw, k string, xs []T, each func(T)) {
	if len(xs) == 0 {
		return
	}
	w.key(k)
	w.b = append(w.b, '[')
	for i, x := range xs {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		each(x)
	}
	w.b = append(w.b, ']')
}

func (w *jw) boolean(k string, v bool) {
	if !v {
		return
	}
	w.key(k)
	w.b = append(w.b, "true"...)
}

// bytes writes a bytes field as protojson does: standard base64 with padding.
func (w *jw) bytes(k string, v []byte) {
	if len(v) == 0 {
		return
	}
	w.key(k)
	w.b = append(w.b, '"')
	w.b = base64.StdEncoding.AppendEncode(w.b, v)
	w.b = append(w.b, '"')
}

func (w *jw) run(r *Run) {
	w.object(func() {
		w.str("run_id", r.RunId)
		w.str("status", r.Status)
		w.str("reason", r.Reason)
		w.u64("work", r.Work)
		w.u64("active", r.Active)
		w.u64("claimed", r.Claimed)
		w.u64("done", r.Done)
		w.u64("split", r.Split)
		w.u64("parked", r.Parked)
	})
}

func (w *jw) work(v *Work) {
	w.object(func() {
		w.str("run_id", v.RunId)
		w.str("name", v.Name)
		w.bytes("start", v.Start)
		w.bytes("end", v.End)
		w.bytes("metadata", v.Metadata)
		w.str("status", v.Status)
		w.str("lease_id", v.LeaseId)
		w.u64("lease_epoch", v.LeaseEpoch)
		w.u64("claims", v.Claims)
		if c := v.Cursor; c != nil {
			w.key("cursor")
			w.object(func() {
				w.bytes("last_key", c.LastKey)
				w.bytes("token", c.Token)
			})
		}
		w.str("parent", v.Parent)
		list(w, "children", v.Children, func(c string) {
			w.b = appendJSONString(w.b, c)
		})
		w.str("reason", v.Reason)
	})
}

// u64String writes an optional uint64 as protojson does: a string, present even when 0.
func (w *jw) u64String(k string, v *uint64) {
	if v != nil {
		w.key(k)
		w.b = append(w.b, '"')
		w.b = strconv.AppendUint(w.b, *v, 10)
		w.b = append(w.b, '"')
	}
}

func (w *jw) object(fn func()) {
	w.b = append(w.b, '{')
	fn()
	w.b = append(w.b, '}')
}

func (w *jw) resource(r *Resource) {
	w.object(func() {
		w.str("resource_id", r.ResourceId)
		w.str("state", r.State)
		w.str("current_lease_id", r.CurrentLeaseId)
		w.u64("version", r.Version)
	})
}

func (w *jw) pool(p *Pool) {
	w.object(func() {
		w.str("pool_id", p.PoolId)
		w.u64("capacity", p.Capacity)
		w.u64("reserved", p.Reserved)
		w.u64("active", p.Active)
		w.u64("available", p.Available)
		w.u64("consumed", p.Consumed)
	})
}

func (w *jw) rng(r *Range) {
	w.object(func() {
		w.str("range_id", r.RangeId)
		w.u64("first", r.First)
		w.u64("last", r.Last)
		w.str("strategy", r.Strategy)
		w.u64("allocated", r.Allocated)
		w.u64("free", r.Free)
		w.u64("excluded", r.Excluded)
		object(w, "static_band", r.StaticBand, w.interval)
		w.str("format", r.Format)
	})
}

func (w *jw) interval(iv *Interval) {
	w.object(func() {
		w.u64("first", iv.First)
		w.u64("last", iv.Last)
	})
}

// labels writes a string map as protojson does: keys sorted.
func (w *jw) labels(k string, m map[string]string) {
	if len(m) == 0 {
		return
	}
	keys := make([]string, 0, len(m))
	for key := range m {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	w.key(k)
	w.object(func() {
		for _, key := range keys {
			w.comma()
			w.b = appendJSONString(w.b, key)
			w.b = append(w.b, ':')
			w.b = appendJSONString(w.b, m[key])
		}
	})
}

func (w *jw) lease(l *Lease) {
	w.object(func() {
		w.str("lease_id", l.LeaseId)
		w.str("holder_id", l.HolderId)
		w.str("state", l.State)
		w.u64("lease_epoch", l.LeaseEpoch)
		w.u64("created_lsn", l.CreatedLsn)
		w.u64("deadline_slot", l.DeadlineSlot)
		w.u64("released_lsn", l.ReleasedLsn)
		w.u64("retire_after_slot", l.RetireAfterSlot)
		list(w, "members", l.Members, func(m *Member) {
			w.object(func() {
				w.str("resource_id", m.ResourceId)
				w.str("pool_id", m.PoolId)
				w.u64("quantity", m.Quantity)
				w.str("range_id", m.RangeId)
				w.u64String("value", m.Value)
				if wr := m.Work; wr != nil {
					w.key("work")
					w.object(func() {
						w.str("run_id", wr.RunId)
						w.str("name", wr.Name)
					})
				}
			})
		})
		w.u64("keepalive_slots", l.KeepaliveSlots)
		w.labels("labels", l.Labels)
		w.str("allocated_at", l.AllocatedAt)
	})
}

const hexDigits = "0123456789abcdef"

// appendJSONString quotes s as a JSON string: ", \ and control characters escaped,
// invalid UTF-8 replaced by U+FFFD (protojson would refuse it; replies never carry it).
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c == '\b':
				b = append(b, '\\', 'b')
			case c == '\f':
				b = append(b, '\\', 'f')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, "\ufffd"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
