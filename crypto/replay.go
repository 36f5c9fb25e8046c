package crypto

// Replay window after RFC 6479: a ring of 64-bit blocks indexed by counter,
// so advancing the window clears whole blocks instead of shifting a bitmap,
// and checking a counter is one load and one mask.
const (
	replayBlockBits = 6 // log2(64)
	replayBlocks    = 256
	replayRingBits  = replayBlocks << replayBlockBits
	// ReplayWindow is how far behind the highest accepted counter a packet
	// may still be accepted (one block is always being refilled).
	ReplayWindow = replayRingBits - 64
)

// Replay tracks which counters of one receive lane were seen. It is not
// safe for concurrent use: it belongs to the shard that owns the lane.
type Replay struct {
	top    uint64 // highest accepted counter + 1 (0: nothing accepted yet)
	blocks [replayBlocks]uint64
}

// Check reports whether counter may still be accepted. It changes nothing,
// so it is safe to call before the (expensive) AEAD open.
func (r *Replay) Check(counter uint64) bool {
	if counter >= RejectAfterMessages {
		return false
	}
	if counter+1 > r.top {
		return true
	}
	if r.top-counter > ReplayWindow {
		return false
	}
	blk := (counter >> replayBlockBits) % replayBlocks
	return r.blocks[blk]&(1<<(counter&63)) == 0
}

// Commit marks counter as seen. Call it only after the AEAD open succeeded,
// so forged packets cannot move the window. It reports false (and changes
// nothing) if the counter is not acceptable.
func (r *Replay) Commit(counter uint64) bool {
	if !r.Check(counter) {
		return false
	}
	if counter+1 > r.top {
		// Clear the blocks the window slides over.
		cur := (r.top + 63) >> replayBlockBits // first block not yet valid
		if r.top == 0 {
			cur = 0
		}
		idx := counter >> replayBlockBits
		if idx+1 > cur {
			n := idx + 1 - cur
			if n > replayBlocks {
				n = replayBlocks
			}
			for i := uint64(0); i < n; i++ {
				r.blocks[(cur+i)%replayBlocks] = 0
			}
		}
		r.top = counter + 1
	}
	blk := (counter >> replayBlockBits) % replayBlocks
	r.blocks[blk] |= 1 << (counter & 63)
	return true
}

// Reset forgets every counter (new keys).
func (r *Replay) Reset() { *r = Replay{} }
