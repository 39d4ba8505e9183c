package check

import (
	"fmt"
	"sort"
	"strings"
)

// Checker names.
const (
	CReplies     = "replies"           // every reply is well formed and its code allowed for its verb
	CDedupe      = "no-duplicate-exec" // one operation id → one lsn → one result
	CAmbiguity   = "ambiguity"         // every indefinite outcome resolves to one committed result
	CRealtime    = "realtime-order"    // positions (lsn, applied_lsn) respect real time per shard
	CFence       = "read-fence"        // min_lsn reads
	CEvents      = "events"            // the event stream matches the committed history one to one
	CDoubleGrant = "no-double-grant"   // no resource, value or pool unit held twice
	CExpiry      = "no-early-expiry"   // expiry and lease_expired only at or after the deadline slot
	CFencing     = "fencing"           // stale epochs refused, never ok
	CIsolation   = "isolation"         // other tenants' and unknown ids read as absent
	CLinear      = "linearizability"   // porcupine, per resource, pool, range and holder
)

// AllCheckers lists every checker in the order they run.
var AllCheckers = []string{CReplies, CDedupe, CAmbiguity, CRealtime, CFence, CEvents, CDoubleGrant, CExpiry, CFencing, CIsolation, CLinear}

// Violation is one broken promise, with the smallest excerpt of the history that shows it.
type Violation struct {
	Checker string
	Message string
	Excerpt []string
}

func (v Violation) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s: %s", v.Checker, v.Message)
	for _, e := range v.Excerpt {
		sb.WriteString("\n    ")
		sb.WriteString(e)
	}
	return sb.String()
}

// Report is the outcome of every checker on one round.
type Report struct {
	Round      int
	Violations []Violation
	// Checked counts what each checker looked at (operations, events, partitions...).
	Checked map[string]int
	Notes   []string
	Stats   Stats
}

// Stats summarizes a round's history.
type Stats struct {
	Ops, Writes, Reads, Committed, Attempts int
	Indefinite                              map[string]int // indefinite outcomes by code / transport error
	Unresolved                              int
	Events                                  int
	Faults                                  map[string]int
	Partitions                              int
	Codes                                   map[string]int // committed codes by verb:code
}

// OK reports whether no checker found a violation.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

// maxPerChecker bounds the violations reported per checker (the count is kept).
const maxPerChecker = 5

func (r *Report) add(checker, msg string, excerpt ...string) {
	n := 0
	for _, v := range r.Violations {
		if v.Checker == checker {
			n++
		}
	}
	if n == maxPerChecker {
		r.Notes = append(r.Notes, fmt.Sprintf("%s: more violations not shown", checker))
	}
	if n >= maxPerChecker {
		r.Checked[checker+":violations-hidden"]++
		return
	}
	r.Violations = append(r.Violations, Violation{Checker: checker, Message: msg, Excerpt: excerpt})
}

func (r *Report) count(checker string, n int) { r.Checked[checker] += n }

// Has reports whether a checker found a violation.
func (r *Report) Has(checker string) bool {
	for _, v := range r.Violations {
		if v.Checker == checker {
			return true
		}
	}
	return false
}

// String renders the report.
func (r *Report) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "round %d: %d ops (%d writes, %d reads, %d attempts), %d events, %d partitions",
		r.Round, r.Stats.Ops, r.Stats.Writes, r.Stats.Reads, r.Stats.Attempts, r.Stats.Events, r.Stats.Partitions)
	if len(r.Stats.Faults) > 0 {
		fmt.Fprintf(&sb, ", faults %s", fmtCounts(r.Stats.Faults))
	}
	if len(r.Stats.Indefinite) > 0 {
		fmt.Fprintf(&sb, ", indefinite %s", fmtCounts(r.Stats.Indefinite))
	}
	sb.WriteString("\n")
	for _, c := range AllCheckers {
		status := "ok"
		if r.Has(c) {
			status = "VIOLATED"
		}
		fmt.Fprintf(&sb, "  %-18s %-8s (%d checked)\n", c, status, r.Checked[c])
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&sb, "  note: %s\n", n)
	}
	for _, v := range r.Violations {
		sb.WriteString("  ")
		sb.WriteString(v.String())
		sb.WriteString("\n")
	}
	return sb.String()
}

func fmtCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

// FmtCounts renders counts as "a=1 b=2", sorted by key.
func FmtCounts(m map[string]int) string { return fmtCounts(m) }

func opLines(ops ...*Op) []string {
	out := make([]string, 0, len(ops))
	for _, o := range ops {
		if o != nil {
			out = append(out, o.String())
		}
	}
	return out
}

func attemptLines(op *Op) []string {
	out := []string{op.String()}
	for _, a := range op.Attempts {
		s := fmt.Sprintf("  attempt %d [%s–%s] ", a.Rec.Attempt, fmtTime(a.Rec.Invoke), fmtTime(a.Rec.Return))
		if a.Reply == nil {
			s += "no reply: " + a.Rec.Err
		} else {
			s += a.Reply.Outcome + " " + replyString(a.Reply)
			if a.Reply.Category != "" {
				s += " (" + a.Reply.Category + ")"
			}
		}
		out = append(out, s)
	}
	return out
}
