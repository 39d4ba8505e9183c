package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/kernel"
)

// Settings are what every node of a cluster serves under: the admission limits every
// node checks writes against, and the shape every shard's journal carries (a node
// journals it as a configure entry in each shard it opens or serves when it changes).
// They are one document in the cluster bucket; the first node of a cluster writes its
// own, every later node adopts them whatever its flags say (and logs the difference), and
// `holdfast cluster configure` changes them. Shape.Version is the key's revision, so a
// node whose view lags never journals an older shape over a newer one.
type Settings struct {
	Limits kernel.Limits
	Shape  kernel.Shape
}

const settingsKey = "settings"

// settingsDoc is the document's JSON form: named like the flags, in the units the kernel
// counts (the slot length is the cluster's, from the registry).
type settingsDoc struct {
	MaxTTLMillis       uint64 `json:"max_ttl_ms"`
	MaxBundle          int    `json:"max_bundle"`
	MaxCommandBytes    int    `json:"max_command_bytes"`
	SlotMillis         uint64 `json:"slot_ms"`
	DedupeWindowSlots  uint64 `json:"dedupe_window_slots"`
	HistoryWindowSlots uint64 `json:"history_window_slots"`
	MaxResources       int    `json:"max_resources"`
	MaxPools           int    `json:"max_pools"`
	MaxRanges          int    `json:"max_ranges"`
	MaxLeases          int    `json:"max_leases"`
	MaxMembers         int    `json:"max_members"`
	MaxOperations      int    `json:"max_operations"`
	MaxExpirations     int    `json:"max_expirations"`
	MaxRangeValues     int    `json:"max_range_values"`
	MaxRuns            int    `json:"max_runs"`
	MaxWork            int    `json:"max_work"`
}

func (s Settings) doc() settingsDoc {
	l, h := s.Limits, s.Shape
	return settingsDoc{MaxTTLMillis: l.MaxTTLMillis, MaxBundle: l.MaxBundle, MaxCommandBytes: l.MaxCommandBytes,
		SlotMillis: h.SlotMillis, DedupeWindowSlots: h.DedupeWindowSlots, HistoryWindowSlots: h.HistoryWindowSlots,
		MaxResources: h.MaxResources, MaxPools: h.MaxPools, MaxRanges: h.MaxRanges, MaxLeases: h.MaxLeases,
		MaxMembers: h.MaxMembers, MaxOperations: h.MaxOperations, MaxExpirations: h.MaxExpirations,
		MaxRangeValues: h.MaxRangeValues, MaxRuns: h.MaxRuns, MaxWork: h.MaxWork}
}

func (d settingsDoc) settings(rev uint64) Settings {
	return Settings{
		Limits: kernel.Limits{MaxTTLMillis: d.MaxTTLMillis, MaxBundle: d.MaxBundle, MaxCommandBytes: d.MaxCommandBytes},
		Shape: kernel.Shape{Version: rev, SlotMillis: d.SlotMillis, DedupeWindowSlots: d.DedupeWindowSlots,
			HistoryWindowSlots: d.HistoryWindowSlots, MaxResources: d.MaxResources, MaxPools: d.MaxPools,
			MaxRanges: d.MaxRanges, MaxLeases: d.MaxLeases, MaxMembers: d.MaxMembers, MaxOperations: d.MaxOperations,
			MaxExpirations: d.MaxExpirations, MaxRangeValues: d.MaxRangeValues, MaxRuns: d.MaxRuns, MaxWork: d.MaxWork},
	}
}

// Validate rejects settings no shard can run with.
func (s Settings) Validate() error {
	if err := s.Limits.Validate(); err != nil {
		return err
	}
	return s.Shape.Validate()
}

func decodeSettings(e jetstream.KeyValueEntry) (Settings, error) {
	var d settingsDoc
	if err := json.Unmarshal(e.Value(), &d); err != nil {
		return Settings{}, fmt.Errorf("the cluster's settings are unreadable: %w", err)
	}
	s := d.settings(e.Revision())
	if err := s.Validate(); err != nil {
		return Settings{}, fmt.Errorf("the cluster's settings: %w", err)
	}
	return s, nil
}

// AdoptSettings returns the cluster's settings, recording mine as the cluster's when it
// has none yet (the first node of a cluster). Either way Shape.Version is the revision.
func AdoptSettings(ctx context.Context, kv jetstream.KeyValue, mine Settings) (Settings, error) {
	if err := mine.Validate(); err != nil {
		return Settings{}, err
	}
	val, _ := json.Marshal(mine.doc())
	for {
		s, err := LoadSettings(ctx, kv)
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return Settings{}, err
		}
		err = attempts(ctx, func(actx context.Context) error {
			_, err := kv.Create(actx, settingsKey, val)
			return err
		})
		if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return Settings{}, fmt.Errorf("recording the cluster's settings: %w", err)
		}
		// Read back what is recorded: ours, or the node's that was first.
	}
}

// LoadSettings reads the cluster's settings (jetstream.ErrKeyNotFound: none yet).
func LoadSettings(ctx context.Context, kv jetstream.KeyValue) (Settings, error) {
	var e jetstream.KeyValueEntry
	err := attempts(ctx, func(actx context.Context) (err error) {
		e, err = kv.Get(actx, settingsKey)
		return err
	})
	if err != nil {
		return Settings{}, err
	}
	return decodeSettings(e)
}

// UpdateSettings replaces the cluster's settings if they are still at revision rev (a
// change made meanwhile by another operator fails: read again) and returns the new ones.
// Every node applies them as it sees the update: the limits at once, the shape by a
// configure entry in each shard it serves.
func UpdateSettings(ctx context.Context, kv jetstream.KeyValue, s Settings, rev uint64) (Settings, error) {
	if err := s.Validate(); err != nil {
		return Settings{}, err
	}
	val, _ := json.Marshal(s.doc())
	actx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	newRev, err := kv.Update(actx, settingsKey, val, rev)
	if err != nil {
		return Settings{}, fmt.Errorf("changing the cluster's settings: %w", err)
	}
	s.Shape.Version = newRev
	return s, nil
}

// SettingsDiff names the settings in which a differs from b ("max_ttl_ms 600000 (not
// 3600000)"), for a log line.
func SettingsDiff(a, b Settings) []string {
	fa, fb := a.doc().fields(), b.doc().fields()
	var out []string
	for i := range fa {
		if fa[i].v != fb[i].v {
			out = append(out, fmt.Sprintf("%s %d (not %d)", fa[i].name, fa[i].v, fb[i].v))
		}
	}
	return out
}

type docField struct {
	name string
	v    uint64
}

// fields lists the document's fields in a fixed order.
func (d settingsDoc) fields() []docField {
	return []docField{{"max_ttl_ms", d.MaxTTLMillis}, {"max_bundle", uint64(d.MaxBundle)},
		{"max_command_bytes", uint64(d.MaxCommandBytes)}, {"slot_ms", d.SlotMillis},
		{"dedupe_window_slots", d.DedupeWindowSlots}, {"history_window_slots", d.HistoryWindowSlots},
		{"max_resources", uint64(d.MaxResources)}, {"max_pools", uint64(d.MaxPools)}, {"max_ranges", uint64(d.MaxRanges)},
		{"max_leases", uint64(d.MaxLeases)}, {"max_members", uint64(d.MaxMembers)},
		{"max_operations", uint64(d.MaxOperations)}, {"max_expirations", uint64(d.MaxExpirations)},
		{"max_range_values", uint64(d.MaxRangeValues)}, {"max_runs", uint64(d.MaxRuns)}, {"max_work", uint64(d.MaxWork)}}
}
