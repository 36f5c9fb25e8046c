package shard

import (
	"net/netip"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
)

// LaneConfig is what the router hands a shard to install a lane it owns.
type LaneConfig struct {
	Peer   PeerID
	Index  int               // lane index within the session
	Lanes  int               // lanes in the session
	Remote netip.AddrPort    // the peer's address for this lane
	Conn   int               // which of the shard's sockets sends and receives it
	Send   crypto.LaneKeys   // our sending keys for this lane
	Recv   crypto.LaneKeys   // our receiving keys for this lane
	FEC    fec.EncoderConfig // initial K:R (R=0: off)
	Window fec.DecoderConfig // decoder bounds
	// HoldTx keeps sending with the lane's previous keys until a datagram
	// arrives under the new ones: the responder of a rekey does this, so
	// the initiator never sees new-key data before it has the new keys.
	HoldTx bool
	// Mode, when auto, lets the peer's loss reports set R (fec.Adapter);
	// FEC above is then only the starting ratio.
	Mode fec.Mode
}

// lane is one lane's state; it lives in exactly one shard and is touched
// only by that shard's goroutine: no locks, no atomics.
type lane struct {
	cfg    LaneConfig
	sealer *crypto.Sealer
	txf    crypto.Framer
	enc    *fec.Encoder
	opener *crypto.Opener
	rxf    crypto.Framer
	dec    *fec.Decoder
	adapt  *fec.Adapter
	lastRx time.Time

	// prev is the lane's previous keys after a rekey: packets and FEC
	// groups in flight under them still open, for prevKeep.
	prev      *lane
	confirmed bool // a datagram arrived under these keys
	installed time.Time

	txPackets, txBytes, rxPackets, rxBytes uint64
	lastTx                                 time.Time

	// folded is the decoder's counters as last added to the shard's:
	// the shard keeps the totals because a rekey or removal drops the
	// decoder with its counts (Shard.foldDecoder).
	folded fec.Stats
}

func newLane(cfg LaneConfig) (*lane, error) {
	enc, err := fec.NewEncoder(cfg.FEC)
	if err != nil {
		return nil, err
	}
	var ad *fec.Adapter
	if cfg.Mode.Kind == fec.ModeAuto {
		if ad, err = fec.NewAdapter(cfg.Mode, fec.AdaptConfig{}); err != nil {
			return nil, err
		}
	}
	return &lane{
		adapt:  ad,
		cfg:    cfg,
		sealer: crypto.NewSealer(&cfg.Send.AEAD),
		txf:    crypto.NewFramer(&cfg.Send),
		enc:    enc,
		opener: crypto.NewOpener(&cfg.Recv.AEAD),
		rxf:    crypto.NewFramer(&cfg.Recv),
		dec:    fec.NewDecoder(cfg.Window),
	}, nil
}

// peerLanes is how a shard reaches a peer: the owner shard of each lane and,
// for lanes this shard owns, the lane itself.
type peerLanes struct {
	owners []int   // owners[i] is the shard owning lane i
	local  []*lane // local[i] != nil iff this shard owns lane i
}
