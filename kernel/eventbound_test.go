package kernel

import "fmt"

// eventBoundBroken names an entry that yielded more events than EventBound promises (a
// shard counts its unpublished events by the bound, actors.Sequencer); "" when it holds.
// Every harness that applies entries asks it after each step.
func eventBoundBroken(c *Command, out *Output) string {
	if n, bound := eventsOf(out), EventBound(c); n > bound {
		return fmt.Sprintf("%s yielded %d events, EventBound says at most %d", c.Verb, n, bound)
	}
	return ""
}

// eventsOf is how many events an entry's output yields, as the runtime derives them
// (actors.appendEvents): its one event (if any), and one per lease in Changes.
func eventsOf(o *Output) int {
	n := len(o.Changes)
	if o.Event != EventNone {
		n++
	}
	return n
}
