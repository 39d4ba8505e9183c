package server

import (
	"sync"

	"github.com/nats-io/nats.go"
)

// shardSubs are a process's subscriptions to one subject per shard it serves (the peer
// and backup subjects): subscribed when it takes a shard, dropped when it gives it up.
type shardSubs struct {
	mu   sync.Mutex
	subs map[uint32]*nats.Subscription
}

// set makes sub shard k's subscription, dropping one it replaces.
func (s *shardSubs) set(k uint32, sub *nats.Subscription) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subs == nil {
		s.subs = make(map[uint32]*nats.Subscription)
	}
	if old := s.subs[k]; old != nil {
		_ = old.Unsubscribe()
	}
	s.subs[k] = sub
}

// drop unsubscribes shard k's subscription; what is still on the way is dropped.
func (s *shardSubs) drop(k uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sub := s.subs[k]; sub != nil {
		_ = sub.Unsubscribe()
		delete(s.subs, k)
	}
}
