package shard

// What a lane does with the features its peer announced (control.go's
// keepalives): the handshake lengths it sends and the FEC groups the
// peer's decoder reads.

import "github.com/yip-router/yip-router/fec"

// featureNames names the feature bits (control.go), lowest first.
var featureNames = [...]string{"loss-runs", "padding", "frame-pad", "long-handshakes", "delay-echo", "long-groups", "loss-split"}

// FeatureNames names the features in f (a keepalive's features byte
// less heardYou, which is every bit else), for show: what a lane's peer
// said it reads. Never nil: an empty list says it said nothing.
func FeatureNames(f uint8) []string {
	out := []string{}
	for i, name := range featureNames {
		if f&(1<<i) != 0 {
			out = append(out, name)
		}
	}
	return out
}

// setPeerFeatures records the features a keepalive of the peer's announced
// (0: an older router's, which announces none) and applies what depends on
// them. Only a keepalive sets the handshake lengths (not a rekey, which
// keeps the lane's features: Shard.rekey), so a retry's clearing sticks
// until the peer says it again.
func (ln *lane) setPeerFeatures(f uint8) {
	ln.peerFeatures = f
	ln.cfg.Lens.SetLong(f&FeatureLongHandshakes != 0)
	ln.applyFEC()
}

// applyFEC gives the lane's encoders the ratio, depth and partial-parity
// table of the lane's adapter (auto mode) or the configured ratio (fixed),
// within what the peer's decoder reads: groups beyond
// fec.LegacyMaxK:LegacyMaxR only once it announced FeatureLongGroups
// (fec.FitRatio). The previous keys' encoder too: a rekey responder sends
// under them until the peer uses the new ones (sendKeys).
func (ln *lane) applyFEC() {
	long := ln.peerFeatures&FeatureLongGroups != 0
	if ln.adapt != nil {
		ln.adapt.SetLongGroups(long)
	}
	for _, ks := range ln.keysets() {
		if ks == nil {
			continue
		}
		enc := ks.enc
		if ln.adapt == nil {
			if m := ln.cfg.Mode; m.Kind == fec.ModeFixed {
				_ = enc.SetRatio(fec.FitRatio(m.K, m.R, long))
			}
			continue
		}
		_ = enc.SetRatio(ln.adapt.Ratio())
		enc.SetDepth(ln.adapt.Depth())
		enc.SetPartialParity(ln.adapt.Partial())
		enc.SetSmallCap(ln.adapt.Quiet())
	}
}
