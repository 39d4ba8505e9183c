package kernel

import (
	"fmt"
	"math"

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

// Validate checks everything about a write that needs only the request and the shard's
// configuration — id forms, required fields, duplicate members, bundle size, ttl bounds,
// one placement key per bundle. It only checks: what a write derives is Normalize's. It
// is the single home of these rules: the service runs it before a command is sequenced (a
// failure is a definite rejection that is never journaled), and Apply runs it again so a
// journal can never smuggle in a command the rules forbid. The internal expire is not a
// client write and is refused here.
func Validate(cfg *Config, c *Command) *Rejection {
	if !contract.ValidTenant(c.Tenant) {
		return reject(contract.CodeInvalidRequest, "tenant: must be 1-64 characters of A-Z a-z 0-9 _ -")
	}
	if !c.Verb.IsWrite() {
		return reject(contract.CodeInvalidRequest, "verb: not a client write")
	}
	if !contract.ValidOperationID(c.OperationID) {
		return reject(contract.CodeInvalidRequest, "operation_id: must be 1-64 characters of A-Z a-z 0-9 _ - : / @ +, starting alphanumeric")
	}
	switch c.Verb {
	case contract.VerbCreateResource:
		return validObject("resource_id", c.ObjectID)
	case contract.VerbCreatePool:
		if r := validObject("pool_id", c.ObjectID); r != nil {
			return r
		}
		if c.Capacity == 0 {
			return reject(contract.CodeInvalidRequest, "capacity: must be greater than 0")
		}
	case contract.VerbCreateRange:
		if r := validObject("range_id", c.ObjectID); r != nil {
			return r
		}
		if c.First > c.Last {
			return reject(contract.CodeInvalidRequest, "first: must not be greater than last")
		}
		if c.Strategy >= strategyCount {
			return reject(contract.CodeInvalidRequest, "strategy: must be lowest_free, random or least_recently_freed")
		}
	case contract.VerbReserve:
		return validateReserve(cfg, c)
	case contract.VerbActivate, contract.VerbRelease:
		return validateHolderVerb(c)
	case contract.VerbRenew:
		if r := validateHolderVerb(c); r != nil {
			return r
		}
		return validateTTL(cfg, c)
	case contract.VerbRevoke, contract.VerbReclaim:
		if c.LeaseLSN == 0 {
			return reject(contract.CodeInvalidRequest, "lease_id: required")
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

func validateTTL(cfg *Config, c *Command) *Rejection {
	if c.TTLMillis < 1 || c.TTLMillis > cfg.MaxTTLMillis {
		return reject(contract.CodeTTLOutOfRange, "ttl_ms: must be between 1 and %d", cfg.MaxTTLMillis)
	}
	return nil
}

// Normalize fills what a valid write derives from the shard's configuration, before it
// is sequenced; the journal records the result with the command. A ttl becomes whole
// slots (rounding up, so a hold never ends early), and a reserve with activate drops its
// ttl: the contract ignores it there, and dropping it before the command is hashed makes a
// retry that differs only in it the same command, not an operation_conflict. Apply never
// derives: it takes the journaled slots, so a replay gives every lease the deadline it had.
func Normalize(cfg *Config, c *Command) {
	switch {
	case c.Verb == contract.VerbReserve && c.Activate:
		c.TTLMillis, c.TTLSlots = 0, 0
	case c.Verb == contract.VerbReserve || c.Verb == contract.VerbRenew:
		c.TTLSlots = cfg.TTLSlots(c.TTLMillis)
	}
}

func validateReserve(cfg *Config, c *Command) *Rejection {
	if r := validObject("holder_id", c.HolderID); r != nil {
		return r
	}
	if len(c.Members) == 0 {
		return reject(contract.CodeInvalidRequest, "members: at least one member is required")
	}
	if len(c.Members) > cfg.MaxBundle {
		return reject(contract.CodeBundleTooLarge, "members: %d members exceed the bundle limit of %d", len(c.Members), cfg.MaxBundle)
	}
	key := ""
	for i := range c.Members {
		m := &c.Members[i]
		var field string
		switch m.Kind {
		case MemberResource:
			field = "resource_id"
			if m.Quantity != 0 || m.HasValue {
				return reject(contract.CodeInvalidRequest, "members[%d]: a resource member takes only resource_id", i)
			}
		case MemberPool:
			field = "pool_id"
			if m.Quantity == 0 {
				return reject(contract.CodeInvalidRequest, "members[%d].quantity: must be greater than 0", i)
			}
			if m.HasValue {
				return reject(contract.CodeInvalidRequest, "members[%d]: a pool member takes only pool_id and quantity", i)
			}
		case MemberRange:
			field = "range_id"
			if m.Quantity != 0 {
				return reject(contract.CodeInvalidRequest, "members[%d]: a range member takes only range_id and value", i)
			}
		default:
			return reject(contract.CodeInvalidRequest, "members[%d]: exactly one of resource_id, pool_id, range_id is required", i)
		}
		if !contract.ValidObjectID(m.ID) {
			return validObject(fmt.Sprintf("members[%d].%s", i, field), m.ID)
		}
		pk := contract.PlacementKey(m.ID)
		if i == 0 {
			key = pk
		} else if pk != key {
			return reject(contract.CodeCrossShard, "members[%d].%s: placement key %q differs from %q; a bundle takes members of one placement key", i, field, pk, key)
		}
		for j := 0; j < i; j++ {
			o := &c.Members[j]
			if o.Kind == m.Kind && o.ID == m.ID && (m.Kind != MemberRange || (m.HasValue && o.HasValue && o.Value == m.Value)) {
				return reject(contract.CodeDuplicateMember, "members[%d]: duplicates members[%d]", i, j)
			}
		}
	}
	if c.Activate {
		return nil // no deadline: ttl_ms is ignored (docs/api.md §4), and Normalize drops it
	}
	return validateTTL(cfg, c)
}

// CheckSlots reports slot_overflow when a slot the command would derive at requestSlot —
// a deadline, or the retirement slot of the lease or the operation — would exceed u64.
// The shard runs it as it stamps the slot, before the journal, so the rejection is
// definite; Apply guards the same condition.
func CheckSlots(cfg *Config, c *Command, requestSlot uint64) *Rejection {
	limit := uint64(math.MaxUint64)
	if requestSlot > limit-cfg.DedupeWindowSlots || requestSlot > limit-cfg.HistoryWindowSlots {
		return reject(contract.CodeSlotOverflow, "request slot %d: retention would pass the largest slot", requestSlot)
	}
	if c.TTLSlots > 0 && (requestSlot > limit-c.TTLSlots || requestSlot+c.TTLSlots > limit-cfg.HistoryWindowSlots) {
		return reject(contract.CodeSlotOverflow, "ttl_ms: the deadline would pass the largest slot")
	}
	return nil
}
