package shard

import (
	"errors"
	"net/netip"
	"time"

	"github.com/yip-router/yip-router/fec"
)

// LaneStatus is what `show` prints for one lane.
type LaneStatus struct {
	Peer      PeerID
	Index     int
	Shard     int
	Remote    netip.AddrPort
	Local     netip.Addr // the address of ours it sends from (zero: the routing table's choice)
	TxPackets uint64
	TxBytes   uint64
	RxPackets uint64
	RxBytes   uint64
	LastRx    time.Time
	LastTx    time.Time
	K, R      int
	Depth     int // interleaving depth (fec.Encoder.SetDepth)
	Recovered uint64
	Unrecov   uint64
	Confirmed bool // the peer has sent under the current keys
	PrevKeys  bool // previous keys still accepted (after a rekey)
	Moves     uint64
	// Padded: this shard pads what the lane sends (Config.Padding is
	// on and the peer announced it reads padding).
	Padded bool
	// PeerFeatures is what the peer's last hello on the lane said it
	// reads (FeatureNames; 0: no hello yet, or an older router).
	PeerFeatures uint8
	// What FEC = auto acts on: the wire loss of the peer's reports
	// (LossOK: it has had one; congestion counted as the rule counts
	// it), the path's state, and the round trip's latest and least
	// samples (0: none).
	// Burst is the mean wire loss burst it predicts with (BurstOK:
	// measured; else assumed).
	Loss            float64
	LossOK, BurstOK bool
	Burst           float64
	Path            fec.PathState
	RTT, RTTLo      time.Duration
	// The loss split (split.go): the peer's last report's, of what we
	// sent (datagrams expected and lost in clear and queued slices), and
	// the queue above which we count a slice of the peer's queued.
	SplitClearExp, SplitClearLost, SplitQueuedExp, SplitQueuedLost uint32
	QueueLimit                                                     time.Duration
}

// LaneStatuses returns the lanes this shard owns. Call it on the shard's
// goroutine (through Query).
func (s *Shard) LaneStatuses() []LaneStatus {
	var out []LaneStatus
	for peer, pl := range s.table.peers {
		for i, ln := range pl.local {
			if ln == nil {
				continue
			}
			k, r := ln.cur.enc.Ratio()
			rec, lost := ln.fecCounts()
			var loss float64
			var lossOK, burstOK bool
			var burst float64
			var path fec.PathState
			if ln.adapt != nil {
				loss, lossOK = ln.adapt.Loss()
				burst, burstOK = ln.adapt.Burst()
				path = ln.adapt.Path()
			}
			out = append(out, LaneStatus{
				Peer: peer, Index: i, Shard: s.id, Remote: ln.cfg.Remote, Local: ln.cfg.Local,
				TxPackets: ln.txPackets, TxBytes: ln.txBytes, RxPackets: ln.rxPackets, RxBytes: ln.rxBytes,
				LastRx: ln.lastRx, LastTx: ln.lastTx, K: k, R: r, Depth: ln.cur.enc.Depth(),
				Recovered: rec, Unrecov: lost,
				Confirmed: ln.cur.confirmed, PrevKeys: ln.prev != nil, Moves: ln.moves,
				Padded: s.cfg.Padding.Mode != PadOff && ln.padded(), PeerFeatures: ln.peerFeatures,
				Loss: loss, LossOK: lossOK, Burst: burst, BurstOK: burstOK, Path: path, RTT: ln.delay.latest(), RTTLo: ln.delay.least(),
				SplitClearExp: ln.lastSplit.clearExp, SplitClearLost: ln.lastSplit.clearLost,
				SplitQueuedExp: ln.lastSplit.queuedExp, SplitQueuedLost: ln.lastSplit.queuedLost,
				QueueLimit: ln.split.limit(),
			})
		}
	}
	return out
}

// ErrTimeout means a shard did not run a query in time (it is stuck or
// stopped).
var ErrTimeout = errors.New("shard: query timed out")

// Query runs f on the shard's goroutine and waits for it (at most
// timeout). For the control plane only: status, keepalives.
func (s *Shard) Query(f func(*Shard), timeout time.Duration) error {
	done := make(chan struct{})
	s.Do(func(sh *Shard) { f(sh); close(done) })
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
		return ErrTimeout
	}
}
