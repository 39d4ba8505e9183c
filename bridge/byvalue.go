package bridge

import (
	"encoding/json"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/messages"
)

// leaseVerbAtHome serves a range.release or range.revoke whose value belongs to a bundle
// across shards (docs/api.md §2) whose home another node serves: the participant's shard
// answered Elsewhere, naming the lease, and the verb by value is the lease verb at the
// home, so it is sent there as that verb (lease.release at epoch 1, lease.revoke or
// lease.reclaim) under
// the same operation_id — a retry finds the home's remembered outcome — and the home's
// answer is relayed. In one process the shard does this itself (actors.forwardByValue).
func (b *Bridge) leaseVerbAtHome(c *call, r *actors.Reply) {
	cmd := c.op.cmd
	verb := kernel.LeaseVerbByValue(cmd.Verb)
	id := contract.FormatLeaseID(r.Txn.Shard, r.Txn.LSN)
	req := atHome[verb](cmd.OperationID, id, cmd.HolderID)
	var data []byte
	var err error
	header := nats.Header{}
	if c.caller.user != "" { // the home checks the holder against the same caller
		info, _ := json.Marshal(map[string]string{"acc": c.caller.account, "user": c.caller.user})
		header.Set(requestInfoHeader, string(info))
	}
	if c.proto {
		data, err = messages.MarshalProto(req)
		header.Set(headerContentType, contentTypeProtobuf)
	} else {
		data, err = messages.MarshalJSON(req)
	}
	if err != nil {
		c.res = rejectReply(contract.CodeInvalidRequest, "the request could not be sent to the lease's home")
		b.respond(c)
		return
	}
	c.op.shard = r.Txn.Shard
	b.forward(&job{spec: c.spec, subject: b.cfg.Prefix + ".v1." + cmd.Tenant + "." + verb.Object() + "." + verb.Action(),
		reply: c.reply, data: data, header: header, proto: c.proto, forwarded: c.forwarded, start: c.start, budget: c.bound}, c)
}

// atHome builds the request of the lease verb a verb by value stands for (a release of a
// lease that can be released by value was never revoked: epoch 1).
var atHome = map[contract.Verb]func(opID, leaseID, holder string) proto.Message{
	contract.VerbRelease: func(opID, leaseID, holder string) proto.Message {
		return &messages.ReleaseRequest{OperationId: opID, LeaseId: leaseID, HolderId: holder, LeaseEpoch: 1}
	},
	contract.VerbRevoke: func(opID, leaseID, _ string) proto.Message {
		return &messages.RevokeRequest{OperationId: opID, LeaseId: leaseID}
	},
	contract.VerbReclaim: func(opID, leaseID, _ string) proto.Message {
		return &messages.ReclaimRequest{OperationId: opID, LeaseId: leaseID}
	},
}
