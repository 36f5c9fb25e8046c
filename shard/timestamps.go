package shard

import "github.com/yip-router/yip-router/shard/tcpts"

// A TCP segment FEC recovered arrives after segments sent later; if the
// sender retransmitted meanwhile, the receiving host's PAWS check drops it
// as older than the retransmission it already took, and the sender then
// sees the loss FEC had repaired (shard/tcpts says how, and what raising
// its timestamp costs). So while a lane receives parity (until tsKeep
// after the last, timing.go), it notes for each TCP flow the packets it
// delivers - the highest sequence, and the newest timestamp value of a
// segment below it (a retransmission) - and raises a recovered segment's
// timestamp to that. A lane that receives no parity (a clean path, FEC
// off) pays one flag test per packet and holds no table.

// sawParity marks that ln received parity now: recovery is possible, so
// ln notes timestamps from here (its table made at the first parity after
// none for tsKeep).
func (s *Shard) sawParity(ln *lane) {
	ln.parityAt, ln.tsOn = s.now, true
	if ln.ts == nil {
		ln.ts = new(tcpts.Table)
	}
}

// expireTimestamps runs with ln's timers: it ages what ln's table noted,
// and tsKeep after ln's last parity stops the noting and lets the table
// go (what it held is of no use to a recovery that may come later).
func (s *Shard) expireTimestamps(ln *lane) {
	if !ln.tsOn {
		return
	}
	if s.now.Sub(ln.parityAt) > tsKeep {
		ln.tsOn, ln.ts = false, nil
		return
	}
	ln.ts.Tick()
}

// timestamps notes pt, a packet delivered on ln while ln.tsOn, or raises
// its timestamp if FEC recovered it.
func (s *Shard) timestamps(ln *lane, pt []byte, recovered bool) {
	if !tcpts.MaybeTCP(pt) {
		return
	}
	if !recovered {
		ln.ts.Note(pt)
	} else if ln.ts.Raise(pt) {
		s.count(TSRaised)
	}
}
