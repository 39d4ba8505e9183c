package persistence

import "fmt"

// position is the lsn and slot of the last record of a log; lsn 0 means the log is empty.
type position struct {
	lsn, slot uint64
}

// orderProblem says why a record at lsn and slot cannot follow tail, or "" when it can. The
// same rule guards Append, recovery and Replay, so a log that was accepted once is always
// read back the same way: lsns strictly consecutive (any lsn >= 1 may start an empty log,
// e.g. after a snapshot) and slots never going back.
func orderProblem(tail position, lsn, slot uint64) string {
	switch {
	case lsn == 0:
		return "lsn 0 is not a valid log position"
	case tail.lsn != 0 && lsn != tail.lsn+1:
		return fmt.Sprintf("lsn %d does not follow lsn %d", lsn, tail.lsn)
	case slot < tail.slot:
		return fmt.Sprintf("slot %d goes back from slot %d", slot, tail.slot)
	}
	return ""
}
