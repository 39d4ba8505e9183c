package actors

import (
	"testing"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
)

// A lease.revoking event says why: an expiry entry (a lapsed keep-alive) or anything
// else (an operator's revoke, one lease of a revoke_all).
func TestRevokingEventsSayWhy(t *testing.T) {
	for _, tc := range []struct {
		verb contract.Verb
		want string
	}{
		{contract.VerbExpire, contract.RevokeReasonKeepAlive},
		{contract.VerbRevoke, contract.RevokeReasonOperator},
		{contract.VerbRevokeAll, contract.RevokeReasonOperator},
	} {
		out := kernel.Output{Event: kernel.EventLeaseRevoking, Object: kernel.ObjectLease}
		if tc.verb == contract.VerbRevokeAll {
			out = kernel.Output{Changes: []kernel.LeaseChange{{Event: kernel.EventLeaseRevoking}}}
		}
		evs := appendEvents(nil, 0, 0, kernel.Entry{LSN: 7, Cmd: &kernel.Command{Verb: tc.verb}}, &out)
		if len(evs) != 1 || evs[0].Reason != tc.want {
			t.Errorf("%s: %+v, want reason %q", tc.verb, evs, tc.want)
		}
	}
	out := kernel.Output{Event: kernel.EventLeaseExpired, Object: kernel.ObjectLease}
	if evs := appendEvents(nil, 0, 0, kernel.Entry{LSN: 8, Cmd: &kernel.Command{Verb: contract.VerbExpire}}, &out); evs[0].Reason != "" {
		t.Errorf("lease.expired carries a reason: %q", evs[0].Reason)
	}
}
