package bridge

import (
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/contract"
)

// noSuchVerb answers a request whose subject names no verb (<prefix>.v1.<tenant>.
// <object>.<action> with an unknown object.action): invalid_request, naming the nearest
// verb when one is close, so that a typo reads as a typo and not as a stopped server.
func (b *Bridge) noSuchVerb(m *nats.Msg) {
	if m.Reply == "" {
		return
	}
	asked := verbOf(m.Subject)
	text := fmt.Sprintf("no such verb %q (subject %s)", asked, m.Subject)
	if near := nearestVerb(asked, b.specs); near != "" {
		text += fmt.Sprintf("; did you mean %q?", near)
	}
	text += " The verbs: docs/api.md, or `nats micro info " + ServiceName + "`."
	proto := isProtobuf(m.Header)
	body, err := marshalReply(rejectionReply(contract.CodeInvalidRequest, text), proto)
	if err != nil {
		return
	}
	if err := b.nc.PublishMsg(replyMsg(m.Reply, proto, contract.CodeInvalidRequest, body)); err != nil {
		b.log.Debug("answering an unknown verb", "subject", m.Subject, "err", err)
	}
}

// nearestVerb is the verb closest to asked by edit distance, if it is close: at most a
// third of the longer name's letters apart.
func nearestVerb(asked string, specs []*verbSpec) string {
	best, bestD := "", -1
	for _, s := range specs {
		name := s.verb.String()
		if d := editDistance(asked, name); bestD < 0 || d < bestD {
			best, bestD = name, d
		}
	}
	if bestD < 0 || 3*bestD > max(len(asked), len(best)) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance of a and b (bytes; verb names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
