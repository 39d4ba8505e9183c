package contract

import "testing"

func TestIDRules(t *testing.T) {
	for _, c := range []struct {
		s                  string
		tenant, object, op bool
	}{
		{"a", true, true, true},
		{"A-b_c", true, true, true},
		{"-a", true, false, false},
		{"a:b/c@d+e", false, true, true},
		{"", false, false, false},
		{"a b", false, false, false},
		{"a\x01b", false, false, false},
		{string(make([]byte, 65)), false, false, false},
	} {
		if ValidTenant(c.s) != c.tenant || ValidObjectID(c.s) != c.object || ValidOperationID(c.s) != c.op {
			t.Errorf("%q: tenant %v object %v operation %v", c.s, ValidTenant(c.s), ValidObjectID(c.s), ValidOperationID(c.s))
		}
	}
	long := "a" + string(make([]byte, 0))
	for len(long) < 65 {
		long += "b"
	}
	if ValidOperationID(long) || !ValidObjectID(long) || ValidTenant(long) {
		t.Errorf("65 characters: operation %v object %v tenant %v", ValidOperationID(long), ValidObjectID(long), ValidTenant(long))
	}
}

func TestLeaseIDs(t *testing.T) {
	for _, s := range []string{"0-1", "7-42", "4294967295-18446744073709551615"} {
		sh, lsn, ok := ParseLeaseID(s)
		if !ok || FormatLeaseID(sh, lsn) != s || string(AppendLeaseID(nil, sh, lsn)) != s {
			t.Errorf("%q: %d %d %v", s, sh, lsn, ok)
		}
	}
	for _, s := range []string{"", "-", "1-", "-1", "1-0", "01-1", "1-01", "4294967296-1", "1-18446744073709551616", "a-1", "1-2-3"} {
		if _, _, ok := ParseLeaseID(s); ok {
			t.Errorf("%q parsed as a lease id", s)
		}
	}
}

func TestPlacement(t *testing.T) {
	if PlacementKey("node14/gpu0") != "node14" || PlacementKey("seat") != "seat" || PlacementKey("/x") != "" {
		t.Error("placement key")
	}
	// The shard function is part of every deployment's data: it must never change.
	if got := [...]uint32{ShardOf("default", "node14", 8), ShardOf("t1", "seat-21A", 8), ShardOf("tenant-x", "k", 1024), ShardOf("t1", "x", 1)}; got != [...]uint32{3, 2, 593, 0} {
		t.Errorf("shards: %v, want [3 2 593 0] (as every existing deployment placed them)", got)
	}
}

func TestValidPrefix(t *testing.T) {
	for _, p := range []string{"holdfast", "acme.holdfast", "a-b_c"} {
		if err := ValidPrefix(p); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
	for _, p := range []string{"", "a.", ".a", "a..b", "a.*", "a.>", "a b", "a\x01b", "a\x7fb"} {
		if ValidPrefix(p) == nil {
			t.Errorf("%q accepted", p)
		}
	}
}
