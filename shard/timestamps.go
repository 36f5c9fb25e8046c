package shard

import (
	"time"

	"github.com/yip-router/yip-router/shard/tcpts"
)

// A TCP segment FEC recovered arrives after segments sent later; if the
// sender retransmitted meanwhile, the receiving host's PAWS check drops it
// as older than the retransmission it already took, and the sender then
// sees the loss FEC had repaired (shard/tcpts says how, and what raising
// its timestamp costs). So while a lane receives parity, it notes for each
// TCP flow the packets it delivers - the highest sequence, and the newest
// timestamp value of a segment below it (a retransmission) - and raises a
// recovered segment's timestamp to that.

// tsKeep is how long after a lane's last parity symbol it keeps noting
// timestamps: longer than a group stays open for recovery
// (fec.DefaultGroupTTL), so every recovered packet finds what its flow's
// retransmissions carried. A lane that receives no parity (a clean path, FEC off) pays one
// flag test per packet; the lanes' timer ends the noting (tick, at most
// idleTick late).
const tsKeep = 2 * time.Second

// sawParity marks that ln received parity now: recovery is possible, so
// ln notes timestamps from here (its table made on its first parity).
func (s *Shard) sawParity(ln *lane) {
	ln.parityAt, ln.tsOn = s.now, true
	if ln.ts == nil {
		ln.ts = new(tcpts.Table)
	}
}

// expireTimestamps stops ln noting timestamps tsKeep after its last
// parity.
func (s *Shard) expireTimestamps(ln *lane) {
	if ln.tsOn && s.now.Sub(ln.parityAt) > tsKeep {
		ln.tsOn = false
	}
}

// timestamps notes pt, a packet delivered on ln while ln.tsOn, or raises
// its timestamp if FEC recovered it.
func (s *Shard) timestamps(ln *lane, pt []byte, recovered bool) {
	if !recovered {
		ln.ts.Note(pt)
	} else if ln.ts.Raise(pt) {
		s.count(TSRaised)
	}
}
