package bridge

import (
	"google.golang.org/protobuf/proto"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/messages"
)

// The work coordination endpoints (docs/api.md Part III). A run and all its work live on
// the shard of the run id, so every request here routes by it; the fenced verbs route by
// their lease id, like the lease verbs. kernel.Validate checks the shapes.

func workSpecs() []*verbSpec {
	return []*verbSpec{
		{verb: contract.VerbCreateRun, newReq: func() proto.Message { return new(messages.CreateRunRequest) }, prepare: prepCreateRun},
		{verb: contract.VerbRegisterRun, newReq: func() proto.Message { return new(messages.RegisterRunRequest) }, prepare: prepRegisterRun},
		{verb: contract.VerbCompleteRun, newReq: func() proto.Message { return new(messages.EndRunRequest) }, prepare: prepEndRun},
		{verb: contract.VerbFailRun, newReq: func() proto.Message { return new(messages.EndRunRequest) }, prepare: prepEndRun},
		{verb: contract.VerbCancelRun, newReq: func() proto.Message { return new(messages.EndRunRequest) }, prepare: prepEndRun},
		{verb: contract.VerbDeleteRun, newReq: func() proto.Message { return new(messages.DeleteRunRequest) }, prepare: prepDelete},
		{verb: contract.VerbGetRun, newReq: func() proto.Message { return new(messages.GetRunRequest) }, prepare: prepGetRun},
		{verb: contract.VerbGetWork, newReq: func() proto.Message { return new(messages.GetWorkRequest) }, prepare: prepGetWork},
		{verb: contract.VerbCheckpoint, newReq: func() proto.Message { return new(messages.CheckpointRequest) }, prepare: prepCheckpoint},
		{verb: contract.VerbCompleteWork, newReq: func() proto.Message { return new(messages.CheckpointRequest) }, prepare: prepCheckpoint},
		{verb: contract.VerbParkWork, newReq: func() proto.Message { return new(messages.ParkWorkRequest) }, prepare: prepParkWork},
		{verb: contract.VerbUnparkWork, newReq: func() proto.Message { return new(messages.UnparkWorkRequest) }, prepare: prepUnparkWork},
		{verb: contract.VerbSplitReplace, newReq: func() proto.Message { return new(messages.SplitReplaceRequest) }, prepare: prepSplitReplace},
		{verb: contract.VerbSplitResidual, newReq: func() proto.Message { return new(messages.SplitResidualRequest) }, prepare: prepSplitResidual},
	}
}

func workSpecsOf(ws []*messages.WorkSpec) []kernel.WorkSpec {
	out := make([]kernel.WorkSpec, len(ws))
	for i, w := range ws {
		if w != nil {
			out[i] = kernel.WorkSpec{Name: w.Name, Start: string(w.Start), End: string(w.End), Metadata: string(w.Metadata)}
		}
	}
	return out
}

func prepCreateRun(b *Bridge, tenant string, m proto.Message, o *op) *kernel.Rejection {
	r := m.(*messages.CreateRunRequest)
	b.objectWrite(tenant, r.OperationId, r.RunId, o).Work = workSpecsOf(r.Shards)
	return nil
}

func prepRegisterRun(b *Bridge, tenant string, m proto.Message, o *op) *kernel.Rejection {
	r := m.(*messages.RegisterRunRequest)
	b.objectWrite(tenant, r.OperationId, r.RunId, o).Work = workSpecsOf(r.Shards)
	return nil
}

func prepEndRun(b *Bridge, tenant string, m proto.Message, o *op) *kernel.Rejection {
	r := m.(*messages.EndRunRequest)
	b.objectWrite(tenant, r.OperationId, r.RunId, o).Reason = r.Reason
	return nil
}

func prepUnparkWork(b *Bridge, tenant string, m proto.Message, o *op) *kernel.Rejection {
	r := m.(*messages.UnparkWorkRequest)
	b.objectWrite(tenant, r.OperationId, r.RunId, o).Name = r.Name
	return nil
}

func prepGetRun(b *Bridge, tenant string, m proto.Message, o *op) *kernel.Rejection {
	r := m.(*messages.GetRunRequest)
	return b.objectRead(tenant, "run_id", r.RunId, r.MinLsn, r.WaitMs, o)
}

func prepGetWork(b *Bridge, tenant string, m proto.Message, o *op) *kernel.Rejection {
	r := m.(*messages.GetWorkRequest)
	if rej := objectID("name", r.Name); rej != nil {
		return rej
	}
	if rej := b.objectRead(tenant, "run_id", r.RunId, r.MinLsn, r.WaitMs, o); rej != nil {
		return rej
	}
	o.read = actors.ReadRequest{ID: r.RunId, Name: r.Name, MinLSN: o.read.MinLSN, Wait: o.read.Wait}
	return nil
}

func prepCheckpoint(b *Bridge, _ string, m proto.Message, o *op) *kernel.Rejection {
	r := m.(*messages.CheckpointRequest)
	if rej := b.holderVerb(o, r.OperationId, r.LeaseId, r.HolderId, r.LeaseEpoch); rej != nil {
		return rej
	}
	if c := r.Cursor; c != nil {
		o.cmd.CursorKey, o.cmd.CursorToken, o.cmd.HasCursor = string(c.LastKey), string(c.Token), true
	}
	return nil
}

func prepParkWork(b *Bridge, _ string, m proto.Message, o *op) *kernel.Rejection {
	r := m.(*messages.ParkWorkRequest)
	if rej := b.holderVerb(o, r.OperationId, r.LeaseId, r.HolderId, r.LeaseEpoch); rej != nil {
		return rej
	}
	o.cmd.Reason = r.Reason
	return nil
}

func prepSplitReplace(b *Bridge, _ string, m proto.Message, o *op) *kernel.Rejection {
	r := m.(*messages.SplitReplaceRequest)
	if rej := b.holderVerb(o, r.OperationId, r.LeaseId, r.HolderId, r.LeaseEpoch); rej != nil {
		return rej
	}
	for i, c := range r.Children {
		if c == nil {
			return invalid("children[%d]: start and end required", i)
		}
		o.cmd.Work = append(o.cmd.Work, kernel.WorkSpec{Start: string(c.Start), End: string(c.End)})
	}
	return nil
}

func prepSplitResidual(b *Bridge, _ string, m proto.Message, o *op) *kernel.Rejection {
	r := m.(*messages.SplitResidualRequest)
	if rej := b.holderVerb(o, r.OperationId, r.LeaseId, r.HolderId, r.LeaseEpoch); rej != nil {
		return rej
	}
	o.cmd.SplitKey = string(r.SplitKey)
	return nil
}
