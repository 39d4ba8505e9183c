package kernel

import "github.com/holdfast/holdfast/contract"

// applier applies one journaled command of its verb: Apply has done what every write
// shares (validation, the retry cache, the room to remember it) before, and remembers
// its outcome after.
type applier func(k *Kernel, e Entry, out *Output)

// appliers is the kernel's side of the verb table (contract.VerbInfo): one function per
// journaled verb, the client writes and the internal ones. A verb without one is
// refused as invalid_request; TestEveryVerbIsComplete names a client write that lacks one.
var appliers [contract.VerbCount]applier

func init() {
	object := func(f func(*Kernel, *Command, *Output)) applier {
		return func(k *Kernel, e Entry, out *Output) { f(k, e.Cmd, out) }
	}
	for v, f := range map[Verb]applier{
		contract.VerbCreateResource: object((*Kernel).createResource),
		contract.VerbCreatePool:     object((*Kernel).createPool),
		contract.VerbCreateRange:    object((*Kernel).createRange),
		contract.VerbReserve:        (*Kernel).reserve,
		contract.VerbActivate:       (*Kernel).leaseVerb,
		contract.VerbRenew:          (*Kernel).leaseVerb,
		contract.VerbRelease:        (*Kernel).leaseVerb,
		contract.VerbRevoke:         (*Kernel).leaseVerb,
		contract.VerbReclaim:        (*Kernel).leaseVerb,
		contract.VerbExpire:         (*Kernel).expire,
		contract.VerbConfigure: func(k *Kernel, e Entry, out *Output) {
			k.configure(e.Cmd, !k.fresh, out)
		},
		contract.VerbCreateRun:      object((*Kernel).createRun),
		contract.VerbRegisterRun:    object((*Kernel).registerRun),
		contract.VerbCompleteRun:    object((*Kernel).endRun),
		contract.VerbFailRun:        object((*Kernel).endRun),
		contract.VerbCancelRun:      object((*Kernel).endRun),
		contract.VerbUnparkWork:     object((*Kernel).unparkWork),
		contract.VerbDeleteResource: object((*Kernel).deleteObject),
		contract.VerbDeletePool:     object((*Kernel).deleteObject),
		contract.VerbDeleteRange:    object((*Kernel).deleteObject),
		contract.VerbDeleteRun:      object((*Kernel).deleteObject),
		contract.VerbCheckpoint:     (*Kernel).workVerb,
		contract.VerbCompleteWork:   (*Kernel).workVerb,
		contract.VerbParkWork:       (*Kernel).workVerb,
		contract.VerbSplitReplace:   (*Kernel).workVerb,
		contract.VerbSplitResidual:  (*Kernel).workVerb,
		contract.VerbReleaseValue:   (*Kernel).valueVerb,
		contract.VerbRevokeValue:    (*Kernel).valueVerb,
		contract.VerbReclaimValue:   (*Kernel).valueVerb,
		contract.VerbExclude:        object((*Kernel).excludeValues),
		contract.VerbInclude:        object((*Kernel).excludeValues),
		contract.VerbResizeRange:    object((*Kernel).resizeRange),
		contract.VerbResizePool:     object((*Kernel).resizePool),
		contract.VerbConsume:        (*Kernel).consume,
		contract.VerbImport:         (*Kernel).importLeases,
		contract.VerbReleaseAll:     (*Kernel).bulkVerb,
		contract.VerbRevokeAll:      (*Kernel).bulkVerb,
		contract.VerbSkip:           (*Kernel).skip,
	} {
		appliers[v] = f
	}
}

// applierOf is the verb's applier, or one that refuses the command.
func applierOf(v Verb) applier {
	if v < contract.VerbCount && appliers[v] != nil {
		return appliers[v]
	}
	return func(_ *Kernel, _ Entry, out *Output) { out.Code = contract.CodeInvalidRequest }
}

// Applies reports whether the kernel applies journaled commands of verb v.
func Applies(v Verb) bool { return v < contract.VerbCount && appliers[v] != nil }
