package shard

// Writing to a TUN queue with the virtio-net header when the coalescer
// fills or the kernel refuses writes.

import (
	"bytes"
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/yip-router/yip-router/shard/offload"
)

// More packets than the coalescer has slots, between two flushes: it
// writes what it holds and goes on, so every packet is written once, in
// order. (ipPacket's IPv4 header checksum is zero, so none merge.)
func TestVnetCoalescerFullWritesAndGoesOn(t *testing.T) {
	var reads [][]byte
	a, b := vnetSides(t, &reads)
	sb := b.shards[0]
	n := 2*sb.cfg.Batch + 5
	for i := range n {
		inject(t, a.shards[0], ipPacket("10.1.0.5", "10.2.0.9", 100, i))
	}
	deliverAll(t, a, b, nil)
	if len(b.tun[0]) < 2*sb.cfg.Batch {
		t.Fatalf("%d writes before the flush: a full coalescer did not write", len(b.tun[0]))
	}
	sb.flushAll()
	if len(b.tun[0]) != n {
		t.Fatalf("%d writes, want %d", len(b.tun[0]), n)
	}
	for i, f := range b.tun[0] {
		h, err := offload.DecodeHdr(f)
		if err != nil || h.GSOType != offload.GSONone {
			t.Fatalf("write %d: header %+v, %v", i, h, err)
		}
		if seq := binary.BigEndian.Uint32(f[offload.HdrLen+20:]); seq != uint32(i) {
			t.Fatalf("write %d carries packet %d", i, seq)
		}
	}
	sb.publish()
	if sn := sb.Snapshot(); sn.Get(TunOut) != uint64(n) {
		t.Fatalf("tun_out %d, want %d", sn.Get(TunOut), n)
	}
}

// A write error other than EINVAL says nothing about superpackets: the
// packets it carried are counted as dropped and coalescing stays on.
// EINVAL on a superpacket turns coalescing off (CoalesceRefused) and its
// packets go one by one; those the kernel refuses then are counted one
// each.
func TestVnetWriteErrors(t *testing.T) {
	h, super := tsoSuperpacket("10.1.0.5", "10.2.0.9", 6000, 1360) // 5 segments
	const segs = 5
	reads := [][]byte{tunRead(h, super)}
	a, b := vnetSides(t, &reads)
	sb := b.shards[0]
	sb.tunOut = func([]byte) error { return unix.EIO }
	a.shards[0].readTun()
	deliverAll(t, a, b, nil)
	sb.flushAll()
	sb.publish()
	if sn := sb.Snapshot(); sn.Get(DropTunWrite) != segs || sn.Get(TunOut) != 0 || sb.CoalesceRefused() {
		t.Fatalf("EIO: drop_tun_write %d tun_out %d, coalescing refused %v; want %d, 0, false",
			sn.Get(DropTunWrite), sn.Get(TunOut), sb.CoalesceRefused(), segs)
	}

	var plain [][]byte
	writes := 0
	sb.tunOut = func(f []byte) error {
		if gh, _ := offload.DecodeHdr(f); gh.GSOType != offload.GSONone {
			return unix.EINVAL
		}
		writes++
		if writes%2 == 0 {
			return unix.EIO // every second single packet refused
		}
		plain = append(plain, bytes.Clone(f[offload.HdrLen:]))
		return nil
	}
	reads = append(reads, tunRead(h, super))
	a.shards[0].readTun()
	deliverAll(t, a, b, nil)
	sb.flushAll()
	sb.publish()
	sn := sb.Snapshot()
	if !sb.CoalesceRefused() || writes != segs || len(plain) != (segs+1)/2 {
		t.Fatalf("EINVAL: refused %v, %d single writes (%d taken); want true, %d, %d",
			sb.CoalesceRefused(), writes, len(plain), segs, (segs+1)/2)
	}
	if sn.Get(TunOut) != uint64(len(plain)) || sn.Get(DropTunWrite) != segs+uint64(segs-len(plain)) {
		t.Fatalf("EINVAL: tun_out %d drop_tun_write %d; want %d and %d", sn.Get(TunOut), sn.Get(DropTunWrite), len(plain), segs+segs-len(plain))
	}
}
