package shard

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/yip-router/yip-router/shard/offload"
)

// vnetIO is a shard's TUN I/O with the virtio-net header: one read buffer
// for superpackets, the splitter that cuts them into pool buffers, and the
// coalescer that turns delivered packets into as few writes as it can.
type vnetIO struct {
	rd    []byte // one TUN read: header + up to 64 KB
	split offload.Splitter
	gro   *offload.Coalescer
	write func(frame []byte, segs int) // bound once: s.writeFrame
	seg   []byte                       // fallback: one segment of a refused superpacket
	// groRefused is set when the kernel refused a superpacket write: the
	// shard then writes packets one by one (the router reports it).
	groRefused bool
}

// readBudgetFactor bounds one iteration's TUN reads to this many batches of
// packets after splitting, so a stream of superpackets cannot starve the
// sockets (the other direction's ACKs) of the same shard.
const readBudgetFactor = 2

func (s *Shard) enableVnet(tcp, udp bool) {
	v := &vnetIO{
		rd:  make([]byte, offload.HdrLen+offload.MaxPacket),
		gro: offload.NewCoalescer(s.cfg.Batch, tcp, udp),
		seg: make([]byte, offload.HdrLen+BufSize),
	}
	v.write = s.writeFrame
	s.vnet = v
}

// readTunVnet reads superpackets and single packets (each behind a
// virtio-net header), splits them into pool buffers and runs egress on each
// packet. Every packet read counts against the iteration's budget, dropped
// or not, and it stops reading while the pool is low: what it does not
// read waits in the kernel's queue, and the loop's other work (taking back
// lent buffers, sending) can free buffers first.
func (s *Shard) readTunVnet() int {
	v := s.vnet
	got := 0
	for got < readBudgetFactor*s.cfg.Batch && s.pool.Free() >= s.cfg.Batch {
		n, err := s.tunIn(v.rd)
		if err != nil || n == 0 {
			return got
		}
		h, err := offload.DecodeHdr(v.rd[:n])
		if err == nil {
			err = v.split.Reset(h, v.rd[offload.HdrLen:n])
		}
		if err != nil {
			got++
			s.count(DropTunBad)
			continue
		}
		segs := v.split.Segments()
		got += segs
		if segs > 1 {
			s.count(TunSuperIn)
		}
		for done := 0; done < segs; done++ {
			p := s.pool.Get()
			if p == nil {
				s.stats.c[DropPoolEmpty] += uint64(segs - done)
				return got
			}
			m, ok, err := v.split.Next(p.Buf[headroom:])
			if err != nil || !ok {
				s.pool.Put(p)
				if err != nil {
					s.stats.c[DropOversize] += uint64(segs - done)
				}
				break
			}
			p.N = m
			s.count(TunIn)
			s.egress(p)
		}
	}
	return got
}

// coalesce copies a delivered packet into the coalescer, writing what it
// holds first when it is full.
func (s *Shard) coalesce(pkt []byte) {
	if !s.vnet.gro.Add(pkt) {
		s.flushTun()
		s.vnet.gro.Add(pkt)
	}
}

// flushTun writes every packet and superpacket the coalescer holds.
func (s *Shard) flushTun() {
	if s.vnet != nil && s.vnet.gro.Pending() > 0 {
		s.vnet.gro.Flush(s.vnet.write)
	}
}

// writeFrame writes one coalesced frame (virtio-net header + packet) that
// carries segs packets. If the kernel refuses a superpacket (EINVAL: a
// kernel whose TUN GSO handling is broken), coalescing is turned off for
// good and this frame's packets are written one by one, so nothing is lost.
func (s *Shard) writeFrame(frame []byte, segs int) {
	err := s.tunOut(frame)
	if err == nil {
		s.stats.c[TunOut] += uint64(segs)
		if segs > 1 {
			s.count(TunSuperOut)
		}
		return
	}
	if segs == 1 || !errors.Is(err, unix.EINVAL) {
		s.stats.c[DropTunWrite] += uint64(segs)
		return
	}
	v := s.vnet
	v.groRefused = true
	s.groOff.Store(true)
	v.gro.SetOffloads(false, false)
	h, _ := offload.DecodeHdr(frame)
	if v.split.Reset(h, frame[offload.HdrLen:]) != nil {
		s.stats.c[DropTunWrite] += uint64(segs)
		return
	}
	offload.Hdr{}.Encode(v.seg)
	for done := 0; ; done++ {
		n, ok, err := v.split.Next(v.seg[offload.HdrLen:])
		if err != nil {
			s.stats.c[DropTunWrite] += uint64(segs - done)
			return
		}
		if !ok {
			return
		}
		if s.tunOut(v.seg[:offload.HdrLen+n]) != nil {
			s.count(DropTunWrite)
			continue
		}
		s.count(TunOut)
	}
}

// CoalesceRefused reports whether the kernel refused a superpacket write,
// so the shard writes packets one by one. Safe from any goroutine.
func (s *Shard) CoalesceRefused() bool { return s.groOff.Load() }
