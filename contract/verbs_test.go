package contract

import (
	"strings"
	"testing"
)

// Every endpoint of the contract, its subject, and its kind.
func TestVerbs(t *testing.T) {
	var names []string
	reads := 0
	for _, v := range Verbs() {
		names = append(names, v.String())
		if v.IsRead() == v.IsWrite() {
			t.Errorf("%s: read %v write %v", v, v.IsRead(), v.IsWrite())
		}
		if v.IsRead() {
			reads++
		}
	}
	want := "resource.create pool.create range.create lease.reserve lease.activate lease.renew lease.release " +
		"lease.revoke lease.reclaim resource.get pool.get range.get lease.get lease.list cluster.status " +
		"run.create run.register run.complete run.fail run.cancel work.checkpoint work.complete work.park work.unpark " +
		"work.split_replace work.split_residual run.get work.get resource.delete pool.delete range.delete run.delete " +
		"resource.list pool.list range.list run.list range.lookup range.allocations range.release range.revoke range.reclaim " +
		"range.exclude range.include range.resize pool.resize lease.consume lease.import lease.release_all lease.revoke_all " +
		"pool.holdings work.list"
	if got := strings.Join(names, " "); got != want || reads != 16 {
		t.Errorf("verbs %q (%d reads), want %q", got, reads, want)
	}
	if s := VerbReserve.Subject("acme.hf", "t1"); s != "acme.hf.v1.t1.lease.reserve" {
		t.Errorf("subject %q", s)
	}
	if VerbExpire.IsWrite() || VerbExpire.IsRead() || !VerbExpire.IsLeaseVerb() || Verb(200).String() != "unknown" {
		t.Error("internal and unknown verbs")
	}
}
