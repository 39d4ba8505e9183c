package kernel

import "fmt"

// eventBoundBroken names an entry that yielded more events than EventBound promises (a
// shard counts its unpublished events by the bound, actors.Sequencer); "" when it holds.
// Every harness that applies entries asks it after each step.
func eventBoundBroken(c *Command, out *Output) string {
	if n, bound := out.Events(), EventBound(c); n > bound {
		return fmt.Sprintf("%s yielded %d events, EventBound says at most %d", c.Verb, n, bound)
	}
	return ""
}
