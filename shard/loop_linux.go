package shard

import (
	"net/netip"

	"fmt"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// Pin locks the calling goroutine to its OS thread and binds that thread
// to cpu, so the shard's cache, its socket's softirq work (with IRQ
// affinity set to match) and its TUN queue stay on one core.
func Pin(cpu int) error {
	runtime.LockOSThread()
	if cpu < 0 {
		return nil
	}
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("shard: pin to CPU %d: %w", cpu, err)
	}
	return nil
}

// Run is the shard's loop: it returns after Stop. It must run on its own
// goroutine; it locks that goroutine to a thread pinned to Config.CPU.
//
// Each iteration runs control commands, takes what other shards handed
// over, drains each socket and the TUN queue in batches (bounded per
// iteration so no source starves the others), sends what it staged with one
// sendmmsg per socket, and sleeps in one poll(2) over all its fds when an
// iteration found no work. The lanes' timers and the publication of
// counters run every idlePoll, not per iteration (their cost grows with
// the number of lanes); an FEC deadline falling due in between flushes
// only the encoders that hold a partial group (tickFEC).
func (s *Shard) Run() error {
	if err := Pin(s.cfg.CPU); err != nil {
		return err
	}
	defer runtime.UnlockOSThread()
	fds := make([]unix.PollFd, 0, len(s.cfg.Conns)+4) // and the known, strangers', TUN and waker fds
	for _, c := range s.cfg.Conns {
		fds = append(fds, unix.PollFd{Fd: int32(c.Fd()), Events: unix.POLLIN})
	}
	queues := [...]*unsteeredQueue{&s.known, &s.strangers}
	var queueFd [len(queues)]int
	for i, q := range queues {
		queueFd[i] = -1
		if q.sock != nil {
			queueFd[i] = len(fds)
			fds = append(fds, unix.PollFd{Fd: int32(q.sock.Fd()), Events: unix.POLLIN})
		}
	}
	if s.cfg.TUN != nil {
		fds = append(fds, unix.PollFd{Fd: int32(s.cfg.TUN.Fd()), Events: unix.POLLIN})
	}
	fds = append(fds, unix.PollFd{Fd: int32(s.waker.Fd()), Events: unix.POLLIN})
	lastTick := time.Now()
	for !s.stop.Load() {
		s.now = time.Now()
		s.runControl()
		work := s.takeMesh()
		for c := range s.cfg.Conns {
			work += s.readConn(c)
		}
		if s.cfg.TUN != nil {
			work += s.readTun()
		}
		busy := work > 0
		for _, q := range queues {
			work += s.readUnsteered(q, busy)
		}
		s.flushAll()
		if s.now.Sub(lastTick) >= idlePoll {
			s.fecDue = s.tick()
			s.flushAll()
			s.publish()
			lastTick = s.now
		} else if !s.fecDue.IsZero() && !s.now.Before(s.fecDue) {
			s.fecDue = s.tickFEC()
			s.flushAll()
		}
		if work > 0 {
			continue
		}
		timeout := idlePoll - s.now.Sub(lastTick)
		if !s.fecDue.IsZero() {
			timeout = min(timeout, time.Until(s.fecDue))
		}
		timeout = max(timeout, time.Millisecond)
		s.waker.PrepareSleep()
		if s.meshPending() {
			s.waker.CancelSleep()
			continue
		}
		for i, q := range queues {
			if f := queueFd[i]; f >= 0 {
				fds[f].Events = 0
				if q.polled(s.now) {
					fds[f].Events = unix.POLLIN
				} else {
					timeout = max(min(timeout, time.Until(q.quiet)), time.Millisecond)
				}
			}
		}
		_, err := unix.Poll(fds, int(timeout/time.Millisecond))
		for i, q := range queues {
			if f := queueFd[i]; f >= 0 && fds[f].Revents&unix.POLLIN != 0 {
				q.quiet = time.Time{} // it woke us: read it now
			}
		}
		s.waker.CancelSleep()
		s.waker.Drain()
		if err != nil && err != unix.EINTR {
			return fmt.Errorf("shard %d: poll: %w", s.id, err)
		}
	}
	s.flushAll()
	s.publish()
	return nil
}

