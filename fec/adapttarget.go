// The residual loss the Adapter aims for: what a TCP flow needs at the
// path's round trip, or Target for a lane of small packets.

package fec

import "time"

// SetRTT tells the rule the path's round-trip time (zero: unknown), which
// sets how little residual loss the inner flows need.
func (a *Adapter) SetRTT(rtt time.Duration) {
	a.rtt = rtt
	a.setTarget()
}

// Target is the residual loss the rule currently aims for.
func (a *Adapter) Target() float64 { return a.target }

// SetSent tells the rule how many packets the lane sent since the peer's
// last report, and how many of them were not small (SmallSymbol); none
// sent changes nothing. A lane of which at most largeShare were not small
// carries no data of a flow whose rate rests on the residual loss: a TCP
// flow's ACKs (cumulative: the next one says what a lost one did), pings,
// DNS, voice. It aims for Target, not for what a TCP flow needs at the
// path's round trip: a download's ACK lane at 1% loss paid 16:4 x1 (25% of
// its datagrams) for a residual of 7e-7, and 4:4 x4 while bursts were
// assumed. (The mean length would take a lane carrying a download's ACKs
// and a slower upload for small, and hold the upload to what 1e-3 allows:
// about 10 Mbit/s at 50 ms.)
func (a *Adapter) SetSent(packets, large uint64) {
	if packets > 0 {
		a.small = float64(large) <= largeShare*float64(packets)
		a.setTarget()
	}
}

// largeShare is the most of a lane's packets that may be larger than
// small (SmallSymbol) for SetSent to take it as a lane of small packets:
// the request that starts a download, among its ACKs.
const largeShare = 0.01

// setTarget sets the residual loss the rule aims for: Target for a lane
// of small packets or without a round trip, else TCPResidual of it,
// within [MinTarget, Target].
func (a *Adapter) setTarget() {
	a.target = a.cfg.Target
	if a.rtt > 0 && !a.small {
		a.target = min(a.cfg.Target, max(a.cfg.MinTarget, TCPResidual(a.rtt)))
	}
}
