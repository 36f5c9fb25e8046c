package shard

import (
	"net/netip"
	"runtime"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
	"github.com/yip-router/yip-router/ring"
)

// Egress: a packet read from the TUN queue (loop_linux.go, vnet_linux.go),
// or handed over by the shard that read it (mesh.go), is routed by its
// destination to a peer and to the lane of this shard's index. A lane this
// shard owns seals, frames and FEC-encodes it (sendData) and stages the
// datagram and any parity on the lane's socket batch, sent with one
// sendmmsg (flushConn). A lane another shard owns gets the buffer over the
// mesh (handoff); buffers lent by other shards go home over return rings.
// A peer without lanes yet parks the packet in wait.go.

// egress routes one TUN packet (data at p.Buf[headroom:headroom+p.N]) and
// either sends it on a lane this shard owns or hands it to the owner.
func (s *Shard) egress(p *ring.Packet) {
	data := p.Buf[headroom : headroom+p.N]
	peer := s.cfg.Table.Load().LookupPacket(data, false)
	if peer == NoPeer {
		s.count(DropNoRoute)
		s.release(p)
		return
	}
	pl := s.table.peer(peer)
	if pl == nil || len(pl.owners) == 0 {
		s.wait(peer, p)
		return
	}
	// An inner flow is on one TUN queue, hence one shard, hence one lane:
	// lane (shard mod lanes), or if that one lives elsewhere (moved to
	// where its datagrams arrive, place.go) a lane this shard owns.
	li := s.id % len(pl.owners)
	if pl.local[li] == nil && pl.mine >= 0 {
		li = pl.mine
	}
	if ln := pl.local[li]; ln != nil {
		s.sendData(ln, p)
		return
	}
	owner := pl.owners[li]
	if owner == s.id {
		// Our own lane's install is still in our control queue (the
		// router sent SetLaneOwner for other lanes first): wait for it.
		s.wait(peer, p)
		return
	}
	p.Meta, p.Aux, p.Lane = meshEgress, uint32(peer), int32(li)
	s.handoff[owner] = append(s.handoff[owner], p)
	if len(s.handoff[owner]) == cap(s.handoff[owner]) {
		s.flushHandoff(owner)
	}
}

// sendData seals p in place, frames it and queues it, then queues any
// parity the FEC group produced.
func (s *Shard) sendData(ln *lane, p *ring.Packet) {
	ks := ln.sendKeys() // rekey responder: old keys until the peer uses the new
	if p.N > MaxInner {
		s.count(DropOversize)
		s.release(p)
		return
	}
	sym, err := ks.sealer.SealSymbol(p.Buf[crypto.HeaderLen:], nil, p.Buf[headroom:headroom+p.N])
	if err != nil {
		s.count(DropSeal)
		s.release(p)
		return
	}
	s.noteBusy(ln, ks) // a group may be open: tickFEC flushes it
	large := !fec.SmallSymbol(len(sym))
	if large && ln.largeThisTick() == flowPackets-1 && ln.adapt != nil {
		// A flow after pings: this packet on, the start-up guess, and
		// small packets' groups that close early get their full parity
		// again; after a quiet spell, a new flow (fec.Adapter.Restart).
		restart := !ln.quietAt.IsZero() && s.now.Sub(ln.quietAt) >= ln.restartAfter() && ln.adapt.Restart()
		ln.quietAt = time.Time{}
		if busy := ln.adapt.Busy(); ln.adapt.Loud() || busy || restart {
			ln.applyFEC()
		}
	}
	m, err := ks.enc.Add(sym, s.now)
	if err != nil {
		s.count(DropOversize)
		s.release(p)
		return
	}
	h := crypto.Header{Kind: crypto.KindData, Group: m.Group, Index: m.Index, K: m.K, R: m.R}
	end := crypto.HeaderLen + len(sym)
	h.Pad = s.padFor(ln, ln.cfg.Conn, true, p.Buf, end, end+crypto.TagLen)
	d := ks.txf.Frame(p.Buf, h, len(sym))
	if s.fecDue.IsZero() {
		// The loop only needs to wake for the first deadline; tick
		// finds the rest.
		if d, ok := ks.enc.Deadline(); ok {
			s.fecDue = d
		}
	}
	// Counters and timing live on the lane, whichever keys sealed.
	ln.txPackets++
	ln.txBytes += uint64(p.N)
	if large {
		ln.txLarge++
	}
	ln.noteSize(p.N)
	ln.lastTx = s.now
	ln.asked(s.now)
	s.table.stir(ln)
	s.queue(ln, p, len(d))
	s.drainParity(ln, ks)
}

