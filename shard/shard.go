package shard

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
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

// The shard: its configuration, its state and the control commands the
// router runs on its goroutine (Do). The poll loop is in loop_linux.go; a
// packet's path is in egress.go (TUN to socket) and ingress.go (socket to
// TUN).

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

// Socket is what the loop does with one of its UDP sockets: wait for it in
// poll(2), and receive and send batches without blocking. *udp.Conn is the
// real one; internal/memnet's sockets carry datagrams in memory (the
// router's pair test). The lane table also hands a *udp.Conn to the
// listen group's Steerer (steer.go): only real sockets are in a group.
type Socket interface {
	// Fd is the descriptor poll(2) waits on: readable while datagrams
	// wait.
	Fd() int
	// Recv fills b's first messages (udp.Conn.Recv); 0 when none wait.
	Recv(b *udp.Batch, n int) (int, error)
	// Send sends b's first n datagrams and marks b.Sent (udp.Conn.Send).
	Send(b *udp.Batch, n int) (int, error)
	// GRO: a message may carry several datagrams (64 KB buffers).
	GRO() bool
	// LocalAddr is the address and port the socket is bound to.
	LocalAddr() netip.AddrPort
	// SendTo sends one datagram now, from any goroutine (a handshake
	// message: Group.SendHandshake).
	SendTo(b []byte, to netip.AddrPort) error
	// SendFrom is SendTo from local address from (zero: the routing
	// table's choice).
	SendFrom(b []byte, to netip.AddrPort, from netip.Addr) error
}

// TUNQueue is what the loop does with its TUN queue: *tun.Queue, or an
// in-memory queue (internal/memnet).
type TUNQueue interface {
	// Fd is the descriptor poll(2) waits on: readable while packets wait.
	Fd() int
	// Read reads one packet without blocking; (0, nil) when none waits.
	Read(b []byte) (int, error)
	// Write writes one packet without blocking.
	Write(b []byte) error
	// VnetHdr: every read and write starts with a virtio_net_hdr.
	VnetHdr() bool
}

var (
	_ Socket   = (*udp.Conn)(nil)
	_ TUNQueue = (*tun.Queue)(nil)
)

