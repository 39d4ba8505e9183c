package check

import (
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/holdfast/holdfast/integration/internal/history"
)

// Options tunes a check.
type Options struct {
	Lin LinOptions
	// Skip names checkers not to run (for unit tests of one checker).
	Skip map[string]bool
	// Forwarding says the target resends a request on the client's behalf: a cluster's
	// front door sends a forwarded request again (same body, same operation id) when the
	// shard's owner answered engine_halted or timed out, so a client's first send may be
	// answered from the retry cache — the command ran once, on the first forward. One
	// execution per operation id is still checked (one result, one lsn, the log).
	Forwarding bool
}

// Round checks the records of one round with every checker.
func Round(recs []history.Record, opt Options) *Report {
	h := Build(recs)
	rep := &Report{Round: h.Meta.Round, Checked: map[string]int{}}
	rep.Stats.Indefinite = map[string]int{}
	rep.Stats.Faults = map[string]int{}
	rep.Stats.Codes = map[string]int{}
	for _, f := range h.Faults {
		rep.Stats.Faults[f.Fault]++
	}
	for _, op := range h.Ops {
		if op.Intent == history.IntentHostile {
			continue
		}
		rep.Stats.Ops++
		rep.Stats.Attempts += len(op.Attempts)
		if op.Write {
			rep.Stats.Writes++
		} else {
			rep.Stats.Reads++
		}
		if op.Status == Committed {
			rep.Stats.Committed++
			rep.Stats.Codes[op.Verb+":"+op.Result.Code]++
		}
	}
	run := func(name string, f func()) {
		if !opt.Skip[name] {
			f()
		}
	}
	run(CReplies, func() { checkReplies(h, rep) })
	run(CDedupe, func() { checkDedupe(h, rep, opt.Forwarding) })
	run(CAmbiguity, func() { checkAmbiguity(h, rep) })
	run(CRealtime, func() { checkRealtime(h, rep) })
	run(CFence, func() { checkFence(h, rep) })
	run(CIsolation, func() { checkIsolation(h, rep) })
	w := buildWorld(h)
	run(CEvents, func() { checkEvents(w, rep) })
	run(CDoubleGrant, func() { checkDoubleGrant(w, rep) })
	run(CExpiry, func() { checkExpiry(w, rep) })
	run(CFencing, func() { checkFencing(w, rep) })
	run(CLinear, func() { checkLinear(w, rep, opt.Lin) })
	return rep
}

// Rounds splits records by round, in order.
func Rounds(recs []history.Record) map[int][]history.Record {
	out := map[int][]history.Record{}
	for _, r := range recs {
		out[r.Round] = append(out[r.Round], r)
	}
	return out
}

// File checks every round of a history file. Rounds are checked one at a time as the
// file is read (a soak's history does not fit in memory at once): a round is checked when
// the file moves on to a later one.
func File(path string, opt Options) ([]*Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []*Report
	pending := map[int][]history.Record{}
	done := map[int]bool{}
	flush := func(below int) {
		ids := make([]int, 0, len(pending))
		for id := range pending {
			if id < below {
				ids = append(ids, id)
			}
		}
		sort.Ints(ids)
		for _, id := range ids {
			start := time.Now()
			rep := Round(pending[id], opt)
			rep.Notes = append(rep.Notes, fmt.Sprintf("checked in %v", time.Since(start).Round(time.Millisecond)))
			out = append(out, rep)
			delete(pending, id)
			done[id] = true
		}
	}
	maxRound := 0
	err = history.Scan(f, func(r history.Record) error {
		if done[r.Round] {
			return fmt.Errorf("a record of round %d after that round was checked", r.Round)
		}
		if r.Round > maxRound {
			flush(r.Round)
			maxRound = r.Round
		}
		pending[r.Round] = append(pending[r.Round], r)
		return nil
	})
	if err != nil {
		return out, err
	}
	flush(maxRound + 1)
	return out, nil
}
