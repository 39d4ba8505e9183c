package kernel

import (
	"encoding/binary"

	"github.com/holdfast/holdfast/contract"
)

// What only old snapshot formats need, read into the current in-memory form (Restore
// reads the rest of formats 2 to 7 with the current one's code, field by field as each
// format added them).

// restoreOutcomesV2 reads format 2's operation records (commit order, with verb and
// object reference) into the two queues. The epoch a lease verb's reply carried follows
// from its verb: 1 for reserve, activate and renew, 2 for release, revoke and reclaim.
func restoreOutcomesV2(k *Kernel, d *decoder, n int) {
	for i := 0; i < n && d.err == nil; i++ {
		if len(d.b) < 24 {
			d.fail()
			return
		}
		op := outcome{keyHi: binary.LittleEndian.Uint64(d.b), keyLo: uint32(binary.LittleEndian.Uint64(d.b[8:])),
			hash: binary.LittleEndian.Uint64(d.b[16:])}
		d.b = d.b[24:]
		verb := Verb(d.byte())
		op.code = Code(d.byte())
		member := d.uvarint()
		if member > maxEncodedMembers {
			d.fail()
			return
		}
		op.member = int16(member) - 1
		op.lsn, _, op.retireAfter = d.uvarint(), d.uvarint(), d.uvarint()
		if op.code == contract.CodeOK {
			op.epoch = v2Epochs[verb]
		}
		k.ops.push(op)
	}
}

// v2Epochs is the epoch a format 2 lease verb's ok reply carried, by verb.
var v2Epochs = map[Verb]uint8{
	contract.VerbReserve: 1, contract.VerbActivate: 1, contract.VerbRenew: 1,
	contract.VerbRelease: 2, contract.VerbRevoke: 2, contract.VerbReclaim: 2,
}
