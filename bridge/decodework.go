package bridge

import (
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
		verb(contract.VerbCreateRun, prepCreateRun),
		verb(contract.VerbRegisterRun, prepRegisterRun),
		verb(contract.VerbCompleteRun, prepEndRun),
		verb(contract.VerbFailRun, prepEndRun),
		verb(contract.VerbCancelRun, prepEndRun),
		verb(contract.VerbDeleteRun, prepDelete((*messages.DeleteRunRequest).GetRunId)),
		verb(contract.VerbGetRun, prepGetRun),
		verb(contract.VerbGetWork, prepGetWork),
		verb(contract.VerbCheckpoint, prepCheckpoint),
		verb(contract.VerbCompleteWork, prepCheckpoint),
		verb(contract.VerbParkWork, prepParkWork),
		verb(contract.VerbUnparkWork, prepUnparkWork),
		verb(contract.VerbSplitReplace, prepSplitReplace),
		verb(contract.VerbSplitResidual, prepSplitResidual),
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

func prepCreateRun(b *Bridge, tenant string, r *messages.CreateRunRequest, o *op) *kernel.Rejection {
	b.objectWrite(tenant, r.OperationId, r.RunId, o).Work = workSpecsOf(r.Shards)
	return nil
}

func prepRegisterRun(b *Bridge, tenant string, r *messages.RegisterRunRequest, o *op) *kernel.Rejection {
	b.objectWrite(tenant, r.OperationId, r.RunId, o).Work = workSpecsOf(r.Shards)
	return nil
}

func prepEndRun(b *Bridge, tenant string, r *messages.EndRunRequest, o *op) *kernel.Rejection {
	b.objectWrite(tenant, r.OperationId, r.RunId, o).Reason = r.Reason
	return nil
}

func prepUnparkWork(b *Bridge, tenant string, r *messages.UnparkWorkRequest, o *op) *kernel.Rejection {
	b.objectWrite(tenant, r.OperationId, r.RunId, o).Name = r.Name
	return nil
}

func prepGetRun(b *Bridge, tenant string, r *messages.GetRunRequest, o *op) *kernel.Rejection {
	return b.objectRead(tenant, "run_id", r.RunId, r.MinLsn, r.WaitMs, o)
}

func prepGetWork(b *Bridge, tenant string, r *messages.GetWorkRequest, o *op) *kernel.Rejection {
	if rej := objectID("name", r.Name); rej != nil {
		return rej
	}
	if rej := b.objectRead(tenant, "run_id", r.RunId, r.MinLsn, r.WaitMs, o); rej != nil {
		return rej
	}
	o.read = actors.ReadRequest{ID: r.RunId, Name: r.Name, MinLSN: o.read.MinLSN, Wait: o.read.Wait}
	return nil
}

var prepCheckpoint = fenced(func(r *messages.CheckpointRequest, cmd *kernel.Command) *kernel.Rejection {
	if c := r.Cursor; c != nil {
		cmd.CursorKey, cmd.CursorToken, cmd.HasCursor = string(c.LastKey), string(c.Token), true
	}
	return nil
})

var prepParkWork = fenced(func(r *messages.ParkWorkRequest, c *kernel.Command) *kernel.Rejection {
	c.Reason = r.Reason
	return nil
})

var prepSplitReplace = fenced(func(r *messages.SplitReplaceRequest, cmd *kernel.Command) *kernel.Rejection {
	for i, c := range r.Children {
		if c == nil {
			return invalid("children[%d]: start and end required", i)
		}
		cmd.Work = append(cmd.Work, kernel.WorkSpec{Start: string(c.Start), End: string(c.End)})
	}
	return nil
})

var prepSplitResidual = fenced(func(r *messages.SplitResidualRequest, c *kernel.Command) *kernel.Rejection {
	c.SplitKey = string(r.SplitKey)
	return nil
})
