package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/holdfast/holdfast/contract"
)

// commandFormat is the version byte in front of every journaled command, so the format
// can evolve while old journals stay readable. 2 adds work coordination (a member's work
// name and the work fields after the rest); a command without them is still written as 1,
// so its bytes — and its hash in the retry cache — are what they always were. 3 is the
// internal configure entry: its verb and the shape, nothing else. 4 adds the allocator
// fields (labels, values, exclusions, imports, ...) after format 2's; a command without
// them keeps its older format, byte for byte. 5 is 4 and one byte after it: which bounds
// of a range.resize keep their value (bit 0 first, bit 1 last); a resize giving both is 4.
const (
	commandFormat           = 1
	commandFormatWork       = 2
	commandFormatConfigure  = 3
	commandFormatAllocators = 4
	commandFormatKeeps      = 5
	// commandFormatBundle is 4's body and the bundle fields after it (Command.usesBundle):
	// a reserve begun across shards and the internal bundle steps.
	commandFormatBundle = 6
	// commandFormatEnding is 6 and one byte after it, the round of an end (Command.Phase);
	// a bundle command without one is 6.
	commandFormatEnding = 7
	// commandFormatParallel is 7 and one byte after it, 1: a reserve begun across shards
	// that commits in parallel (Command.Parallel; docs/design.md "Parallel commits").
	commandFormatParallel = 8
	// commandFormatGroup is 7 and one byte after it, 2: an import across shards and its
	// prepares and decision (Command.Group); the import's phase is PhaseEnding, the others'
	// none.
	commandFormatGroup = 9
)

// Bounds that decoding enforces before trusting a length from disk.
const (
	maxEncodedString  = 256
	maxEncodedMembers = 4096
	maxEncodedBlob    = 8192 // metadata and cursor tokens (the contract bounds them tighter)
	maxEncodedWork    = 4096
)

// ErrBadCommand is returned for bytes that are not a command of this format.
var ErrBadCommand = errors.New("kernel: malformed command encoding")

// ErrNewerFormat is a journaled command or a snapshot of a format newer than this build
// reads: written by a newer Holdfast. Refused, naming both formats, never read as an older
// one; the shard it belongs to does not start (a downgrade past a format change).
var ErrNewerFormat = errors.New("kernel: written by a newer build of Holdfast")

