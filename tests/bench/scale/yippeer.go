package main

import (
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/yip-router/yip-router/crypto"
)

// yipPeer is a simulated peer's side of yip-router's handshake (hsProto)
// with the project's crypto package, and the session it got: lane 0's
// keys, for the pings.
type yipPeer struct {
	i    int
	port uint16 // the lane offer's port: the peer's own
	priv crypto.PrivateKey
	pub  crypto.PublicKey
	// local is the peer; hub is the hub as its configured peer.
	local *crypto.Local
	hub   *crypto.Peer

	attempt  int
	pending  []*crypto.Initiation // every initiation since reset: any may be answered
	sess     *crypto.Session
	sessions int // sessions completed by this peer over the run

	// Lane 0 of the session.
	sealer *crypto.Sealer
	opener *crypto.Opener
	txf    crypto.Framer
	rxf    crypto.Framer
	group  uint32
	seq    uint16
}

// newPeers makes n peers with fresh keys, each knowing the hub's public
// key (AddPeer computes the static-static DH now), on all CPUs we may use.
func newPeers(n int, hubPub crypto.PublicKey, shards int, spread bool) ([]*simPeer, error) {
	peers := make([]*simPeer, n)
	err := parallel(n, func(i int) error {
		priv, err := crypto.GeneratePrivateKey()
		if err != nil {
			return err
		}
		local := crypto.NewLocal(priv, true)
		hp, err := local.AddPeer(hubPub, crypto.PresharedKey{})
		if err != nil {
			return err
		}
		p := newSimPeer(i, shards, spread)
		p.yip = &yipPeer{i: i, port: p.addr.Port(), priv: priv, pub: priv.Public(), local: local, hub: hp}
		p.proto = p.yip
		peers[i] = p
		return nil
	})
	return peers, err
}

func (y *yipPeer) offer() crypto.LaneOffer {
	return crypto.LaneOffer{Ports: []uint16{y.port}}
}

// initiate builds the next initiation (with the hub's cookie as mac2 if
// one is stored) and adds it to the pending ones.
func (y *yipPeer) initiate(now time.Time) ([]byte, error) {
	idx := uint32(y.i)<<8 | uint32(y.attempt&0xff)
	y.attempt++
	in, dg, err := y.local.Initiate(y.hub, idx, y.offer(), now)
	if err != nil {
		return nil, err
	}
	y.pending = append(y.pending, in)
	return dg, nil
}

func (y *yipPeer) reset() { y.pending = y.pending[:0] }

func (y *yipPeer) consumeCookie(d []byte, now time.Time) bool {
	if !crypto.CookieReplyLen(len(d)) {
		return false
	}
	for _, in := range y.pending {
		if in.ConsumeCookieReply(d, now) == nil {
			return true
		}
	}
	return false
}

// isResponse: what is not a cookie reply is the response, before the
// session's first datagram (a responder sends nothing else); a
// re-handshaking peer's stray data fails finish.
func (y *yipPeer) isResponse([]byte) bool { return true }

func (y *yipPeer) finish(d []byte) bool {
	for _, in := range y.pending {
		if s, err := in.ConsumeResponse(d); err == nil {
			y.setSession(s)
			return true
		}
	}
	return false
}

func (y *yipPeer) setSession(s *crypto.Session) {
	y.sess, y.pending = s, y.pending[:0]
	y.sessions++
	send, recv := s.Keys.SendLane(0), s.Keys.RecvLane(0)
	y.sealer, y.opener = crypto.NewSealer(&send.AEAD), crypto.NewOpener(&recv.AEAD)
	y.txf, y.rxf = crypto.NewFramer(&send), crypto.NewFramer(&recv)
	y.group, y.seq = 0, 0
}

// pingStats are a traffic phase's counters over all peers.
type pingStats struct {
	sent, answered  atomic.Int64
	control, parity atomic.Int64 // hub datagrams that were not data
	otherData       atomic.Int64 // data that opened but was not our reply
	badTag          atomic.Int64 // not under the session's receive keys (handshake leftovers)
	openErrs        atomic.Int64
}

// ping sends one ICMP echo request through the session on lane 0 (one
// FEC group of K=1, R=0: delivered at once) and waits for the reply.
func (p *simPeer) ping(hub netip.AddrPort, timeout time.Duration, st *pingStats) time.Duration {
	y := p.yip
	if y == nil || y.sess == nil {
		return 0
	}
	buf := make([]byte, 2048)
	id, seq := uint16(p.i), y.seq
	y.seq++
	payload := []byte("yip-router bench-scale ping.....")
	pkt := echoRequest(buf[crypto.HeaderLen+crypto.CounterLen:], p.inner, hubInner.Addr(), id, seq, payload)
	sym, err := y.sealer.SealSymbol(buf[crypto.HeaderLen:], nil, pkt)
	if err != nil {
		return 0
	}
	d := y.txf.Frame(buf, crypto.Header{Kind: crypto.KindData, Group: y.group, Index: 0, K: 1, R: 0}, len(sym))
	y.group++
	start := time.Now()
	st.sent.Add(1)
	if _, err := p.conn.WriteToUDPAddrPort(d, hub); err != nil {
		return 0
	}
	deadline := start.Add(timeout)
	rb := make([]byte, 2048)
	for {
		_ = p.conn.SetReadDeadline(deadline)
		n, _, err := p.conn.ReadFromUDPAddrPort(rb)
		if err != nil {
			return 0
		}
		h, sym, err := y.rxf.Deframe(rb[:n])
		if err != nil {
			st.badTag.Add(1)
			continue
		}
		switch h.Kind {
		case crypto.KindControl:
			st.control.Add(1)
			continue
		case crypto.KindParity:
			st.parity.Add(1)
			continue
		}
		pt, err := y.opener.OpenSymbol(nil, sym)
		if err != nil {
			st.openErrs.Add(1)
			continue
		}
		if parseEchoReply(pt, hubInner.Addr(), p.inner, id, seq) != nil {
			st.otherData.Add(1)
			continue
		}
		st.answered.Add(1)
		return time.Since(start)
	}
}
