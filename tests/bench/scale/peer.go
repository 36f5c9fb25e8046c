package main

import (
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yip-router/yip-router/crypto"
)

// simPeer is one simulated peer: its own static key, underlay address and
// UDP socket (in the generator namespace), and the session it got.
type simPeer struct {
	i     int
	priv  crypto.PrivateKey
	pub   crypto.PublicKey
	local *crypto.Local
	hub   *crypto.Peer // the hub, as this peer's configured peer
	addr  netip.AddrPort
	inner netip.Addr
	conn  *net.UDPConn

	// Handshake.
	attempt  int
	pending  []*crypto.Initiation
	first    *crypto.Initiation // prebuilt for the burst
	firstDg  []byte
	sess     *crypto.Session
	sessions int // sessions completed by this peer over the run
	hsTook   time.Duration

	// Lane 0 of the session.
	sealer *crypto.Sealer
	opener *crypto.Opener
	txf    crypto.Framer
	rxf    crypto.Framer
	group  uint32
	seq    uint16
	// resp is the burst's response, kept unopened until its clocks
	// stopped (finishResponse).
	resp []byte
}

// newPeers makes n peers with fresh keys, each knowing the hub's public
// key (AddPeer computes the static-static DH now), on all CPUs we may use.
func newPeers(n int, hubPub crypto.PublicKey, shards int, spread bool) ([]*simPeer, error) {
	peers := make([]*simPeer, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				priv, err := crypto.GeneratePrivateKey()
				var hp *crypto.Peer
				var local *crypto.Local
				if err == nil {
					local = crypto.NewLocal(priv, true)
					hp, err = local.AddPeer(hubPub, crypto.PresharedKey{})
				}
				if err != nil {
					mu.Lock()
					firstErr = errors.Join(firstErr, err)
					mu.Unlock()
					continue
				}
				peers[i] = &simPeer{i: i, priv: priv, pub: priv.Public(), local: local, hub: hp,
					addr:  netip.AddrPortFrom(underlayAddr(i), peerPort(i, shards, spread)),
					inner: innerAddr(i)}
			}
		})
	}
	wg.Wait()
	return peers, firstErr
}

// openSockets binds every peer's socket; call it inside the generator
// namespace (netns.Do): the sockets stay there.
func openSockets(peers []*simPeer) error {
	for _, p := range peers {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(p.addr))
		if err != nil {
			return err
		}
		p.conn = c
	}
	return nil
}

func closeSockets(peers []*simPeer) {
	for _, p := range peers {
		if p.conn != nil {
			p.conn.Close()
		}
	}
}

func (p *simPeer) offer() crypto.LaneOffer {
	return crypto.LaneOffer{Ports: []uint16{p.addr.Port()}}
}

// initiate builds the next initiation (with the hub's cookie as mac2 if
// one is stored) and adds it to the pending ones.
func (p *simPeer) initiate(now time.Time) ([]byte, error) {
	idx := uint32(p.i)<<8 | uint32(p.attempt&0xff)
	p.attempt++
	in, dg, err := p.local.Initiate(p.hub, idx, p.offer(), now)
	if err != nil {
		return nil, err
	}
	p.pending = append(p.pending, in)
	return dg, nil
}

// prebuild prepares the burst's first initiation.
func (p *simPeer) prebuild() error {
	p.pending = p.pending[:0]
	dg, err := p.initiate(time.Now())
	if err != nil {
		return err
	}
	p.first, p.firstDg = p.pending[0], dg
	return nil
}

// hsStats are a handshake phase's counters over all peers.
type hsStats struct {
	done      atomic.Int64
	sent      atomic.Int64 // initiations sent
	cookies   atomic.Int64 // cookie replies that opened (each is followed by a retry with mac2)
	timeouts  atomic.Int64 // retries after no answer
	sendErrs  atomic.Int64
	other     atomic.Int64 // datagrams that were neither (stale responses, data)
	readErrs  atomic.Int64
	gaveUp    atomic.Int64
	cookiePer [8]atomic.Int64 // peers by cookie replies they needed (7 = 7+)
}

// backoff is the wait before retry n (0 = after the first initiation):
// the router's schedule, 1, 2, 4 ... 15 s, ±10%.
func backoff(n int) time.Duration {
	d := min(15*time.Second, time.Second<<min(n, 4))
	return time.Duration(float64(d) * (0.9 + 0.2*rand.Float64()))
}

