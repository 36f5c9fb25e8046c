package shard

import (
	"slices"
	"testing"

	"github.com/yip-router/yip-router/fec"
)

// FeatureNames names every feature bit this version has, and a bit it
// does not know by its number.
func TestFeatureNames(t *testing.T) {
	if got := FeatureNames(0); len(got) != 0 {
		t.Fatalf("no features: %v", got)
	}
	want := []string{"loss-runs", "padding", "frame-pad", "long-handshakes", "delay-echo", "long-groups", "loss-split"}
	if got := FeatureNames(Features); !slices.Equal(got, want) {
		t.Fatalf("Features: %v, want %v", got, want)
	}
	if got := FeatureNames(FeatureDelayEcho | FeatureLossSplit); !slices.Equal(got, []string{"delay-echo", "loss-split"}) {
		t.Fatalf("the echo and the split: %v", got)
	}
	if FeatureNames(0) == nil {
		t.Fatal("no features: nil, want an empty list (show tells it from an older daemon's absent field)")
	}
}

// A lane's status carries what the peer's last hello said it reads.
func TestLaneStatusPeerFeatures(t *testing.T) {
	a, b := newSide(t, 1, routesA), newSide(t, 1, routesB)
	connect(t, a, b, fec.EncoderConfig{K: 4, R: 0})
	sa := a.shards[0]
	la := sa.table.lanes[addrB]
	for _, f := range []uint8{FeatureLossRuns | FeatureDelayEcho, 0} {
		sa.control(la, []byte{ctlKeepalive, f | heardYou, 0, 0})
		st := sa.LaneStatuses()
		if len(st) != 1 || st[0].PeerFeatures != f {
			t.Fatalf("after a hello announcing %#x: %+v", f, st)
		}
	}
}