// Stop asks Run to return and wakes it.
func (s *Shard) Stop() {
	s.stop.Store(true)
	s.waker.Kick()
}

func (s *Shard) meshPending() bool {
	for from := range s.mesh.Size() {
		if from != s.id && (s.mesh.fwd[from][s.id].Len() > 0 || s.mesh.ret[from][s.id].Len() > 0) {
			return true
		}
	}
	return s.ctlPending.Load() > 0
}

// readConn receives one batch from socket c and runs ingress on each
// datagram.
func (s *Shard) readConn(c int) int {
	got, _ := s.recvBatch(s.cfg.Conns[c], c, len(s.rx.Bufs))
	return got
}

// readUnsteered reads q's socket within its budget (the smaller one when
// busy: the iteration found lane work) and its rate; its datagrams count
// as arriving on Conns[0] (Config.Strangers).
func (s *Shard) readUnsteered(q *unsteeredQueue, busy bool) int {
	if q.sock == nil || s.now.Before(q.quiet) {
		return 0
	}
	allowed := q.allow(s.now)
	keys := 0 // the known socket: a token a datagram
	if q.hashed {
		keys = s.handshakeKeys()
	}
	total, spent, budget, batch := 0, 0.0, strangerBytes, strangerBatch
	if busy {
		budget, batch = strangerBusyBytes, strangerBatch/2
	}
	for budget > 0 && spent < float64(allowed) {
		authed, junk := s.authed, s.junkBytes
		got, bytes := s.recvBatch(q.sock, 0, min(batch, len(s.rx.Bufs), allowed-int(spent)))
		if got == 0 {
			break
		}
		total += got
		s.stats.c[q.in] += uint64(got)
		// Datagrams that opened under a lane's keys are a peer's (a lane
		// the steering map had no room for, or one not steered yet): only
		// the rest are charged to the rate, so a flood cannot hold such a
		// lane to it, nor the lane use up the rate. Junk pays for its
		// hashing too.
		spent += price(got-min(got, int(s.authed-authed)), s.junkBytes-junk, keys)
		budget -= bytes + got*strangerPrice
		if time.Since(s.now) > strangerTime {
			break
		}
	}
	q.took(spent)
	if total == 0 && allowed > 0 {
		q.quiet = s.now.Add(strangerRecheck)
	}
	return total
}

// recvBatch receives up to max messages from sock and runs ingress on
// each datagram in place, as received on conn; a UDP GRO message is cut
// into its datagrams here. It returns the datagrams and their bytes.
func (s *Shard) recvBatch(sock Socket, conn, max int) (got, bytes int) {
	n, err := sock.Recv(s.rx, max)
	if err != nil || n == 0 {
		return 0, 0
	}
	for i := range n {
		data, from := s.rx.Bufs[i][:s.rx.Sizes[i]], s.rx.Addrs[i]
		s.rxLocal = s.rx.Local[i]
		seg := s.rx.Seg[i]
		if seg <= 0 || seg >= len(data) {
			seg = len(data)
		} else {
			s.count(UDPSuperIn)
		}
		for first := true; first || len(data) > 0; first = false {
			d := data[:min(seg, len(data))]
			data = data[len(d):]
			got++
			bytes += len(d)
			s.stats.c[BytesIn] += uint64(len(d))
			s.ingress(conn, d, from)
		}
	}
	s.stats.c[UDPIn] += uint64(got)
	s.rxLocal = netip.Addr{}
	return got, bytes
}

// readTun reads up to one batch of packets from the TUN queue.
func (s *Shard) readTun() int {
	if s.vnet != nil {
		return s.readTunVnet()
	}
	got := 0
	for got < s.cfg.Batch {
		p := s.pool.Get()
		if p == nil {
			s.count(DropPoolEmpty)
			return got
		}
		n, err := s.tunIn(p.Buf[headroom:])
		if err != nil || n == 0 {
			s.pool.Put(p)
			return got
		}
		got++
		p.N = n
		s.count(TunIn)
		s.egress(p)
	}
	return got
}
