package bridge

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/messages"
)

// Holder identity (docs/api.md §A.12). By default a holder_id is a name the request gives:
// whoever knows it may act as that holder. With Holders.Bound a holder_id belongs to a
// NATS user: the request must come from that user — the NATS server says who in the
// Nats-Request-Info header it sets when a request crosses a service import that shares
// its callers (`share: true`), and replaces whatever header a client sent — and it may
// name the user itself or any holder under "<user>/". Operators act for any holder. Views
// show a lease's holder only to that holder and to operators. The journal never sees any
// of this: it is decided before a command is sequenced, and on the way out.

// Holders is how the service treats holder ids.
type Holders struct {
	// Bound: a holder_id must belong to the calling NATS user (--holders bound).
	Bound bool
	// Operators are the NATS users that act for any holder and see every holder
	// (--operators), as "user" or "ACCOUNT/user".
	Operators []string
}

// requestInfoHeader is where nats-server names a request's caller as it crosses a service
// import (server.ClientInfoHdr).
const requestInfoHeader = "Nats-Request-Info"

// caller is who sent a request, as its NATS server says.
type caller struct {
	account, user string
	operator      bool
}

// callerOf reads a request's caller from its Nats-Request-Info header; an unnamed user
// (no header, or an import that does not share its callers) is the zero caller, who holds
// nothing and sees no holder.
func (h *Holders) callerOf(hdr nats.Header) caller {
	v := hdr.Get(requestInfoHeader)
	if v == "" {
		return caller{}
	}
	var info struct {
		Account string `json:"acc"`
		User    string `json:"user"`
	}
	if json.Unmarshal([]byte(v), &info) != nil || info.User == "" {
		return caller{}
	}
	cl := caller{account: info.Account, user: info.User}
	cl.operator = slices.Contains(h.Operators, info.User) || slices.Contains(h.Operators, info.Account+"/"+info.User)
	return cl
}

// mayHold reports whether the caller may act as, and see, holder h.
func (cl caller) mayHold(h string) bool {
	return cl.operator || (cl.user != "" && (h == cl.user || strings.HasPrefix(h, cl.user+"/")))
}

// operatorVerbs act on whoever holds a lease without naming a holder: with bound
// holders, an operator's alone.
var operatorVerbs = []contract.Verb{contract.VerbRevoke, contract.VerbReclaim, contract.VerbRevokeValue,
	contract.VerbReclaimValue, contract.VerbRevokeAll}

// authorize checks a prepared request against its caller: every holder_id it names must
// be the caller's, and the verbs that act for any holder are an operator's.
func (h *Holders) authorize(c *call) *kernel.Rejection {
	cl := c.caller
	deny := func(holder string) *kernel.Rejection {
		who := "a caller the NATS server does not name (the tenant's service import must share its callers: share: true)"
		if cl.user != "" {
			who = "NATS user " + cl.user
		}
		return &kernel.Rejection{Code: contract.CodePermissionDenied,
			Message: "holder_id: " + holder + " is not a holder " + who + " may act as (holders are bound to NATS users: the user's name, or one under \"<user>/\")"}
	}
	if c.op.cmd != nil {
		if c.op.cmd.HolderID != "" && !cl.mayHold(c.op.cmd.HolderID) {
			return deny(c.op.cmd.HolderID)
		}
		for i := range c.op.cmd.Imports {
			if hid := c.op.cmd.Imports[i].HolderID; !cl.mayHold(hid) {
				return deny(hid)
			}
		}
	}
	if c.spec.verb == contract.VerbListLeases && c.op.read.ID != "" && !cl.mayHold(c.op.read.ID) {
		return deny(c.op.read.ID)
	}
	if slices.Contains(operatorVerbs, c.spec.verb) && !cl.operator {
		return &kernel.Rejection{Code: contract.CodePermissionDenied,
			Message: c.spec.verb.String() + ": an operator's (--operators), since it acts for any holder"}
	}
	return nil
}

// redact clears the holder of every lease view in m that the caller may not see: the
// lease, its members and its state stay.
func (cl caller) redact(m *messages.Reply) {
	hide := func(l *messages.Lease) {
		if l != nil && l.HolderId != "" && !cl.mayHold(l.HolderId) {
			l.HolderId = ""
		}
	}
	hide(m.Lease)
	for _, l := range m.Leases {
		hide(l)
	}
	for _, a := range m.Allocations {
		hide(a.Lease)
	}
}
