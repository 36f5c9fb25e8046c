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
)

// simPeer is one simulated peer: its underlay address and UDP socket (in
// the generator namespace) and its side of the hub's handshake protocol.
// The generator's behaviour (handshake: what it sends when, how it
// answers a cookie reply, when it retries) is written once here for both
// protocols, so yip-router and wireguard-go see the same burst.
type simPeer struct {
	i     int
	addr  netip.AddrPort
	inner netip.Addr
	conn  *net.UDPConn
	proto hsProto
	// yip is proto against a yip-router hub: its keys and the session
	// the pings and the reload use. Nil against wireguard-go, which only
	// takes the burst.
	yip *yipPeer

	firstDg []byte // the burst's initiation, prebuilt
	hsTook  time.Duration
	// resp is the burst's response, kept unopened until its clocks
	// stopped (proto.finish).
	resp []byte
}

// hsProto is a simulated peer's side of one handshake protocol
// (yip-router's: yipPeer; WireGuard's: wgPeer), the steps
// simPeer.handshake drives. None of them does I/O.
type hsProto interface {
	// initiate builds a new initiation at now, with mac2 when the
	// peer holds the hub's cookie, and makes it one a response or
	// cookie reply may answer.
	initiate(now time.Time) ([]byte, error)
	// consumeCookie takes d if it is a cookie reply to an initiation
	// the peer holds, and keeps the cookie for the next initiation.
	consumeCookie(d []byte, now time.Time) bool
	// isResponse says whether d is the hub's response to an
	// initiation the peer holds, as far as that can be told without
	// the response's Diffie-Hellmans (the burst leaves them until its
	// clocks stopped).
	isResponse(d []byte) bool
	// finish opens the response d and takes its session: false if it
	// is no valid response to the initiations the peer holds.
	finish(d []byte) bool
	// reset forgets the initiations the peer holds: a new handshake
	// starts.
	reset()
}

// newSimPeer is peer i's place in the topology, its protocol not yet set.
func newSimPeer(i, shards int, spread bool) *simPeer {
	return &simPeer{i: i, addr: netip.AddrPortFrom(underlayAddr(i), peerPort(i, shards, spread)), inner: innerAddr(i)}
}

// parallel runs f(0) … f(n-1) on all CPUs we may use (key generation for
// thousands of peers), joining their errors.
func parallel(n int, f func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs error
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := f(i); err != nil {
					mu.Lock()
					errs = errors.Join(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return errs
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

// prebuild prepares the burst's first initiation.
func (p *simPeer) prebuild() error {
	p.proto.reset()
	dg, err := p.proto.initiate(time.Now())
	if err != nil {
		return err
	}
	p.firstDg = dg
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
// kept and opened after the phase (proto.finish).
func (p *simPeer) handshake(hub netip.AddrPort, prebuilt bool, deadline time.Time, st *hsStats) {
	start := time.Now()
	var dg []byte
	if prebuilt {
		dg = p.firstDg
	} else {
		p.proto.reset()
		var err error
		if dg, err = p.proto.initiate(start); err != nil {
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
		d, err := p.proto.initiate(now)
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
		if p.proto.consumeCookie(d, now) {
			cookies++
			st.cookies.Add(1)
			if !retry(now) {
				return
			}
			continue
		}
		if !p.proto.isResponse(d) {
			st.other.Add(1)
			continue
		}
		if prebuilt {
			// The burst: the response's DHs wait until the burst's
			// clocks stopped (proto.finish), so the generator spends
			// its CPU on the hub's socket, not on its own crypto. A
			// datagram taken for the response that does not open
			// ends the peer's wait and is counted ResponsesRefused,
			// not completed.
			p.resp = append(p.resp[:0], d...)
			p.hsTook = now.Sub(start)
			st.done.Add(1)
			st.cookiePer[min(cookies, 7)].Add(1)
			return
		}
		if p.proto.finish(d) {
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

// finishResponse opens the response the burst kept (handshake with
// prebuilt); false if it was no response to the peer's initiations.
func (p *simPeer) finishResponse() bool {
	d := p.resp
	p.resp = nil
	return p.proto.finish(d)
}