// drainParity frames and queues the parity ks's encoder has for ln.
func (s *Shard) drainParity(ln *lane, ks *keyset) {
	for {
		m, par, ok := ks.enc.NextParity()
		if !ok {
			return
		}
		q := s.pool.Get()
		if q == nil {
			s.count(DropPoolEmpty)
			continue
		}
		copy(q.Buf[crypto.HeaderLen:], par)
		h := crypto.Header{Kind: crypto.KindParity, Group: m.Group, Index: m.Index, K: m.K, R: m.R}
		end := crypto.HeaderLen + len(par)
		h.Pad = s.padFor(ln, ln.cfg.Conn, false, q.Buf, end, end+crypto.TagLen)
		d := ks.txf.Frame(q.Buf, h, len(par))
		ln.noteSize(len(par) - crypto.SymbolOverhead) // as long as a data packet this long
		s.count(ParityOut)
		s.queue(ln, q, len(d))
	}
}

// queue stages a datagram on its lane's socket batch, to the lane's remote
// from its local address (under whichever keys), sending the batch when it
// is full.
func (s *Shard) queue(ln *lane, p *ring.Packet, n int) {
	c := ln.cfg.Conn
	ln.txDgrams++ // the loss split's count (split.go)
	i := s.txN[c]
	b := s.tx[c]
	b.Bufs[i], b.Sizes[i], b.Addrs[i], b.Local[i] = p.Buf[:n], n, ln.cfg.Remote, ln.cfg.Local
	s.txPkts[c][i] = p
	s.txN[c] = i + 1
	if i+1 == b.Len() {
		s.flushConn(c)
	}
}

// forgetLocal stops the lanes that answer from local (LaneConfig.Local)
// doing so: the host no longer has that address (udp.Batch.LocalGone).
// They send from the routing table's choice, as a roaming peer would see
// after a renumbering; the peer follows their datagrams. Rare: only after
// the host lost an address.
func (s *Shard) forgetLocal(local netip.Addr) {
	for _, ln := range s.table.owned {
		if ln.cfg.Local == local {
			ln.cfg.Local = netip.Addr{}
		}
	}
}

// flushConn sends a conn's staged datagrams with one sendmmsg (or hands them
// to the test sink) and frees their buffers.
func (s *Shard) flushConn(c int) {
	n := s.txN[c]
	if n == 0 {
		return
	}
	b := s.tx[c]
	if s.sendHook != nil {
		for i := range n {
			b.Sent[i] = true // the sink takes everything unless it says otherwise
		}
		s.sendHook(c, b, n)
	} else {
		// What the kernel refused (anywhere in the batch) is left
		// unmarked in b.Sent and counted as drop_send below.
		_, _ = s.cfg.Conns[c].Send(b, n)
		if b.LocalGone.IsValid() {
			s.forgetLocal(b.LocalGone)
		}
	}
	sent := 0
	for i := range n {
		if b.Sent[i] {
			sent++
			s.stats.c[BytesOut] += uint64(b.Sizes[i])
		}
		s.release(s.txPkts[c][i])
		s.txPkts[c][i] = nil
		b.Bufs[i] = nil
	}
	s.stats.c[UDPOut] += uint64(sent)
	s.stats.c[DropSend] += uint64(n - sent)
	s.txN[c] = 0
	s.padRuns[c] = padRun{} // a run is for one batch (GSO)
}

func (s *Shard) flushHandoff(to int) {
	h := s.handoff[to]
	if len(h) == 0 {
		return
	}
	n := s.mesh.fwd[s.id][to].Push(h)
	s.stats.c[HandedOff] += uint64(n)
	for _, p := range h[n:] {
		s.count(DropRingFull)
		s.release(p)
	}
	clear(h)
	s.handoff[to] = h[:0]
	if n > 0 {
		s.mesh.wakers[to].Wake()
	}
}

// release gives a buffer back: to our pool, or home through a return ring.
func (s *Shard) release(p *ring.Packet) {
	if int(p.Owner) == s.id {
		s.pool.Put(p)
		return
	}
	o := int(p.Owner)
	s.retOut[o] = append(s.retOut[o], p)
	if len(s.retOut[o]) == cap(s.retOut[o]) {
		s.flushReturns(o)
	}
}

func (s *Shard) flushReturns(o int) {
	r := s.retOut[o]
	for len(r) > 0 {
		// The return ring holds at most what the owner lent us, so it
		// has room unless the owner is stopped or far behind.
		n := s.mesh.ret[s.id][o].Push(r)
		r = r[n:]
		if n == 0 {
			if s.stop.Load() {
				break // shutting down: the pools go with the process
			}
			runtime.Gosched()
		}
	}
	clear(s.retOut[o])
	s.retOut[o] = s.retOut[o][:0]
}
