package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// leaderKV is the cluster bucket with every Get answered by its stream's leader.
//
// The KV client reads with direct gets, which any replica answers — and a replica that
// fell behind answers too: nats-server subscribes a follower to direct gets once it is
// current and does not take that back when it falls behind (cut off, then healed and
// catching up). Under partitions a node read its shard's claim key there, found "its
// own key at a later revision" — a revision long superseded — and renewed against it,
// refused, for seconds; the live-node list read the same way kept a cut-off node alive.
// Claims, liveness and settings are decided from what is read here, so reads go to the
// leader, as etcd serves a linearizable read: the JetStream API's message get, which
// only the stream leader answers.
type leaderKV struct {
	jetstream.KeyValue
	nc      *nats.Conn
	bucket  string
	api     string // $JS.API.STREAM.MSG.GET.<stream>
	subject string // $KV.<bucket>.
}

// ExistingBucket opens the cluster bucket of names, which a serving node made, with its
// reads answered by the leader (a tool's view: holdfast configure).
func ExistingBucket(ctx context.Context, js jetstream.JetStream, names Names) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, names.Bucket())
	if err != nil {
		return nil, err
	}
	return withLeaderGets(js, kv, names.Bucket()), nil
}

// withLeaderGets wraps kv, the bucket named bucket.
func withLeaderGets(js jetstream.JetStream, kv jetstream.KeyValue, bucket string) jetstream.KeyValue {
	return &leaderKV{KeyValue: kv, nc: js.Conn(), bucket: bucket, api: "$JS.API.STREAM.MSG.GET.KV_" + bucket, subject: "$KV." + bucket + "."}
}

// msgGetResponse is the JetStream API's answer to a message get.
type msgGetResponse struct {
	Error   *jetstream.APIError `json:"error,omitempty"`
	Message *struct {
		Sequence uint64    `json:"seq"`
		Header   []byte    `json:"hdrs,omitempty"`
		Data     []byte    `json:"data,omitempty"`
		Time     time.Time `json:"time"`
	} `json:"message,omitempty"`
}

// Get reads key's last entry from the stream leader, with the KV client's meaning:
// jetstream.ErrKeyNotFound when the key has no message or its last message is a delete,
// purge or expiry marker.
func (kv *leaderKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	req, err := json.Marshal(map[string]string{"last_by_subj": kv.subject + key})
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, attemptTimeout)
		defer cancel()
	}
	msg, err := kv.nc.RequestWithContext(ctx, kv.api, req)
	if err != nil {
		return nil, err // nats.ErrNoResponders: no leader right now
	}
	var resp msgGetResponse
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, fmt.Errorf("reading %s from the bucket's leader: %w", key, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jsMessageNotFound:
		return nil, jetstream.ErrKeyNotFound
	case resp.Error != nil:
		return nil, resp.Error
	case resp.Message == nil:
		return nil, fmt.Errorf("reading %s from the bucket's leader: an answer with no message", key)
	}
	if len(resp.Message.Header) > 0 {
		h, err := nats.DecodeHeadersMsg(resp.Message.Header)
		if err != nil {
			return nil, fmt.Errorf("reading %s from the bucket's leader: %w", key, err)
		}
		if removed(h) {
			return nil, jetstream.ErrKeyNotFound
		}
	}
	return &leaderEntry{bucket: kv.bucket, key: key, value: resp.Message.Data, revision: resp.Message.Sequence,
		created: resp.Message.Time}, nil
}

// removed says whether a bucket message's headers make it a delete, a purge or a TTL's
// expiry marker, as the KV client reads them.
func removed(h nats.Header) bool {
	return h.Get("KV-Operation") != "" || h.Get(jetstream.MarkerReasonHeader) != ""
}

// leaderEntry is an entry read from the leader.
type leaderEntry struct {
	bucket   string
	key      string
	value    []byte
	revision uint64
	created  time.Time
}

func (e *leaderEntry) Bucket() string                  { return e.bucket }
func (e *leaderEntry) Key() string                     { return e.key }
func (e *leaderEntry) Value() []byte                   { return e.value }
func (e *leaderEntry) Revision() uint64                { return e.revision }
func (e *leaderEntry) Created() time.Time              { return e.created }
func (e *leaderEntry) Delta() uint64                   { return 0 }
func (e *leaderEntry) Operation() jetstream.KeyValueOp { return jetstream.KeyValuePut }
