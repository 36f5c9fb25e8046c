package shard

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/fec"
	"github.com/yip-router/yip-router/ring"
	"github.com/yip-router/yip-router/shard/offload"
	"github.com/yip-router/yip-router/shard/tun"
	"github.com/yip-router/yip-router/shard/udp"
)

const (
	// DefaultBatch is how many packets one syscall moves.
	DefaultBatch = 64
	// BufSize is the size of every packet buffer.
	BufSize = 2048
	// headroom is where a TUN packet is read: room for the datagram header
	// and the AEAD counter in front, so sealing and framing happen in place.
	headroom = crypto.HeaderLen + crypto.CounterLen
	// MaxInner is the largest inner packet a datagram carries.
	MaxInner = fec.MaxSymbolLen - crypto.SymbolOverhead
	// defaultPool is each shard's buffer count (BufSize each).
	defaultPool = 8192
)

// Packet kinds on the mesh rings (ring.Packet.Meta).
const (
	meshEgress  = 1 // a TUN packet for a lane the receiving shard owns (Aux: peer)
	meshIngress = 2 // a datagram that arrived on the wrong shard (Addr: source)
)

// Config describes one shard.
type Config struct {
	ID    int
	CPU   int         // CPU to pin the shard's thread to; -1: leave unpinned
	TUN   *tun.Queue  // the shard's TUN queue; nil for in-memory tests
	Conns []*udp.Conn // the shard's sockets (listen-group member, lane socket)
	Mesh  *Mesh
	// Table is the shared route table, swapped atomically by the router.
	Table *atomic.Pointer[Table]
	Batch int // packets per syscall; 0: DefaultBatch
	// CoalesceTCP and CoalesceUDP let the shard write TCP (TSO) and UDP
	// (USO) superpackets to a TUN queue that carries the virtio-net
	// header; the router sets them from what the device granted and the
	// config.
	CoalesceTCP, CoalesceUDP bool
	Pool                     int // packet buffers; 0: a default sized for the batch and mesh
	// Unmatched receives datagrams that match no lane or fail its tag,
	// on the shard's goroutine (the router's handshake path). It reports
	// whether it took the datagram; otherwise it is counted as dropped.
	Unmatched func(shard, conn int, data []byte, from netip.AddrPort) bool
	// NoSession is told (on the shard's goroutine, at most once per
	// second per peer) that traffic is waiting for a peer without lanes:
	// the router starts a handshake. The packets wait in a bounded queue.
	NoSession func(shard int, peer PeerID)
}

// Shard is one data-plane worker. Everything below is owned by the shard's
// goroutine; other goroutines talk to it only through Do, the mesh rings and
// the published counters.
type Shard struct {
	id    int
	cfg   Config
	pool  *ring.Pool
	stats stats
	mesh  *Mesh
	waker *ring.Waker

	lanes   map[netip.AddrPort]*lane       // ingress: remote address → owned lane
	foreign map[netip.AddrPort]foreignLane // ingress: remote address → owner shard
	peers   map[PeerID]*peerLanes

	// Control commands: an unbounded list, because the router issues them
	// while holding its own lock and must never block or lose one. The
	// shard checks the atomic count once per loop iteration and takes the
	// mutex only when there is something to run.
	ctlMu      sync.Mutex
	ctl        []func(*Shard)
	ctlPending atomic.Int32

	// I/O staging, allocated once.
	rx      *udp.Batch
	tx      []*udp.Batch     // per conn
	txPkts  [][]*ring.Packet // per conn: buffers to return after sending
	txN     []int            // per conn: queued datagrams
	handoff [][]*ring.Packet // per destination shard
	popBuf  []*ring.Packet
	retOut  [][]*ring.Packet // per owner shard: buffers to give back

	tunOut   func([]byte) error                  // TUN write (the queue, or a test sink)
	tunIn    func([]byte) (int, error)           // TUN read (the queue, or a test source)
	vnet     *vnetIO                             // TUN offloads; nil: plain packets
	groOff   atomic.Bool                         // the kernel refused a superpacket write
	sendHook func(conn int, b *udp.Batch, n int) // tests: replaces sendmmsg
	deliver  func([]byte)                        // bound once: FEC hands symbols to it
	cur      *lane                               // lane of the symbol being delivered
	now      time.Time
	fecDue   time.Time // earliest FEC flush deadline known; zero: none
	stop     atomic.Bool

	waiting   map[PeerID]*waitQueue // packets for peers still handshaking
	waitTotal int
}

