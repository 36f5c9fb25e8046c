// The campaign's traffic: the paced, sequence-numbered stream A sends B,
// scored over any span afterwards, and internal/flood's attacker attached
// to B, with the capture of A's datagrams it replays.

package e2e

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yip-router/yip-router/internal/flood"
	"github.com/yip-router/yip-router/internal/lab"
	"github.com/yip-router/yip-router/internal/netns"
)

// window is what the stream delivered of the datagrams sent in a span.
type window struct{ sent, got int }

func (w window) ratio() float64 {
	if w.sent == 0 {
		return 0
	}
	return float64(w.got) / float64(w.sent)
}

// stream is a paced, sequence-numbered UDP stream from A's inner address to
// B's that records when each datagram was sent and whether it arrived, so
// any span can be scored afterwards. It outlives a restart of A: a failed
// send is not counted as sent, and the socket is dialled again.
type stream struct {
	t      *testing.T
	l      *lab.Lab
	tag    uint64
	start  time.Time
	paused atomic.Bool
	mu     sync.Mutex
	sentAt []time.Duration // since start, by sequence number
	got    []bool
	dups   atomic.Int64 // a sequence number that arrived twice
	stale  atomic.Int64 // arrived more than 4 s after it was sent (a replay)
	stop   chan struct{}
	done   sync.WaitGroup
	once   sync.Once
}

const streamPort = 5402

func startStream(t *testing.T, l *lab.Lab, pps, size int) *stream {
	s := &stream{t: t, l: l, tag: rand.Uint64(), start: time.Now(), stop: make(chan struct{})}
	var rx *net.UDPConn
	err := netns.Do(l.NS[lab.B], func() error {
		var err error
		rx, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(l.Inner4[lab.B], streamPort)))
		if err == nil {
			err = rx.SetReadBuffer(8 << 20)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s.done.Add(2)
	go func() {
		defer s.done.Done()
		defer rx.Close()
		buf := make([]byte, 2048)
		for {
			_ = rx.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			n, err := rx.Read(buf)
			if err != nil {
				select {
				case <-s.stop:
					return
				default:
					continue
				}
			}
			if n < 16 || binary.BigEndian.Uint64(buf) != s.tag {
				s.stale.Add(1)
				continue
			}
			seq := binary.BigEndian.Uint64(buf[8:])
			now := time.Since(s.start)
			s.mu.Lock()
			switch {
			case seq >= uint64(len(s.got)) || s.sentAt[seq] < 0:
				s.stale.Add(1)
			case s.got[seq]:
				s.dups.Add(1)
			case now-s.sentAt[seq] > 4*time.Second:
				s.stale.Add(1)
			default:
				s.got[seq] = true
			}
			s.mu.Unlock()
		}
	}()
	go func() {
		defer s.done.Done()
		var tx *net.UDPConn
		defer func() {
			if tx != nil {
				tx.Close()
			}
		}()
		var lastDial time.Time
		payload := make([]byte, max(size, 16))
		binary.BigEndian.PutUint64(payload, s.tag)
		interval := time.Second / time.Duration(pps)
		next := time.Now()
		for {
			select {
			case <-s.stop:
				return
			default:
			}
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			} else if d < -100*time.Millisecond {
				next = time.Now() // starved: do not burst to catch up
			}
			next = next.Add(interval)
			if s.paused.Load() {
				continue
			}
			if tx == nil {
				if time.Since(lastDial) < 20*time.Millisecond {
					continue
				}
				lastDial = time.Now()
				_ = netns.Do(l.NS[lab.A], func() error {
					var err error
					tx, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(l.Inner4[lab.B], streamPort)))
					return err
				})
				if tx == nil {
					continue
				}
			}
			s.mu.Lock()
			seq := len(s.sentAt)
			s.sentAt = append(s.sentAt, time.Since(s.start))
			s.got = append(s.got, false)
			s.mu.Unlock()
			binary.BigEndian.PutUint64(payload[8:], uint64(seq))
			if _, err := tx.Write(payload); err != nil {
				s.mu.Lock()
				s.sentAt[seq] = -1
				s.mu.Unlock()
				tx.Close()
				tx = nil
			}
		}
	}()
	return s
}

func (s *stream) close() {
	s.once.Do(func() {
		time.Sleep(300 * time.Millisecond)
		close(s.stop)
		s.done.Wait()
	})
}

// window scores the datagrams sent in [from, to).
func (s *stream) window(from, to time.Time) window {
	a, b := from.Sub(s.start), to.Sub(s.start)
	s.mu.Lock()
	defer s.mu.Unlock()
	var w window
	for i, at := range s.sentAt {
		if at >= a && at < b {
			w.sent++
			if s.got[i] {
				w.got++
			}
		}
	}
	return w
}

// recovery is how long after from it took until every step-long slice of
// the stream up to to delivered at least frac (to-from when none did).
func (s *stream) recovery(from, to time.Time, step time.Duration, frac float64) time.Duration {
	r := time.Duration(0)
	for at := from; at.Add(step).Compare(to) <= 0; at = at.Add(step) {
		if w := s.window(at, at.Add(step)); w.sent == 0 || w.ratio() < frac {
			r = at.Add(step).Sub(from)
		}
	}
	return r
}

// startCapture records up to n IP packets A's underlay address sends to
// B's ListenPort, as seen on B's veth, until timeout.
func startCapture(t *testing.T, l *lab.Lab, n int, timeout time.Duration) *flood.Capture {
	c, err := flood.StartCapture(flood.CaptureOptions{NS: l.NS[lab.B], Ifname: l.Veth(lab.B),
		Src: l.Underlay[lab.A], Port: lab.Port, N: n, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newAttacker attaches internal/flood's attacker to B: namespace yipX-…,
// a veth into B's namespace (172.31.251.2 on its end, 172.31.251.1 in
// B), a route from B back to the spoofed sources, reverse-path filtering
// off in B, and a raw socket.
func newAttacker(t *testing.T, l *lab.Lab) *flood.Attacker {
	id := l.NS[0][len("yipA-"):]
	at, err := flood.Attach(flood.Options{NS: "yipX-" + id, Target: l.NS[lab.B], VethTarget: "xb" + id, VethSelf: "xa" + id,
		Receiver: netip.AddrPortFrom(l.Underlay[lab.B], lab.Port)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(at.Close)
	return at
}

// sending is an attack: pkts from at, round and round until stop (to the
// port at.SetPort last set), returning how many the kernel took.
func sending(at *flood.Attacker, pkts [][]byte) func(stop *atomic.Bool) uint64 {
	return func(stop *atomic.Bool) uint64 { return at.Send(stop, pkts, 0) }
}
