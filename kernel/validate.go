package kernel

import (
	"fmt"
	"math"
	"slices"

	"github.com/holdfast/holdfast/contract"
)

// Rejection is a definite rejection found before sequencing: the code and a message that
// names the offending field.
type Rejection struct {
	Code    Code
	Message string
}

func reject(code Code, format string, args ...any) *Rejection {
	return &Rejection{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Validate checks the form of a write, everything that needs only the request — id forms,
// required fields, duplicate members, one placement key per bundle, a ttl where one is
// required — and nothing a setting decides (CheckLimits has those). It only checks: what
// a write derives is Normalize's. It is the single home of these rules: the bridge runs it
// before routing, the shard's admission before anything else (a failure is a definite
// rejection that is never journaled), and Apply runs it again so a journal can never
// smuggle in a command the rules forbid. The internal verbs are not client writes and are
// refused here.
func Validate(c *Command) *Rejection {
	if !contract.ValidTenant(c.Tenant) {
		return reject(contract.CodeInvalidRequest, "tenant: must be 1-64 characters of A-Z a-z 0-9 _ -")
	}
	if !c.Verb.IsWrite() {
		return reject(contract.CodeInvalidRequest, "verb: not a client write")
	}
	if !contract.ValidOperationID(c.OperationID) {
		return reject(contract.CodeInvalidRequest, "operation_id: must be 1-64 characters of A-Z a-z 0-9 _ - : / @ +, starting alphanumeric")
	}
	if v := rowOf(c.Verb).validate; v != nil {
		return v(c)
	}
	return reject(contract.CodeInvalidRequest, "verb: not a client write")
}

// CheckLimits checks a valid write against the admission limits in force: the ttl and
// keep-alive bounds (ttl_out_of_range) and the bundle size (bundle_too_large). Admission
// runs it after the retry cache, so a retry of an operation admitted under other limits
// replays, and Apply never runs it: a journaled command was admitted, whatever the limits
// are now.
func CheckLimits(lim *Limits, c *Command) *Rejection {
	if l := rowOf(c.Verb).limits; l != nil {
		return l(lim, c)
	}
	return nil
}

// limitReserve: the bundle size, and the ttl or (activating) the keep-alive.
func limitReserve(lim *Limits, c *Command) *Rejection {
	if len(c.Members) > lim.MaxBundle {
		return reject(contract.CodeBundleTooLarge, "members: %d members exceed the bundle limit of %d", len(c.Members), lim.MaxBundle)
	}
	if c.Activate {
		return validateKeepAlive(lim, c)
	}
	return validateTTL(lim, c)
}

// limitImport: each lease as its reserve would be, named in the message.
func limitImport(lim *Limits, c *Command) *Rejection {
	for i := range c.Imports {
		im := &c.Imports[i]
		one := Command{Verb: contract.VerbReserve, Members: im.Members, Activate: im.Activate, TTLMillis: im.TTLMillis,
			KeepAliveMillis: im.KeepAliveMillis}
		if r := limitReserve(lim, &one); r != nil {
			r.Message = fmt.Sprintf("leases[%d].%s", i, r.Message)
			return r
		}
	}
	return nil
}

func validObject(field, id string) *Rejection {
	if id == "" {
		return reject(contract.CodeInvalidRequest, "%s: required", field)
	}
	if !contract.ValidObjectID(id) {
		return reject(contract.CodeInvalidRequest, "%s: must be 1-128 characters of A-Z a-z 0-9 _ - : / @ +, starting alphanumeric", field)
	}
	return nil
}

func validateHolderVerb(c *Command) *Rejection {
	if c.LeaseLSN == 0 {
		return reject(contract.CodeInvalidRequest, "lease_id: required")
	}
	if r := validObject("holder_id", c.HolderID); r != nil {
		return r
	}
	if c.Epoch == 0 {
		return reject(contract.CodeInvalidRequest, "lease_epoch: required and must be at least 1")
	}
	return nil
}

// validateTTL checks ttl_ms: required (at least 1) always, and with lim (admission) at
// most MaxTTLMillis.
func validateTTL(lim *Limits, c *Command) *Rejection {
	if c.TTLMillis < 1 {
		return reject(contract.CodeTTLOutOfRange, "ttl_ms: required, at least 1")
	}
	if lim != nil && c.TTLMillis > lim.MaxTTLMillis {
		return reject(contract.CodeTTLOutOfRange, "ttl_ms: must be between 1 and %d", lim.MaxTTLMillis)
	}
	return nil
}

// Normalize fills what a valid write derives from the shard's configuration, before it
// is sequenced; the journal records the result with the command. A ttl becomes whole
// slots (rounding up, so a hold never ends early), and a reserve with activate drops its
// ttl: the contract ignores it there, and dropping it before the command is hashed makes a
// retry that differs only in it the same command, not an operation_conflict. Apply never
// derives: it takes the journaled slots, so a replay gives every lease the deadline it had.
func Normalize(s *Shape, c *Command) {
	for i := range c.Imports {
		im := &c.Imports[i]
		if im.Activate {
			im.TTLMillis, im.TTLSlots = 0, 0
		} else {
			im.TTLSlots = s.TTLSlots(im.TTLMillis)
		}
		im.KeepAliveSlots = s.TTLSlots(im.KeepAliveMillis)
	}
	switch {
	case c.Verb == contract.VerbReserve && c.Activate:
		c.TTLMillis, c.TTLSlots = 0, 0
	case c.Verb == contract.VerbReserve || c.Verb == contract.VerbRenew:
		c.TTLSlots = s.TTLSlots(c.TTLMillis)
	}
	c.KeepAliveSlots = s.TTLSlots(c.KeepAliveMillis)
	if c.Verb == contract.VerbReserve && spansShards(c.Shards) {
		c.Phase = PhaseEnding // a bundle across shards: its lease will end in two rounds (docs/design.md)
		// ... and commit in parallel, unless it claims work: a claim's answer shows the
		// claim, which its commit makes.
		c.Parallel = !slices.ContainsFunc(c.Members, func(m Member) bool { return m.Kind == MemberWork })
	}
	MarkGroup(c) // an import across shards: a group of bundle leases
}

func validateReserve(c *Command) *Rejection {
	if r := validObject("holder_id", c.HolderID); r != nil {
		return r
	}
	if len(c.Members) == 0 {
		return reject(contract.CodeInvalidRequest, "members: at least one member is required")
	}
	if len(c.Members) > maxEncodedMembers {
		return reject(contract.CodeBundleTooLarge, "members: %d members exceed the most a journal entry holds, %d", len(c.Members), maxEncodedMembers)
	}
	key := ""
	var seen map[memberKey]int // past a few members, duplicates are found by key, not pairwise
	if len(c.Members) > 16 {
		seen = make(map[memberKey]int, len(c.Members))
	}
	for i := range c.Members {
		m := &c.Members[i]
		field, r := validateMemberShape(c, i)
		if r != nil {
			return r
		}
		if !contract.ValidObjectID(m.ID) {
			return validObject(fmt.Sprintf("members[%d].%s", i, field), m.ID)
		}
		pk := contract.PlacementKey(m.ID)
		if i == 0 {
			key = pk
		} else if pk != key && len(c.Shards) == 0 { // a bundle begun across shards takes any keys
			return reject(contract.CodeCrossShard, "members[%d].%s: placement key %q differs from %q; a bundle takes members of one placement key", i, field, pk, key)
		}
		if m.Kind == MemberWork && i > 0 && len(c.Shards) > 0 {
			// The claim's home is its first member's shard, and the work verbs are served
			// where the work is: a claim across placement keys names its work first.
			return reject(contract.CodeCrossShard, "members[%d].%s: a work claim with members of other placement keys names its work first", i, field)
		}
		if j := duplicateOf(c.Members, i, seen); j >= 0 {
			return reject(contract.CodeDuplicateMember, "members[%d]: duplicates members[%d]", i, j)
		}
	}
	if c.Activate {
		// No deadline unless a keep-alive is asked for: ttl_ms is ignored (docs/api.md
		// §4), and Normalize drops it.
		return nil
	}
	if c.KeepAliveMillis != 0 {
		return reject(contract.CodeInvalidRequest, "keepalive_ms: only for an active lease (with activate)")
	}
	return validateTTL(nil, c)
}

// validateMemberShape checks that member i has the fields of its kind alone, and names
// its id's field.
func validateMemberShape(c *Command, i int) (string, *Rejection) {
	m := &c.Members[i]
	switch m.Kind {
	case MemberResource:
		if m.Quantity != 0 || m.HasValue {
			return "", reject(contract.CodeInvalidRequest, "members[%d]: a resource member takes only resource_id", i)
		}
		return "resource_id", nil
	case MemberPool:
		if m.Quantity == 0 {
			return "", reject(contract.CodeInvalidRequest, "members[%d].quantity: must be greater than 0", i)
		}
		if m.HasValue {
			return "", reject(contract.CodeInvalidRequest, "members[%d]: a pool member takes only pool_id and quantity", i)
		}
		return "pool_id", nil
	case MemberRange:
		if m.Quantity != 0 {
			return "", reject(contract.CodeInvalidRequest, "members[%d]: a range member takes only range_id and value", i)
		}
		return "range_id", nil
	case MemberWork:
		return "work.run_id", validateWorkMember(c, i)
	}
	return "", reject(contract.CodeInvalidRequest, "members[%d]: exactly one of resource_id, pool_id, range_id, work is required", i)
}

// validateKeepAlive bounds an active lease's keep-alive like a ttl (0: none).
func validateKeepAlive(lim *Limits, c *Command) *Rejection {
	if c.KeepAliveMillis > lim.MaxTTLMillis {
		return reject(contract.CodeTTLOutOfRange, "keepalive_ms: must be between 1 and %d", lim.MaxTTLMillis)
	}
	return nil
}

// validateWorkMember checks a work member of a reserve: a run id (a placement key, so
// no '/'), an optional name, alone of its kind, and a claim that keeps a deadline.
func validateWorkMember(c *Command, i int) *Rejection {
	m := &c.Members[i]
	if m.Quantity != 0 || m.HasValue {
		return reject(contract.CodeInvalidRequest, "members[%d]: a work member takes only run_id and name", i)
	}
	if r := validRunID(fmt.Sprintf("members[%d].work.run_id", i), m.ID); r != nil {
		return r
	}
	if m.Name != "" {
		if r := validWorkName(fmt.Sprintf("members[%d].work.name", i), m.ID, m.Name); r != nil {
			return r
		}
	}
	for j := 0; j < i; j++ {
		if c.Members[j].Kind == MemberWork {
			return reject(contract.CodeInvalidRequest, "members[%d]: a lease claims at most one work shard (members[%d] is one)", i, j)
		}
	}
	if c.Activate {
		return reject(contract.CodeInvalidRequest, "activate: a work claim is renewed, never activated")
	}
	return nil
}

func validRunID(field, id string) *Rejection {
	if r := validObject(field, id); r != nil {
		return r
	}
	if contract.PlacementKey(id) != id {
		return reject(contract.CodeInvalidRequest, "%s: a run id is a placement key and has no '/'", field)
	}
	return nil
}

// validWorkName checks a work shard's name: with its run id it forms the work id
// <run_id>/<name>, which must be a valid object id.
func validWorkName(field, runID, name string) *Rejection {
	if name == "" {
		return reject(contract.CodeInvalidRequest, "%s: required", field)
	}
	if !contract.ValidObjectID(contract.WorkID(runID, name)) || !contract.ValidObjectID(name) {
		return reject(contract.CodeInvalidRequest, "%s: must be characters of A-Z a-z 0-9 _ - : / @ +, starting alphanumeric, and with the run id at most %d", field, contract.MaxObjectIDLen-1)
	}
	return nil
}

// validateWorkSpecs checks a run manifest: 1..MaxManifestWork shards, distinct valid
// names, ranges with start before end (end empty: unbounded), bounded metadata.
func validateWorkSpecs(c *Command) *Rejection {
	if len(c.Work) == 0 || len(c.Work) > contract.MaxManifestWork {
		return reject(contract.CodeInvalidRequest, "shards: between 1 and %d work shards", contract.MaxManifestWork)
	}
	for i := range c.Work {
		w := &c.Work[i]
		if r := validWorkName(fmt.Sprintf("shards[%d].name", i), c.ObjectID, w.Name); r != nil {
			return r
		}
		if r := validKeyRange(fmt.Sprintf("shards[%d]", i), w.Start, w.End); r != nil {
			return r
		}
		if len(w.Metadata) > contract.MaxWorkMetadataLen {
			return reject(contract.CodeInvalidRequest, "shards[%d].metadata: at most %d bytes", i, contract.MaxWorkMetadataLen)
		}
		for j := 0; j < i; j++ {
			if c.Work[j].Name == w.Name {
				return reject(contract.CodeInvalidRequest, "shards[%d].name: duplicates shards[%d]", i, j)
			}
		}
	}
	return nil
}

func validKeyRange(field, start, end string) *Rejection {
	if len(start) > contract.MaxWorkKeyLen || len(end) > contract.MaxWorkKeyLen {
		return reject(contract.CodeInvalidRequest, "%s: start and end are at most %d bytes", field, contract.MaxWorkKeyLen)
	}
	if end != "" && start >= end {
		return reject(contract.CodeInvalidRequest, "%s.start: must be before end (an empty end is unbounded)", field)
	}
	return nil
}

// runID is the run verbs' id (run_id).
func runID(c *Command) *Rejection { return validRunID("run_id", c.ObjectID) }

// validateManifest is run.create's and run.register's: the run and its work shards.
func validateManifest(c *Command) *Rejection {
	if r := runID(c); r != nil {
		return r
	}
	return validateWorkSpecs(c)
}

func validateUnpark(c *Command) *Rejection {
	if r := runID(c); r != nil {
		return r
	}
	return validWorkName("name", c.ObjectID, c.Name)
}

// validateFencedWork is what the fenced work verbs share: the lease's token, and sizes
// the journal can carry (the contract's tighter cursor bounds are domain codes:
// cursor_too_large).
func validateFencedWork(c *Command) *Rejection {
	if r := validateHolderVerb(c); r != nil {
		return r
	}
	if len(c.CursorKey) > maxEncodedBlob || len(c.CursorToken) > maxEncodedBlob {
		return reject(contract.CodeInvalidRequest, "last_key, token: at most %d bytes", maxEncodedBlob)
	}
	return nil
}

// validateChildren is split_replace's: 2 to MaxSplitChildren key ranges, nothing else.
func validateChildren(c *Command) *Rejection {
	if len(c.Work) < 2 || len(c.Work) > contract.MaxSplitChildren {
		return reject(contract.CodeInvalidRequest, "children: between 2 and %d", contract.MaxSplitChildren)
	}
	for i := range c.Work {
		if c.Work[i].Name != "" || c.Work[i].Metadata != "" {
			return reject(contract.CodeInvalidRequest, "children[%d]: takes only start and end", i)
		}
		if r := validKeyRange(fmt.Sprintf("children[%d]", i), c.Work[i].Start, c.Work[i].End); r != nil {
			return r
		}
	}
	return nil
}

func validateSplitKey(c *Command) *Rejection {
	if c.SplitKey == "" || len(c.SplitKey) > contract.MaxWorkKeyLen {
		return reject(contract.CodeInvalidRequest, "split_key: required, at most %d bytes", contract.MaxWorkKeyLen)
	}
	return nil
}

// CheckSlots reports slot_overflow when a slot the command would derive at requestSlot —
// a deadline, or the retirement slot of the lease or the operation — would exceed u64.
// The shard runs it as it stamps the slot, before the journal, so the rejection is
// definite; Apply guards the same condition.
func CheckSlots(s *Shape, c *Command, requestSlot uint64) *Rejection {
	limit := uint64(math.MaxUint64)
	if requestSlot > limit-s.DedupeWindowSlots || requestSlot > limit-s.HistoryWindowSlots {
		return reject(contract.CodeSlotOverflow, "request slot %d: retention would pass the largest slot", requestSlot)
	}
	if c.TTLSlots > 0 && (requestSlot > limit-c.TTLSlots || requestSlot+c.TTLSlots > limit-s.HistoryWindowSlots) {
		return reject(contract.CodeSlotOverflow, "ttl_ms: the deadline would pass the largest slot")
	}
	if c.KeepAliveSlots > 0 && (requestSlot > limit-c.KeepAliveSlots || requestSlot+c.KeepAliveSlots > limit-s.HistoryWindowSlots) {
		return reject(contract.CodeSlotOverflow, "keepalive_ms: the deadline would pass the largest slot")
	}
	for i := range c.Imports {
		im := &c.Imports[i]
		for _, d := range []uint64{im.TTLSlots, im.KeepAliveSlots} {
			if d > 0 && (requestSlot > limit-d || requestSlot+d > limit-s.HistoryWindowSlots) {
				return reject(contract.CodeSlotOverflow, "leases[%d]: the deadline would pass the largest slot", i)
			}
		}
	}
	return nil
}

// memberKey is what makes two members the same: the same resource, the same pool, the
// same specific value of a range ("any" values are never the same member).
type memberKey struct {
	kind  MemberKind
	id    string
	value uint64
}

// duplicateOf returns the first member before i that member i duplicates, or -1. With
// seen (many members) it looks i up and records it, so a bundle costs O(n), not O(n²).
func duplicateOf(ms []Member, i int, seen map[memberKey]int) int {
	m := &ms[i]
	if seen == nil {
		for j := 0; j < i; j++ {
			o := &ms[j]
			if o.Kind == m.Kind && o.ID == m.ID && (m.Kind != MemberRange || (m.HasValue && o.HasValue && o.Value == m.Value)) {
				return j
			}
		}
		return -1
	}
	if m.Kind == MemberRange && !m.HasValue {
		return -1
	}
	key := memberKey{kind: m.Kind, id: m.ID, value: m.Value}
	if j, ok := seen[key]; ok {
		return j
	}
	seen[key] = i
	return -1
}

// validateRangeShape checks a range's exclusions, static band and format (range.create,
// range.resize): inside [first, last], bounded.
func validateRangeShape(c *Command) *Rejection {
	if len(c.Excluded) > contract.MaxExcluded {
		return reject(contract.CodeInvalidRequest, "excluded: at most %d intervals", contract.MaxExcluded)
	}
	for i, iv := range c.Excluded {
		if iv.First > iv.Last || iv.First < c.First || iv.Last > c.Last {
			return reject(contract.CodeInvalidRequest, "excluded[%d]: first <= last, inside the range", i)
		}
	}
	if c.HasBand {
		if c.Band.First > c.Band.Last || c.Band.First < c.First || c.Band.Last > c.Last {
			return reject(contract.CodeInvalidRequest, "static_band: first <= last, inside the range")
		}
		if c.Band.Last-c.Band.First >= contract.MaxStaticBand {
			return reject(contract.CodeInvalidRequest, "static_band: at most %d values", contract.MaxStaticBand)
		}
	}
	if !contract.ValidFormat(c.Format) {
		return reject(contract.CodeInvalidRequest, "format: port, ipv4, mac or none")
	}
	return nil
}

// validateImport checks a lease.import: 1 to MaxImportLeases leases, each a valid reserve
// of resources, pools and ranges (no work claims) with its labels, all of one placement
// key unless the router gave their shards (an import across keys), and no resource or
// specific range value in two of them.
func validateImport(c *Command) *Rejection {
	if len(c.Imports) == 0 || len(c.Imports) > contract.MaxImportLeases {
		return reject(contract.CodeInvalidRequest, "leases: between 1 and %d", contract.MaxImportLeases)
	}
	key := ""
	seen := map[memberKey][2]int{}
	at := 0 // where the lease's members start in an import begun across shards' Shards
	for i := range c.Imports {
		im := &c.Imports[i]
		one := Command{Verb: contract.VerbReserve, HolderID: im.HolderID, Members: im.Members, Activate: im.Activate,
			TTLMillis: im.TTLMillis, KeepAliveMillis: im.KeepAliveMillis}
		if len(c.Shards) > 0 {
			if at+len(im.Members) > len(c.Shards) {
				return reject(contract.CodeInvalidRequest, "leases[%d]: no shard for its members", i) // a runtime fault
			}
			one.Shards, at = c.Shards[at:at+len(im.Members)], at+len(im.Members)
		}
		if r := validateReserve(&one); r != nil {
			r.Message = fmt.Sprintf("leases[%d].%s", i, r.Message)
			return r
		}
		if r := validateLabels(fmt.Sprintf("leases[%d].labels", i), im.Labels); r != nil {
			return r
		}
		for j := range im.Members {
			m := &im.Members[j]
			if m.Kind == MemberWork {
				return reject(contract.CodeInvalidRequest, "leases[%d].members[%d]: an import holds no work", i, j)
			}
			pk := contract.PlacementKey(m.ID)
			if key == "" {
				key = pk
			} else if pk != key && len(c.Shards) == 0 { // an import begun across shards takes any keys
				return reject(contract.CodeCrossShard, "leases[%d].members[%d]: placement key %q differs from %q; an import takes members of one placement key", i, j, pk, key)
			}
			if m.Kind == MemberPool || (m.Kind == MemberRange && !m.HasValue) {
				continue
			}
			mk := memberKey{kind: m.Kind, id: m.ID, value: m.Value}
			if at, dup := seen[mk]; dup && at[0] != i {
				return reject(contract.CodeDuplicateMember, "leases[%d].members[%d]: duplicates leases[%d].members[%d]", i, j, at[0], at[1])
			}
			seen[mk] = [2]int{i, j}
		}
	}
	if len(c.Shards) > 0 && at != len(c.Shards) {
		return reject(contract.CodeInvalidRequest, "leases: %d shards for %d members", len(c.Shards), at) // a runtime fault
	}
	return nil
}

// validateBulk checks lease.release_all and lease.revoke_all: the label, the limit and
// (release_all) the holder.
func validateBulk(c *Command) *Rejection {
	if c.Verb == contract.VerbReleaseAll {
		if r := validObject("holder_id", c.HolderID); r != nil {
			return r
		}
	}
	if !contract.ValidLabelKey(c.Label.Key) || !contract.ValidLabelValue(c.Label.Value) {
		return reject(contract.CodeInvalidRequest, "label: key=value, a valid label")
	}
	if c.Limit < 1 || c.Limit > contract.MaxBulkLimit {
		return reject(contract.CodeInvalidRequest, "limit: between 1 and %d", contract.MaxBulkLimit)
	}
	return nil
}