// Bounds of the queue of packets waiting for a handshake, per shard.
const (
	waitPerPeer  = 64
	waitPerShard = 1024 // all peers: the pool must never run dry waiting
	waitMaxAge   = 3 * time.Second
	// prevKeep is how long a lane keeps its previous keys after a rekey.
	prevKeep = 15 * time.Second
)

type waitQueue struct {
	pkts    []*ring.Packet
	at      []time.Time
	lastAsk time.Time
}

// New builds a shard. It allocates everything the hot path will use.
func New(cfg Config) (*Shard, error) {
	if cfg.Mesh == nil || cfg.ID < 0 || cfg.ID >= cfg.Mesh.Size() {
		return nil, fmt.Errorf("shard: id %d outside its mesh", cfg.ID)
	}
	if cfg.Table == nil {
		return nil, errors.New("shard: no route table")
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Pool <= 0 {
		cfg.Pool = defaultPool
	}
	pool, err := ring.NewPool(uint16(cfg.ID), cfg.Pool, BufSize)
	if err != nil {
		return nil, err
	}
	n := cfg.Mesh.Size()
	s := &Shard{
		id: cfg.ID, cfg: cfg, pool: pool, mesh: cfg.Mesh, waker: cfg.Mesh.wakers[cfg.ID],
		lanes: map[netip.AddrPort]*lane{}, foreign: map[netip.AddrPort]foreignLane{}, peers: map[PeerID]*peerLanes{},
		waiting: map[PeerID]*waitQueue{},
		rx:      udp.NewBatch(cfg.Batch),
		handoff: make([][]*ring.Packet, n),
		retOut:  make([][]*ring.Packet, n),
		popBuf:  make([]*ring.Packet, cfg.Batch),
	}
	for i := range n {
		s.handoff[i] = make([]*ring.Packet, 0, cfg.Batch)
		s.retOut[i] = make([]*ring.Packet, 0, cfg.Batch)
	}
	for range cfg.Conns {
		s.tx = append(s.tx, udp.NewBatch(cfg.Batch))
		s.txPkts = append(s.txPkts, make([]*ring.Packet, cfg.Batch))
		s.txN = append(s.txN, 0)
	}
	// Receive buffers are the shard's own, not the pool's: ingress works
	// on them in place and copies only what it hands to another shard.
	// With UDP GRO a message carries up to 64 KB of datagrams.
	rxSize := BufSize
	for _, c := range cfg.Conns {
		if c.GRO() {
			rxSize = offload.MaxPacket
		}
	}
	for i := range s.rx.Bufs {
		s.rx.Bufs[i] = make([]byte, rxSize)
	}
	s.deliver = s.deliverSymbol
	s.tunOut = s.writeTun
	if cfg.TUN != nil {
		s.tunIn = cfg.TUN.Read
		if cfg.TUN.VnetHdr() {
			s.enableVnet(cfg.CoalesceTCP, cfg.CoalesceUDP)
		}
	}
	return s, nil
}

// ID is the shard's index.
func (s *Shard) ID() int { return s.id }

// Snapshot returns the shard's counters as last published.
func (s *Shard) Snapshot() Snapshot {
	var out Snapshot
	for i := range out {
		out[i] = s.stats.pub[i].Load()
	}
	return out
}

// Do runs f on the shard's goroutine at its next loop iteration: how the
// router installs lanes and peers. Safe from any goroutine; never blocks
// and never drops a command.
func (s *Shard) Do(f func(*Shard)) {
	s.ctlMu.Lock()
	s.ctl = append(s.ctl, f)
	s.ctlPending.Add(1)
	s.ctlMu.Unlock()
	s.waker.Wake()
}

func (s *Shard) runControl() {
	for s.ctlPending.Load() > 0 {
		s.ctlMu.Lock()
		fs := s.ctl
		s.ctl = nil
		s.ctlPending.Store(0)
		s.ctlMu.Unlock()
		for _, f := range fs {
			f(s)
		}
	}
}

// InstallLane adds a lane this shard owns, or replaces the lane's keys
// (rekey, or the peer restarted): the old lane stays as prev for a while so
// packets and FEC groups in flight under the old keys still open. Call it on
// the shard's goroutine (through Do) or before Run.
func (s *Shard) InstallLane(cfg LaneConfig) error {
	if cfg.Conn < 0 || cfg.Conn >= len(s.cfg.Conns) {
		return fmt.Errorf("shard %d: lane conn %d out of range", s.id, cfg.Conn)
	}
	if cfg.Index < 0 || cfg.Index >= cfg.Lanes {
		return fmt.Errorf("shard %d: lane %d of %d", s.id, cfg.Index, cfg.Lanes)
	}
	ln, err := newLane(cfg)
	if err != nil {
		return err
	}
	ln.installed = s.now
	pl := s.peerEntry(cfg.Peer, cfg.Lanes)
	if old := pl.local[cfg.Index]; old != nil {
		if !old.confirmed && old.prev != nil {
			// The peer never used old's keys (e.g. our response to its
			// rekey was lost and it retried): the keys it still has are
			// old.prev's, so keep those as prev.
			s.foldDecoder(old)
			old = old.prev
		}
		if old.prev != nil {
			s.foldDecoder(old.prev)
		}
		old.prev = nil
		ln.prev = old
		ln.txPackets, ln.txBytes, ln.rxPackets, ln.rxBytes = old.txPackets, old.txBytes, old.rxPackets, old.rxBytes
		if old.cfg.Remote != cfg.Remote && s.lanes[old.cfg.Remote] == old {
			delete(s.lanes, old.cfg.Remote)
		}
	}
	ln.confirmed = !cfg.HoldTx
	pl.local[cfg.Index] = ln
	pl.owners[cfg.Index] = s.id
	s.lanes[cfg.Remote] = ln
	delete(s.foreign, cfg.Remote)
	s.releaseWaiting(cfg.Peer)
	return nil
}

// SetLaneOwner records that lane index of peer is owned by shard owner and
// reached at remote, so this shard hands that lane's packets over. A remote
// shared with a lane this shard owns (an initiator's lanes all talk to the
// responder's one listening port, told apart by our local socket) stays
// with the local lane: the kernel already steered it by local port.
func (s *Shard) SetLaneOwner(peer PeerID, lanes, index, owner int, remote netip.AddrPort) {
	pl := s.peerEntry(peer, lanes)
	pl.owners[index] = owner
	if owner == s.id {
		return
	}
	if ln := pl.local[index]; ln != nil {
		s.foldLane(ln)
		pl.local[index] = nil // the lane moved away
		if s.lanes[ln.cfg.Remote] == ln {
			delete(s.lanes, ln.cfg.Remote)
		}
	}
	if _, mine := s.lanes[remote]; !mine {
		s.foreign[remote] = foreignLane{owner: owner, peer: peer}
	}
	s.releaseWaiting(peer)
}

// RemovePeer forgets every lane of peer, the hand-over entries that point
// at its lanes on other shards, and the packets waiting for it.
func (s *Shard) RemovePeer(peer PeerID) {
	if pl := s.peers[peer]; pl != nil {
		for _, ln := range pl.local {
			s.foldLane(ln)
		}
	}
	for addr, ln := range s.lanes {
		if ln.cfg.Peer == peer {
			delete(s.lanes, addr)
		}
	}
	for addr, f := range s.foreign {
		if f.peer == peer {
			delete(s.foreign, addr)
		}
	}
	if q := s.waiting[peer]; q != nil {
		for _, p := range q.pkts {
			s.count(DropNoSession)
			s.release(p)
		}
		s.waitTotal -= len(q.pkts)
		delete(s.waiting, peer)
	}
	delete(s.peers, peer)
}

// foreignLane is a remote address whose lane another shard owns.
type foreignLane struct {
	owner int
	peer  PeerID
}

func (s *Shard) peerEntry(peer PeerID, lanes int) *peerLanes {
	pl := s.peers[peer]
	if pl == nil || len(pl.owners) != lanes {
		if pl != nil {
			// The lane count changed (the peer restarted with other
			// shards): the old lanes go.
			for _, ln := range pl.local {
				s.foldLane(ln)
				if ln != nil && s.lanes[ln.cfg.Remote] == ln {
					delete(s.lanes, ln.cfg.Remote)
				}
			}
			for addr, f := range s.foreign {
				if f.peer == peer {
					delete(s.foreign, addr)
				}
			}
		}
		pl = &peerLanes{owners: make([]int, lanes), local: make([]*lane, lanes)}
		for i := range pl.owners {
			pl.owners[i] = i % s.mesh.Size()
		}
		s.peers[peer] = pl
	}
	return pl
}

// wait queues a packet for a peer without lanes and asks for a handshake.
func (s *Shard) wait(peer PeerID, p *ring.Packet) {
	q := s.waiting[peer]
	if q == nil {
		q = &waitQueue{pkts: make([]*ring.Packet, 0, waitPerPeer), at: make([]time.Time, 0, waitPerPeer)}
		s.waiting[peer] = q
	}
	if len(q.pkts) == waitPerPeer {
		// Keep the newest: drop the oldest.
		s.count(DropNoSession)
		s.release(q.pkts[0])
		s.waitTotal--
		copy(q.pkts, q.pkts[1:])
		copy(q.at, q.at[1:])
		q.pkts, q.at = q.pkts[:len(q.pkts)-1], q.at[:len(q.at)-1]
	}
	if s.waitTotal >= waitPerShard {
		s.count(DropNoSession)
		s.release(p)
		return
	}
	s.waitTotal++
	q.pkts = append(q.pkts, p)
	q.at = append(q.at, s.now)
	if s.cfg.NoSession != nil && s.now.Sub(q.lastAsk) >= time.Second {
		q.lastAsk = s.now
		s.cfg.NoSession(s.id, peer)
	}
}

// releaseWaiting sends the packets that waited for peer's handshake.
func (s *Shard) releaseWaiting(peer PeerID) {
	q := s.waiting[peer]
	if q == nil {
		return
	}
	delete(s.waiting, peer)
	s.waitTotal -= len(q.pkts)
	for _, p := range q.pkts {
		s.egress(p)
	}
}

// expireWaiting drops packets that waited too long for a handshake.
func (s *Shard) expireWaiting() {
	for peer, q := range s.waiting {
		k := 0
		for k < len(q.pkts) && s.now.Sub(q.at[k]) > waitMaxAge {
			s.count(DropNoSession)
			s.release(q.pkts[k])
			s.waitTotal--
			k++
		}
		if k == 0 {
			continue
		}
		q.pkts = append(q.pkts[:0], q.pkts[k:]...)
		q.at = append(q.at[:0], q.at[k:]...)
		if len(q.pkts) == 0 && s.now.Sub(q.lastAsk) > waitMaxAge {
			delete(s.waiting, peer)
		}
	}
}

func (s *Shard) count(c Counter) { s.stats.c[c]++ }

// --- egress -----------------------------------------------------------------

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
	pl := s.peers[peer]
	if pl == nil || len(pl.owners) == 0 {
		s.wait(peer, p)
		return
	}
	// An inner flow is on one TUN queue, hence one shard, hence one lane.
	li := s.id % len(pl.owners)
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
	if !ln.confirmed && ln.prev != nil {
		ln = ln.prev // rekey responder: old keys until the peer uses the new
	}
	if p.N > MaxInner {
		s.count(DropOversize)
		s.release(p)
		return
	}
	sym, err := ln.sealer.SealSymbol(p.Buf[crypto.HeaderLen:], nil, p.Buf[headroom:headroom+p.N])
	if err != nil {
		s.count(DropSeal)
		s.release(p)
		return
	}
	m, err := ln.enc.Add(sym, s.now)
	if err != nil {
		s.count(DropOversize)
		s.release(p)
		return
	}
	d := ln.txf.Frame(p.Buf, crypto.Header{Kind: crypto.KindData, Group: m.Group, Index: m.Index, K: m.K, R: m.R}, len(sym))
	if s.fecDue.IsZero() {
		// The loop only needs to wake for the first deadline; tick
		// finds the rest.
		if d, ok := ln.enc.Deadline(); ok {
			s.fecDue = d
		}
	}
	ln.txPackets++
	ln.txBytes += uint64(p.N)
	ln.lastTx = s.now
	s.queue(ln, p, len(d))
	s.drainParity(ln)
}

