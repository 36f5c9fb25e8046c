package crypto

import (
	"encoding/binary"
	"sync/atomic"
)

// initFilterSlots is the number of recent initiations an InitiationFilter
// remembers (8 bytes each).
const initFilterSlots = 4096

// InitiationFilter remembers the mac1 of recent initiations, so that a
// byte-for-byte replay of one is dropped in silence before it is counted
// towards the load or answered (with a cookie reply under load, or with a
// DH and a refusal otherwise). A genuine initiator never sends the same
// initiation twice: every attempt has a fresh ephemeral and seed, so a
// fresh mac1. Direct-mapped, lock-free and allocation-free: a slot holds
// 64 bits of one mac1, indexed by 12 others; a newer initiation in the same
// slot evicts it. Safe for concurrent use by all shards.
type InitiationFilter struct {
	slots [initFilterSlots]atomic.Uint64
}

// Seen records the mac1 of dgram, an initiation Classify accepted, and
// reports whether it was already recorded: a replay (or a duplicate the
// network made).
func (f *InitiationFilter) Seen(dgram []byte) bool {
	if Mac1Covered(len(dgram)) == 0 {
		return false
	}
	m := mac1Of(dgram)
	v := binary.LittleEndian.Uint64(m[:8]) | 1 // 0 is an empty slot
	i := binary.LittleEndian.Uint16(m[8:10]) % initFilterSlots
	return f.slots[i].Swap(v) == v
}