// handshake runs one peer's handshake with the hub until it completes or
// deadline: the first initiation is the prebuilt one when prebuilt, a
// cookie reply is answered at once with a new initiation carrying mac2 (the
// router would wait for its retry schedule), silence is retried on the
// router's backoff schedule. With prebuilt (the burst) the response is
// kept and opened after the phase (finishResponse).
func (p *simPeer) handshake(hub netip.AddrPort, prebuilt bool, deadline time.Time, st *hsStats) {
	start := time.Now()
	var dg []byte
	if prebuilt {
		dg = p.firstDg
	} else {
		p.pending = p.pending[:0]
		var err error
		if dg, err = p.initiate(start); err != nil {
			st.sendErrs.Add(1)
			return
		}
	}
	send := func(d []byte) {
		st.sent.Add(1)
		if _, err := p.conn.WriteToUDPAddrPort(d, hub); err != nil {
			st.sendErrs.Add(1)
		}
	}
	send(dg)
	timeouts, cookies := 0, 0
	next := time.Now().Add(backoff(0))
	// retry sends a new initiation (after a timeout, or with the cookie
	// just received) and schedules the next timeout.
	retry := func(now time.Time) bool {
		d, err := p.initiate(now)
		if err != nil {
			st.sendErrs.Add(1)
			return false
		}
		send(d)
		next = now.Add(backoff(timeouts))
		return true
	}
	buf := make([]byte, 2048)
	for {
		_ = p.conn.SetReadDeadline(minTime(next, deadline))
		n, _, err := p.conn.ReadFromUDPAddrPort(buf)
		now := time.Now()
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				st.readErrs.Add(1)
				return
			}
			if !now.Before(deadline) {
				st.gaveUp.Add(1)
				return
			}
			timeouts++
			st.timeouts.Add(1)
			if !retry(now) {
				return
			}
			continue
		}
		d := buf[:n]
		if crypto.CookieReplyLen(n) && p.consumeCookie(d, now) {
			cookies++
			st.cookies.Add(1)
			if !retry(now) {
				return
			}
			continue
		}
		if prebuilt {
			// The burst: what is not a cookie reply is the hub's
			// response (a responder sends nothing else before the
			// first datagram). Its DHs wait until the burst's clocks
			// stopped (finishResponse), so the generator spends its
			// CPU on the hub's socket, not on its own crypto. A stray
			// that is neither (a cookie reply for an initiation this
			// peer no longer holds) ends the peer's wait and is
			// counted ResponsesRefused, not completed.
			p.resp = append(p.resp[:0], d...)
			p.hsTook = now.Sub(start)
			st.done.Add(1)
			st.cookiePer[min(cookies, 7)].Add(1)
			return
		}
		if s := p.consumeResponse(d); s != nil {
			p.setSession(s)
			p.hsTook = now.Sub(start)
			st.done.Add(1)
			st.cookiePer[min(cookies, 7)].Add(1)
			return
		}
		st.other.Add(1)
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func (p *simPeer) consumeCookie(d []byte, now time.Time) bool {
	for _, in := range p.pending {
		if in.ConsumeCookieReply(d, now) == nil {
			return true
		}
	}
	return false
}

// finishResponse opens the response the burst kept (handshake with
// prebuilt) and takes its session; false if it was no response to any of
// p's initiations.
func (p *simPeer) finishResponse() bool {
	d := p.resp
	p.resp = nil
	if s := p.consumeResponse(d); s != nil {
		p.setSession(s)
		return true
	}
	return false
}

func (p *simPeer) consumeResponse(d []byte) *crypto.Session {
	for _, in := range p.pending {
		if s, err := in.ConsumeResponse(d); err == nil {
			return s
		}
	}
	return nil
}

func (p *simPeer) setSession(s *crypto.Session) {
	p.sess, p.pending = s, p.pending[:0]
	p.sessions++
	send, recv := s.Keys.SendLane(0), s.Keys.RecvLane(0)
	p.sealer, p.opener = crypto.NewSealer(&send.AEAD), crypto.NewOpener(&recv.AEAD)
	p.txf, p.rxf = crypto.NewFramer(&send), crypto.NewFramer(&recv)
	p.group, p.seq = 0, 0
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
	if p.sess == nil {
		return 0
	}
	buf := make([]byte, 2048)
	id, seq := uint16(p.i), p.seq
	p.seq++
	payload := []byte("yip-router bench-scale ping.....")
	pkt := echoRequest(buf[crypto.HeaderLen+crypto.CounterLen:], p.inner, hubInner.Addr(), id, seq, payload)
	sym, err := p.sealer.SealSymbol(buf[crypto.HeaderLen:], nil, pkt)
	if err != nil {
		return 0
	}
	d := p.txf.Frame(buf, crypto.Header{Kind: crypto.KindData, Group: p.group, Index: 0, K: 1, R: 0}, len(sym))
	p.group++
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
		h, sym, err := p.rxf.Deframe(rb[:n])
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
		pt, err := p.opener.OpenSymbol(nil, sym)
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