func (s *Shard) drainParity(ln *lane) {
	for {
		m, par, ok := ln.enc.NextParity()
		if !ok {
			return
		}
		q := s.pool.Get()
		if q == nil {
			s.count(DropPoolEmpty)
			continue
		}
		copy(q.Buf[crypto.HeaderLen:], par)
		d := ln.txf.Frame(q.Buf, crypto.Header{Kind: crypto.KindParity, Group: m.Group, Index: m.Index, K: m.K, R: m.R}, len(par))
		s.count(ParityOut)
		s.queue(ln, q, len(d))
	}
}

// queue stages a datagram on its lane's socket batch, sending the batch
// when it is full.
func (s *Shard) queue(ln *lane, p *ring.Packet, n int) {
	c := ln.cfg.Conn
	i := s.txN[c]
	b := s.tx[c]
	b.Bufs[i], b.Sizes[i], b.Addrs[i] = p.Buf[:n], n, ln.cfg.Remote
	s.txPkts[c][i] = p
	s.txN[c] = i + 1
	if i+1 == b.Len() {
		s.flushConn(c)
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

// --- ingress ----------------------------------------------------------------

// ingress handles one received datagram, data from from, on conn (-1:
// handed over by another shard). data is the caller's: a datagram for a
// lane another shard owns is copied into a pool buffer to hand it over.
func (s *Shard) ingress(conn int, data []byte, from netip.AddrPort) {
	ln := s.lanes[from]
	if ln == nil {
		if f, ok := s.foreign[from]; ok && f.owner != s.id {
			s.handIngress(f.owner, data, from)
			return
		}
		if s.cfg.Unmatched == nil || !s.cfg.Unmatched(s.id, conn, data, from) {
			s.count(DropUnknownLane)
		}
		return
	}
	h, sym, err := ln.rxf.Deframe(data)
	if err == crypto.ErrTag && ln.prev != nil {
		if h2, sym2, err2 := ln.prev.rxf.Deframe(data); err2 != crypto.ErrTag {
			ln, h, sym, err = ln.prev, h2, sym2, err2
		}
	} else if err == nil && !ln.confirmed {
		ln.confirmed = true // the peer has the new keys: send with them
	}
	switch err {
	case nil:
	case crypto.ErrTag, crypto.ErrShort:
		// A re-handshake from the same address looks like this too.
		if s.cfg.Unmatched == nil || !s.cfg.Unmatched(s.id, conn, data, from) {
			s.count(DropBadTag)
		}
		return
	default:
		s.count(DropBadHeader)
		return
	}
	switch h.Kind {
	case crypto.KindData, crypto.KindParity:
		s.cur = ln
		ln.dec.Push(fec.Meta{Kind: fec.Kind(h.Kind), Group: h.Group, Index: h.Index, K: h.K, R: h.R}, sym, s.now, s.deliver)
		s.cur = nil
	case crypto.KindControl:
		body, err := ln.opener.OpenSymbol(controlAD[:], sym)
		if err == crypto.ErrReplay {
			s.count(DropReplay)
			break
		}
		if err != nil {
			s.count(DropDecrypt)
			break
		}
		ln.lastRx = s.now
		s.count(ControlIn)
		s.control(ln, body)
	}
}

// handIngress copies a datagram for a lane shard owner owns into a pool
// buffer and hands it over (a NAT rewrote the peer's lane port).
func (s *Shard) handIngress(owner int, data []byte, from netip.AddrPort) {
	p := s.pool.Get()
	if p == nil {
		s.count(DropPoolEmpty)
		return
	}
	if len(data) > len(p.Buf) {
		// Only a UDP GRO receive buffer holds more; no datagram of ours is
		// this large.
		s.pool.Put(p)
		s.count(DropOversize)
		return
	}
	s.count(ForeignLane)
	p.N, p.Addr, p.Meta = copy(p.Buf, data), from, meshIngress
	s.handoff[owner] = append(s.handoff[owner], p)
	if len(s.handoff[owner]) == cap(s.handoff[owner]) {
		s.flushHandoff(owner)
	}
}

// Control frame bodies: a type byte, then its payload.
const (
	ctlKeepalive  = 0 // empty: keeps NAT state and proves liveness
	ctlLossReport = 1 // fec.LossReport of the sender's receive side
)

func (s *Shard) control(ln *lane, body []byte) {
	if len(body) == 0 {
		return // legacy empty keepalive
	}
	switch body[0] {
	case ctlKeepalive:
	case ctlLossReport:
		rep, err := fec.ParseLossReport(body[1:])
		if err != nil {
			s.count(DropBadHeader)
			return
		}
		if ln.adapt != nil {
			k, r := ln.adapt.Observe(rep)
			_ = ln.enc.SetRatio(k, r)
		}
	}
}

// Periodic sends each owned lane's loss report to the peer (whose encoder
// adapts R to it) and, when keepalive > 0, a keepalive on lanes idle for
// that long. The router calls it through Do about once a second.
func (s *Shard) Periodic(keepalive map[PeerID]time.Duration) {
	var buf [1 + 16]byte
	for peer, pl := range s.peers {
		for i, ln := range pl.local {
			if ln == nil {
				continue
			}
			rep := ln.dec.TakeLossReport()
			if rep.Expected > 0 {
				buf[0] = ctlLossReport
				if b, err := rep.AppendBinary(buf[:1]); err == nil {
					s.SendControl(peer, i, b)
				}
			}
			// Passive keepalive (as WireGuard): we heard from the peer
			// since we last sent, and have been quiet for a while —
			// tell it we are alive, or its liveness check re-handshakes.
			passive := ln.lastRx.After(ln.lastTx) && s.now.Sub(ln.lastTx) >= 2*time.Second
			if ka := keepalive[peer]; (ka > 0 && s.now.Sub(ln.lastTx) >= ka) || passive {
				buf[0] = ctlKeepalive
				s.SendControl(peer, i, buf[:1])
			}
		}
	}
	s.flushAll()
}

// controlAD separates control frames from data: a control symbol cannot be
// opened as data (and FEC never carries control).
var controlAD = [1]byte{byte(crypto.KindControl)}

// SendControl sends a control frame (type byte, then payload) on lane index
// of peer, which this shard must own. Call it on the shard's goroutine.
func (s *Shard) SendControl(peer PeerID, index int, body []byte) bool {
	pl := s.peers[peer]
	if pl == nil || index >= len(pl.local) || pl.local[index] == nil {
		return false
	}
	ln := pl.local[index]
	if !ln.confirmed && ln.prev != nil {
		ln = ln.prev
	}
	if len(body) > MaxInner {
		return false
	}
	p := s.pool.Get()
	if p == nil {
		s.count(DropPoolEmpty)
		return false
	}
	copy(p.Buf[headroom:], body)
	sym, err := ln.sealer.SealSymbol(p.Buf[crypto.HeaderLen:], controlAD[:], p.Buf[headroom:headroom+len(body)])
	if err != nil {
		s.count(DropSeal)
		s.release(p)
		return false
	}
	d := ln.txf.Frame(p.Buf, crypto.Header{Kind: crypto.KindControl}, len(sym))
	ln.lastTx = s.now
	s.count(ControlOut)
	s.queue(ln, p, len(d))
	return true
}

// deliverSymbol opens a data symbol (as received, or recovered by FEC) and
// writes the packet to the TUN queue if its source belongs to the peer.
func (s *Shard) deliverSymbol(sym []byte) {
	ln := s.cur
	pt, err := ln.opener.OpenSymbol(nil, sym)
	switch err {
	case nil:
	case crypto.ErrReplay:
		s.count(DropReplay)
		return
	default:
		s.count(DropDecrypt)
		return
	}
	ln.lastRx = s.now // authenticated and not a replay: the peer is alive
	if s.cfg.Table.Load().LookupPacket(pt, true) != ln.cfg.Peer {
		s.count(DropNotAllowed)
		return
	}
	if s.vnet != nil {
		// Copied into the coalescer; written (and counted) by flushTun.
		s.coalesce(pt)
		ln.rxPackets++
		ln.rxBytes += uint64(len(pt))
		return
	}
	if err := s.tunOut(pt); err != nil {
		s.count(DropTunWrite)
		return
	}
	ln.rxPackets++
	ln.rxBytes += uint64(len(pt))
	s.count(TunOut)
}

func (s *Shard) writeTun(pkt []byte) error { return s.cfg.TUN.Write(pkt) }

// --- mesh input ---------------------------------------------------------------

// takeMesh processes what other shards handed us and takes back our
// buffers they are done with.
func (s *Shard) takeMesh() int {
	work := 0
	for from := range s.mesh.Size() {
		if from == s.id {
			continue
		}
		for {
			n := s.mesh.ret[from][s.id].Pop(s.popBuf)
			for _, p := range s.popBuf[:n] {
				s.pool.Put(p)
			}
			clear(s.popBuf[:n])
			if n == 0 {
				break
			}
		}
		if l := uint64(s.mesh.fwd[from][s.id].Len()); l > s.stats.c[RingHighWater] {
			s.stats.c[RingHighWater] = l
		}
		for {
			n := s.mesh.fwd[from][s.id].Pop(s.popBuf)
			if n == 0 {
				break
			}
			work += n
			s.stats.c[TakenOver] += uint64(n)
			for _, p := range s.popBuf[:n] {
				switch p.Meta {
				case meshEgress:
					pl := s.peers[PeerID(p.Aux)]
					if pl == nil || int(p.Lane) >= len(pl.local) || pl.local[p.Lane] == nil {
						// The lane's install is still in our control
						// queue: wait for it like any sessionless packet.
						s.wait(PeerID(p.Aux), p)
						continue
					}
					s.sendData(pl.local[p.Lane], p)
				case meshIngress:
					s.ingress(-1, p.Buf[:p.N], p.Addr)
					s.release(p)
				default:
					s.release(p)
				}
			}
			clear(s.popBuf[:n])
		}
	}
	return work
}

// flushAll writes what waits for the TUN queue and sends every staged
// datagram and hand-off.
func (s *Shard) flushAll() {
	s.flushTun()
	for c := range s.txN {
		s.flushConn(c)
	}
	for o := range s.handoff {
		s.flushHandoff(o)
	}
	for o := range s.retOut {
		s.flushReturns(o)
	}
}

// tick runs the lanes' timers: FEC flush of partial groups (the previous
// keys' encoder too: a rekey responder sends under them until confirmed),
// decoder expiry, the end of previous keys, waiting packets' age. It
// returns the earliest pending FEC deadline (zero if none).
func (s *Shard) tick() time.Time {
	var next time.Time
	for _, ln := range s.lanes {
		for _, l := range []*lane{ln, ln.prev} {
			if l == nil {
				continue
			}
			if l.enc.Tick(s.now) {
				s.drainParity(l)
			}
			if d, ok := l.enc.Deadline(); ok && (next.IsZero() || d.Before(next)) {
				next = d
			}
			l.dec.Tick(s.now)
		}
		if ln.prev != nil && ln.confirmed && s.now.Sub(ln.installed) > prevKeep {
			s.foldDecoder(ln.prev)
			ln.prev = nil
		}
	}
	s.expireWaiting()
	return next
}

func (s *Shard) publish() {
	for _, pl := range s.peers {
		for _, ln := range pl.local {
			s.foldLane(ln)
		}
	}
	s.stats.c[PoolHighWater] = uint64(s.pool.Cap() - s.pool.LowWater())
	s.stats.publish()
}

// foldDecoder adds what l's decoder counted since its last fold to the
// shard's fec_recovered, drop_duplicate and drop_fec_window. A decoder's
// counts are per lane and go with it when a rekey or a removal drops the
// lane, and published counters must never decrease (Prometheus counters),
// so the shard keeps the totals: publish folds every live decoder, and
// whatever drops a lane or its previous keys folds them first. Folding
// twice adds nothing.
func (s *Shard) foldDecoder(l *lane) {
	st := l.dec.Stats()
	s.stats.c[FECRecovered] += st.Recovered - l.folded.Recovered
	s.stats.c[DropDuplicate] += st.Duplicates - l.folded.Duplicates
	s.stats.c[DropFECWindow] += windowDrops(st) - windowDrops(l.folded)
	l.folded = st
}

// foldLane folds ln's decoder and its previous keys' (ln may be nil).
func (s *Shard) foldLane(ln *lane) {
	if ln == nil {
		return
	}
	s.foldDecoder(ln)
	if ln.prev != nil {
		s.foldDecoder(ln.prev)
	}
}

// windowDrops is what drop_fec_window counts: symbols outside the window,
// invalid or inconsistent.
func windowDrops(st fec.Stats) uint64 {
	return st.Late + st.FarAhead + st.Invalid + st.Inconsistent
}
