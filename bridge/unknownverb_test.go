package bridge

import (
	"strings"
	"testing"

	"github.com/holdfast/holdfast/messages"
)

func TestNearestVerb(t *testing.T) {
	specs := verbSpecs()
	for asked, want := range map[string]string{
		"lease.reserv":   "lease.reserve",
		"lease.reserves": "lease.reserve",
		"leases.get":     "lease.get",
		"lease.relase":   "lease.release",
		"pool.creat":     "pool.create",
		"range.lookp":    "range.lookup",
		"banana.split":   "",
		"x.y":            "",
	} {
		if got := nearestVerb(asked, specs); got != want {
			t.Errorf("nearestVerb(%q) = %q, want %q", asked, got, want)
		}
	}
}

// A request on a subject that names no verb is answered — invalid_request naming the
// nearest verb — not left to NATS's "no responders", which reads as a stopped server.
func TestUnknownVerbIsAnswered(t *testing.T) {
	s := startStack(t, startNATS(t), stackOptions{})
	r := s.req("acme", "lease.reserv", `{"holder_id":"h"}`).want(t, "invalid_request")
	if r.typ.Category != "definite" || !strings.Contains(r.typ.Message, `no such verb "lease.reserv"`) ||
		!strings.Contains(r.typ.Message, `did you mean "lease.reserve"`) {
		t.Fatalf("reply %s", r.raw)
	}
	if got := r.msg.Header.Get("Nats-Service-Error-Code"); got != "400" {
		t.Fatalf("error code header %q", got)
	}
	r = s.req("acme", "bananas.split", `{}`).want(t, "invalid_request")
	if strings.Contains(r.typ.Message, "did you mean") {
		t.Fatalf("a far-off verb got a suggestion: %s", r.raw)
	}
	p, _ := s.preq("acme", "pool.creat", &messages.CreatePoolRequest{})
	if p.Code != "invalid_request" || !strings.Contains(p.Message, `"pool.create"`) {
		t.Fatalf("protobuf: %+v", p)
	}
	// Real verbs still go to their endpoints.
	s.req("acme", "resource.create", `{"operation_id":"c1","resource_id":"a"}`).want(t, "ok")
}