// Config describes one shard.
type Config struct {
	ID    int
	CPU   int      // CPU to pin the shard's thread to; -1: leave unpinned
	TUN   TUNQueue // the shard's TUN queue; nil: none (tests that feed egress themselves)
	Conns []Socket // the shard's sockets (listen-group member, lane socket)
	// Strangers is the shard's strangers' socket in the listen group
	// (nil where the group steers by port): datagrams from sources no
	// lane is steered for, handshakes and junk among them. The shard
	// reads it after its lane traffic, within a budget per loop
	// (readUnsteered), and takes its datagrams as arriving on Conns[0],
	// which is bound to the same address and port: answers leave from
	// there. A nil interface, not a nil *udp.Conn, says there is none.
	Strangers Socket
	// Known is the shard's known socket in the listen group (nil where
	// there is none): datagrams no lane is steered for from an address
	// the group knows a peer at (Group.SetKnown), read like the
	// strangers' but in a queue of their own, before them.
	Known Socket
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
	// on the shard's goroutine (the control core's handshake path). It
	// says what the datagram was (Verdict): one that is NotHandshake is
	// counted as dropped.
	Unmatched func(shard, conn int, data []byte, from netip.AddrPort, local netip.Addr) Verdict
	// HandshakeKeys says under how many keys Unmatched checks a datagram
	// of handshake length (one keyed BLAKE2s over it each) before it
	// finds it is junk: readUnsteered charges junk to the strangers'
	// rate by the bytes hashed. nil: one.
	HandshakeKeys func() int
	// NoSession is told (on the shard's goroutine, at most once per
	// second per peer) that traffic is waiting for a peer without lanes:
	// the control core starts a handshake. The packets wait in a bounded queue.
	NoSession func(shard int, peer PeerID)
	// Moved is told (on the shard's goroutine) that an authenticated
	// datagram moved lane index of peer from one address to another
	// (roam.go); the control core has the peer's other shards follow
	// (FollowPeer) at once and queues the move of the peer's endpoint.
	// Rare: only the peer's keys can cause it.
	Moved func(shard int, peer PeerID, index int, from, to netip.AddrPort)
	// Silent is told (on the shard's goroutine, at most once per
	// noReplyAfter per lane) that a lane of peer has been sending for
	// noReplyAfter without hearing anything back: the peer presumably
	// restarted and lost its keys, and the control core starts a handshake.
	// oldFraming says the peer's datagrams arrive framed as wire version
	// 1 did (crypto.MatchesV1): it handshakes, but it runs the previous
	// version and nothing it sends passes the tag.
	Silent func(shard int, peer PeerID, oldFraming bool)
	// Misplaced is told (on the shard's goroutine, at most once a second
	// per lane) that lane index of peer, which this shard owns, proved to
	// arrive on shard via (a NAT rewrote its port) and the steering map
	// cannot send it here (place.go): the control core moves it there
	// (MoveLane).
	Misplaced func(shard int, peer PeerID, index, via int)
	// Confirmed is told (on the shard's goroutine, once per session) that
	// the first datagram under a responder's new keys arrived on the lane
	// the initiation came from (LaneConfig.Asked): the peer received our
	// response at the lane's remote, so it receives there (the control core
	// then answers that address's initiations past the cap on cookie
	// replies).
	Confirmed func(shard int, peer PeerID, index int, remote netip.AddrPort)
	// Steer is the listen group's lane map (steer.go); nil where the
	// kernel steers by source port.
	Steer Steerer
	// Padding is how this shard pads what it sends (padding.go).
	Padding Padding
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

	table laneTable // which shard owns each lane, and where (table.go)

	// Roaming (roam.go): a token bucket of tag trials, the round-robin
	// position, and a count of authenticated symbols, which tells roam
	// whether the datagram it handed on proved itself.
	roamTokens int
	roamAt     time.Time
	roamNext   int
	candNext   int
	authed     uint64
	// junkBytes counts the bytes the handshake path hashed in datagrams
	// it did not answer (Verdict): readUnsteered charges them to a
	// queue's rate.
	junkBytes uint64

	// Control commands: an unbounded list, because the control core
	// issues them while holding its lock and must never block or lose one. The
	// shard checks the atomic count once per loop iteration and takes the
	// mutex only when there is something to run.
	ctlMu      sync.Mutex
	ctl        []func(*Shard)
	ctlPending atomic.Int32

	// I/O staging, allocated once.
	rx      *udp.Batch
	rxLocal netip.Addr       // the local address the datagram in ingress arrived at (zero: unknown)
	tx      []*udp.Batch     // per conn
	txPkts  [][]*ring.Packet // per conn: buffers to return after sending
	txN     []int            // per conn: queued datagrams
	padRand *rand.ChaCha8    // junk for padded datagrams
	padRuns []padRun         // per conn: data datagrams sharing a pad (padding.go)
	handoff [][]*ring.Packet // per destination shard
	popBuf  []*ring.Packet
	retOut  [][]*ring.Packet // per owner shard: buffers to give back

	tunOut   func([]byte) error                  // TUN write (the queue, or a test sink)
	tunIn    func([]byte) (int, error)           // TUN read (the queue, or a test source)
	vnet     *vnetIO                             // TUN offloads; nil: plain packets
	groOff   atomic.Bool                         // the kernel refused a superpacket write
	sendHook func(conn int, b *udp.Batch, n int) // tests: replaces sendmmsg
	now      time.Time
	fecDue   time.Time // earliest FEC flush deadline known; zero: none
	// flushing is the keys whose encoder may hold a partial group
	// (keyset.encBusy), which tickFEC visits at each FEC deadline.
	flushing []flushEntry
	trimAt   time.Time // last trimIdle
	// strangers and known are the sockets for datagrams no lane is
	// steered for (strangers.go), with their rates.
	strangers, known unsteeredQueue
	stop             atomic.Bool

	waiting   map[PeerID]*waitQueue // packets for peers still handshaking
	waitTotal int
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
		waiting:    map[PeerID]*waitQueue{},
		roamTokens: roamTrialBurst,
		rx:         udp.NewBatch(cfg.Batch),
		handoff:    make([][]*ring.Packet, n),
		retOut:     make([][]*ring.Packet, n),
		popBuf:     make([]*ring.Packet, cfg.Batch),
		padRand:    newPadRand(),
		strangers:  unsteeredQueue{sock: cfg.Strangers, in: StrangersIn, hashed: true},
		known:      unsteeredQueue{sock: cfg.Known, in: KnownIn},
	}
	s.table = newLaneTable(&s.cfg, n, &s.stats, s.foldLane)
	s.table.tell = s.tell
	cfg.Mesh.shards[cfg.ID] = s
	for i := range n {
		s.handoff[i] = make([]*ring.Packet, 0, cfg.Batch)
		s.retOut[i] = make([]*ring.Packet, 0, cfg.Batch)
	}
	for range cfg.Conns {
		s.tx = append(s.tx, udp.NewBatch(cfg.Batch))
		s.txPkts = append(s.txPkts, make([]*ring.Packet, cfg.Batch))
		s.txN = append(s.txN, 0)
		s.padRuns = append(s.padRuns, padRun{})
	}
	// Receive buffers are the shard's own, not the pool's: ingress works
	// on them in place and copies only what it hands to another shard.
	// With UDP GRO a message carries up to 64 KB of datagrams.
	// One byte more than any router's datagram, so a longer one shows as
	// longer (and is refused, ingress.go) instead of truncated.
	rxSize := BufSize + 1
	for _, c := range cfg.Conns {
		if c != nil && c.GRO() {
			rxSize = offload.MaxPacket
		}
	}
	for i := range s.rx.Bufs {
		s.rx.Bufs[i] = make([]byte, rxSize)
	}
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
// router installs lanes and peers, and how a shard hands another a lane
// (MoveLane) or its claims of addresses (tell). Safe from any goroutine;
// never blocks and never drops a command.
func (s *Shard) Do(f func(*Shard)) {
	s.ctlMu.Lock()
	s.ctl = append(s.ctl, f)
	s.ctlPending.Add(1)
	s.ctlMu.Unlock()
	s.waker.Wake()
}

// tell queues n, a claim of this shard's (claim.go), on every other shard
// of the mesh: they run it in the order this shard told them, after what
// was queued before. A claim is rare (an install, an adoption, a move,
// which a datagram makes only after a tag trial paid from the roam
// budget): a command per shard per claim, never per packet.
func (s *Shard) tell(n addrNews) {
	for i, o := range s.mesh.shards {
		if i != s.id && o != nil {
			o.Do(func(x *Shard) { x.table.hear(n, x.now) })
		}
	}
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