// AppendBinary appends the journal encoding of c: a version byte, then the fields as
// uvarints and length-prefixed strings in a fixed order. The encoding is canonical (one
// command, one byte string), which the command hash relies on.
func (c *Command) AppendBinary(b []byte) []byte {
	if c.Verb == contract.VerbConfigure {
		return appendShape(append(b, commandFormatConfigure, byte(c.Verb)), &c.Settings)
	}
	switch {
	case c.Group:
		return append(appendBundle(appendCommandBody(append(b, commandFormatGroup), c, true), c), byte(c.Phase), 2)
	case c.usesBundle() && c.Parallel:
		return append(appendBundle(appendCommandBody(append(b, commandFormatParallel), c, true), c), byte(c.Phase), 1)
	case c.usesBundle() && c.Phase != PhaseNone:
		return append(appendBundle(appendCommandBody(append(b, commandFormatEnding), c, true), c), byte(c.Phase))
	case c.usesBundle():
		return appendBundle(appendCommandBody(append(b, commandFormatBundle), c, true), c)
	case c.KeepFirst || c.KeepLast:
		b = append(b, commandFormatKeeps)
	case c.usesAllocators():
		b = append(b, commandFormatAllocators)
	case c.usesWork():
		b = append(b, commandFormatWork)
	default:
		b = append(b, commandFormat)
	}
	return appendCommandBody(b, c, true)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// appendBundle appends format 6's fields after the body.
func appendBundle(b []byte, c *Command) []byte {
	b = appendUvarint(b, uint64(len(c.Shards)))
	for _, s := range c.Shards {
		b = appendUvarint(b, uint64(s))
	}
	b = appendUvarint(appendUvarint(b, uint64(c.Txn.Shard)), c.Txn.LSN)
	b = appendUvarint(b, c.Priority)
	b = appendBool(b, c.Commit)
	b = appendUvarint(appendUvarint(b, uint64(c.Refusal)), uint64(c.RefusalMember))
	return append(b, byte(c.State))
}

func appendCommandBody(b []byte, c *Command, derived bool) []byte {
	alloc := c.usesAllocators() || c.usesBundle()
	work := alloc || c.usesWork()
	b = append(b, byte(c.Verb))
	b = appendString(b, c.Tenant)
	b = appendString(b, c.OperationID)
	b = appendString(b, c.ObjectID)
	b = appendUvarint(b, c.Capacity)
	b = appendUvarint(b, c.First)
	b = appendUvarint(b, c.Last)
	b = append(b, byte(c.Strategy))
	b = appendString(b, c.HolderID)
	b = appendUvarint(b, uint64(len(c.Members)))
	for i := range c.Members {
		b = appendMember(b, &c.Members[i], work)
	}
	b = appendBool(b, c.Activate)
	b = appendUvarint(b, c.TTLMillis)
	if derived {
		b = appendUvarint(b, c.TTLSlots)
	}
	b = appendUvarint(b, c.LeaseLSN)
	b = appendUvarint(b, c.Epoch)
	b = appendUvarint(b, c.Deadline)
	if !work {
		return b
	}
	b = appendString(b, c.Name)
	b = appendUvarint(b, uint64(len(c.Work)))
	for i := range c.Work {
		w := &c.Work[i]
		b = appendString(b, w.Name)
		b = appendString(b, w.Start)
		b = appendString(b, w.End)
		b = appendString(b, w.Metadata)
	}
	b = appendString(b, c.CursorKey)
	b = appendString(b, c.CursorToken)
	b = appendBool(b, c.HasCursor)
	b = appendString(b, c.Reason)
	b = appendString(b, c.SplitKey)
	b = appendUvarint(b, c.KeepAliveMillis)
	if derived {
		b = appendUvarint(b, c.KeepAliveSlots)
	}
	if !alloc {
		return b
	}
	b = appendLabels(b, c.Labels)
	b = appendUvarint(b, c.Value)
	b = appendBool(b, c.WholeLease)
	b = appendUvarint(b, uint64(len(c.Excluded)))
	for _, iv := range c.Excluded {
		b = appendUvarint(appendUvarint(b, iv.First), iv.Last)
	}
	b = appendBool(b, c.HasBand)
	b = appendUvarint(appendUvarint(b, c.Band.First), c.Band.Last)
	b = appendString(b, c.Format)
	b = appendString(appendString(b, c.Label.Key), c.Label.Value)
	b = appendUvarint(b, uint64(c.Limit))
	b = appendBool(b, c.Reclaim)
	b = appendUvarint(b, uint64(len(c.Imports)))
	for i := range c.Imports {
		im := &c.Imports[i]
		b = appendString(b, im.HolderID)
		b = appendUvarint(b, uint64(len(im.Members)))
		for j := range im.Members {
			b = appendMember(b, &im.Members[j], true)
		}
		b = appendBool(b, im.Activate)
		b = appendUvarint(b, im.TTLMillis)
		if derived {
			b = appendUvarint(b, im.TTLSlots)
		}
		b = appendUvarint(b, im.KeepAliveMillis)
		if derived {
			b = appendUvarint(b, im.KeepAliveSlots)
		}
		b = appendLabels(b, im.Labels)
	}
	if c.KeepFirst || c.KeepLast {
		b = append(b, keepBits(c))
	}
	return b
}

// keepBits is format 5's byte: the bounds a range.resize keeps.
func keepBits(c *Command) byte {
	var k byte
	if c.KeepFirst {
		k |= 1
	}
	if c.KeepLast {
		k |= 2
	}
	return k
}

func appendMember(b []byte, m *Member, work bool) []byte {
	b = append(b, byte(m.Kind))
	b = appendString(b, m.ID)
	b = appendUvarint(b, m.Quantity)
	b = appendBool(b, m.HasValue)
	b = appendUvarint(b, m.Value)
	if work {
		b = appendString(b, m.Name)
	}
	return b
}

func appendLabels(b []byte, ls []Label) []byte {
	b = appendUvarint(b, uint64(len(ls)))
	for _, l := range ls {
		b = appendString(appendString(b, l.Key), l.Value)
	}
	return b
}

// decoder reads the canonical encoding and remembers the first error, so callers check
// once at the end; every length is bounded before it is trusted.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = ErrBadCommand
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail()
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bool() bool {
	switch d.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail()
	return false
}

func (d *decoder) string(max int) string {
	n := d.uvarint()
	if n > uint64(max) || n > uint64(len(d.b)) {
		d.fail()
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// DecodeCommand decodes a journaled command into c, reusing c.Members' capacity.
func DecodeCommand(b []byte, c *Command) error {
	d := decoder{b: b}
	format := d.byte()
	if format == commandFormatConfigure {
		return decodeConfigure(&d, c)
	}
	if format > commandFormatGroup {
		return fmt.Errorf("%w: command format %d, and this build reads formats %d to %d", ErrNewerFormat, format, commandFormat, commandFormatGroup)
	}
	if format < commandFormat {
		return ErrBadCommand
	}
	c.Settings = Shape{}
	keeps := format == commandFormatKeeps
	parallel := format == commandFormatParallel
	group := format == commandFormatGroup
	ending := format == commandFormatEnding || parallel || group
	bundle := format == commandFormatBundle || ending
	alloc := format == commandFormatAllocators || keeps || bundle
	work := format == commandFormatWork || alloc
	c.Verb = Verb(d.byte())
	c.Tenant = d.string(maxEncodedString)
	c.OperationID = d.string(maxEncodedString)
	c.ObjectID = d.string(maxEncodedString)
	c.Capacity = d.uvarint()
	c.First = d.uvarint()
	c.Last = d.uvarint()
	c.Strategy = Strategy(d.byte())
	c.HolderID = d.string(maxEncodedString)
	n := d.uvarint()
	if n > maxEncodedMembers {
		d.fail()
		n = 0
	}
	c.Members = c.Members[:0]
	for i := uint64(0); i < n && d.err == nil; i++ {
		c.Members = append(c.Members, d.member(work))
	}
	c.Activate = d.bool()
	c.TTLMillis = d.uvarint()
	c.TTLSlots = d.uvarint()
	c.LeaseLSN = d.uvarint()
	c.Epoch = d.uvarint()
	c.Deadline = d.uvarint()
	c.Name, c.Work, c.CursorKey, c.CursorToken, c.HasCursor, c.Reason, c.SplitKey = "", c.Work[:0], "", "", false, "", ""
	c.KeepAliveMillis, c.KeepAliveSlots = 0, 0
	if work {
		c.Name = d.string(maxEncodedString)
		n := d.uvarint()
		if n > maxEncodedWork {
			d.fail()
			n = 0
		}
		for i := uint64(0); i < n && d.err == nil; i++ {
			c.Work = append(c.Work, WorkSpec{Name: d.string(maxEncodedString), Start: d.string(maxEncodedString),
				End: d.string(maxEncodedString), Metadata: d.string(maxEncodedBlob)})
		}
		c.CursorKey = d.string(maxEncodedString)
		c.CursorToken = d.string(maxEncodedBlob)
		c.HasCursor = d.bool()
		c.Reason = d.string(maxEncodedString)
		c.SplitKey = d.string(maxEncodedString)
		c.KeepAliveMillis = d.uvarint()
		c.KeepAliveSlots = d.uvarint()
	}
	c.Labels, c.Value, c.WholeLease, c.Excluded, c.HasBand, c.Band, c.Format = nil, 0, false, nil, false, Interval{}, ""
	c.Label, c.Limit, c.Reclaim, c.Imports = Label{}, 0, false, nil
	if alloc {
		d.allocatorFields(c)
	}
	c.KeepFirst, c.KeepLast = false, false
	if keeps {
		k := d.byte()
		c.KeepFirst, c.KeepLast = k&1 != 0, k&2 != 0
		if k == 0 || k > 3 || c.Verb != contract.VerbResizeRange {
			d.fail()
		}
	}
	c.Shards, c.Txn, c.Priority, c.Commit, c.Refusal, c.RefusalMember, c.State = c.Shards[:0], TxnRef{}, 0, false, 0, 0, 0
	c.Phase, c.Parallel, c.Group = PhaseNone, false, group
	if bundle {
		d.bundleFields(c)
	}
	if ending {
		c.Phase = Phase(d.byte())
		if !c.Phase.fits(c) && !(group && c.Phase == PhaseNone && c.Verb != contract.VerbImport) {
			d.fail()
		}
	}
	if group && (d.byte() != 2 || !c.groupShaped()) {
		d.fail()
	}
	if parallel {
		c.Parallel = d.byte() == 1
		if !c.Parallel || c.Verb != contract.VerbReserve || c.Phase != PhaseEnding {
			d.fail()
		}
	}
	if d.err != nil {
		return d.err
	}
	if bundle {
		if len(d.b) != 0 || !c.usesBundle() {
			return ErrBadCommand
		}
		return nil
	}
	if len(d.b) != 0 || !(c.Verb.IsWrite() || c.Verb.IsInternal()) || c.Verb == contract.VerbConfigure || c.Strategy >= strategyCount {
		return ErrBadCommand
	}
	// One encoding per command: a command that needs a newer format is never in an
	// older one, nor the other way round.
	switch {
	case c.usesAllocators() != alloc:
		return ErrBadCommand
	case !alloc && c.usesWork() != work:
		return ErrBadCommand
	}
	return nil
}

func (d *decoder) member(work bool) Member {
	var m Member
	m.Kind = MemberKind(d.byte())
	m.ID = d.string(maxEncodedString)
	m.Quantity = d.uvarint()
	m.HasValue = d.bool()
	m.Value = d.uvarint()
	if work {
		m.Name = d.string(maxEncodedString)
	}
	return m
}

func (d *decoder) labels() []Label {
	n := d.uvarint()
	if n > contract.MaxLabels {
		d.fail()
		return nil
	}
	var ls []Label
	for i := uint64(0); i < n && d.err == nil; i++ {
		ls = append(ls, Label{Key: d.string(maxEncodedString), Value: d.string(maxEncodedString)})
	}
	return ls
}

// count reads a length and fails past max.
func (d *decoder) count(max uint64) uint64 {
	n := d.uvarint()
	if n > max {
		d.fail()
		return 0
	}
	return n
}

// bundleFields reads format 6's fields after format 4's body.
func (d *decoder) bundleFields(c *Command) {
	n := d.count(maxEncodedMembers)
	for i := uint64(0); i < n && d.err == nil; i++ {
		c.Shards = append(c.Shards, uint32(d.count(math.MaxUint32)))
	}
	c.Txn = TxnRef{Shard: uint32(d.count(math.MaxUint32)), LSN: d.uvarint()}
	c.Priority = d.uvarint()
	c.Commit = d.bool()
	c.Refusal = Code(d.count(255))
	c.RefusalMember = uint32(d.count(maxEncodedMembers))
	c.State = LeaseState(d.byte())
	if c.State > LeaseConsumed || (len(c.Shards) > 0 && len(c.Shards) != len(c.Members) && c.Verb != contract.VerbImport) {
		d.fail()
	}
}

// allocatorFields reads format 4's fields after format 2's.
func (d *decoder) allocatorFields(c *Command) {
	c.Labels = d.labels()
	c.Value = d.uvarint()
	c.WholeLease = d.bool()
	for i, n := uint64(0), d.count(contract.MaxExcluded); i < n && d.err == nil; i++ {
		c.Excluded = append(c.Excluded, Interval{First: d.uvarint(), Last: d.uvarint()})
	}
	c.HasBand = d.bool()
	c.Band = Interval{First: d.uvarint(), Last: d.uvarint()}
	c.Format = d.string(maxEncodedString)
	c.Label = Label{Key: d.string(maxEncodedString), Value: d.string(maxEncodedString)}
	c.Limit = uint32(d.count(contract.MaxBulkLimit))
	c.Reclaim = d.bool()
	for i, n := uint64(0), d.count(contract.MaxImportLeases); i < n && d.err == nil; i++ {
		im := ImportLease{HolderID: d.string(maxEncodedString)}
		for j, m := uint64(0), d.count(maxEncodedMembers); j < m && d.err == nil; j++ {
			im.Members = append(im.Members, d.member(true))
		}
		im.Activate = d.bool()
		im.TTLMillis, im.TTLSlots = d.uvarint(), d.uvarint()
		im.KeepAliveMillis, im.KeepAliveSlots = d.uvarint(), d.uvarint()
		im.Labels = d.labels()
		c.Imports = append(c.Imports, im)
	}
}

// appendShape appends a shape's fields in a fixed order: configure entries and snapshots.
func appendShape(b []byte, s *Shape) []byte {
	for _, v := range [...]uint64{s.Version, s.SlotMillis, s.DedupeWindowSlots, s.HistoryWindowSlots} {
		b = appendUvarint(b, v)
	}
	for _, v := range [...]int{s.MaxResources, s.MaxPools, s.MaxRanges, s.MaxLeases, s.MaxMembers, s.MaxOperations,
		s.MaxExpirations, s.MaxRangeValues, s.MaxRuns, s.MaxWork} {
		b = appendUvarint(b, uint64(v))
	}
	return b
}

// shape reads what appendShape wrote; a bound past any a shape may have fails.
func (d *decoder) shape() Shape {
	var s Shape
	s.Version, s.SlotMillis, s.DedupeWindowSlots, s.HistoryWindowSlots = d.uvarint(), d.uvarint(), d.uvarint(), d.uvarint()
	for _, p := range [...]*int{&s.MaxResources, &s.MaxPools, &s.MaxRanges, &s.MaxLeases, &s.MaxMembers, &s.MaxOperations,
		&s.MaxExpirations, &s.MaxRangeValues, &s.MaxRuns, &s.MaxWork} {
		v := d.uvarint()
		if v > maxTableBound {
			d.fail()
		}
		*p = int(min(v, maxTableBound))
	}
	return s
}

// decodeConfigure decodes the body of a configure entry (after its format byte).
func decodeConfigure(d *decoder, c *Command) error {
	*c = Command{Verb: Verb(d.byte()), Members: c.Members[:0], Work: c.Work[:0]}
	c.Settings = d.shape()
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 || c.Verb != contract.VerbConfigure {
		return ErrBadCommand
	}
	return nil
}
