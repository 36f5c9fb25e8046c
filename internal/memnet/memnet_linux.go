// Package memnet is an underlay and TUN queues in memory, for tests that
// run whole routers (control core and shard loops) without root or
// namespaces: Sockets (shard.Socket, and the handshake sends of the
// router's DataPlane) joined by a Wire that can lose datagrams and move a
// host to another address (roaming, a NAT's new mapping) or swap a
// datagram with the next of its path (reordering), and TUN queues
// (shard.TUNQueue) that the test writes packets into and reads the
// delivered ones from.
//
// The shard's loop sleeps in poll(2) on its descriptors, so every socket
// and TUN queue has an eventfd that is readable exactly while something
// waits in it (queue). A send delivers at once, on the sender's
// goroutine: the Wire decides loss and the destination under its lock and
// appends a copy to the receiving socket's queue. Nothing is delayed but
// what Reorder holds back; a datagram to an address no socket is bound to
// is lost.
package memnet

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/netip"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/yip-router/yip-router/shard/udp"
)

// Datagram is one datagram on the wire: From as the receiver sees it (after
// a Move), To as the sender addressed it. Data belongs to the wire: a Lose
// function must not keep it.
type Datagram struct {
	From, To netip.AddrPort
	Data     []byte
}

// Stats count the datagrams sent on a Wire.
type Stats struct {
	Delivered   uint64 // appended to a socket's queue
	Lost        uint64 // lost by the Lose function
	Reordered   uint64 // held back by the Reorder function
	Unreachable uint64 // sent to an address no socket is bound to (or a host moved away from)
}

// Wire joins the Sockets bound on it. Its methods are safe for concurrent
// use.
type Wire struct {
	mu sync.Mutex
	// bound are the sockets at each address; several are a reuseport
	// group (Listen).
	bound map[netip.AddrPort][]*Socket
	// seenAt: the host bound at the key is seen at the value (Move), and
	// its reverse.
	seenAt, boundAt map[netip.Addr]netip.Addr
	lose, reorder   func(Datagram) bool
	// held are the datagrams Reorder held back, by path.
	held  map[path][]Datagram
	stats Stats
}

// path is a source as seen and a destination.
type path [2]netip.AddrPort

// NewWire is a wire with nothing bound and no loss.
func NewWire() *Wire {
	return &Wire{bound: map[netip.AddrPort][]*Socket{}, held: map[path][]Datagram{},
		seenAt: map[netip.Addr]netip.Addr{}, boundAt: map[netip.Addr]netip.Addr{}}
}

// Listen binds a socket at addr (a port must be given). A second socket
// at the same address joins the first in a group, as SO_REUSEPORT
// sockets do: a datagram goes to the member whose index is its source
// port & udp.LaneMask, if there is one, else to one picked by a hash of
// its source, which is what udp.ListenGroup's steering by source port
// does.
func (w *Wire) Listen(addr netip.AddrPort) (*Socket, error) {
	if !addr.IsValid() || addr.Port() == 0 {
		return nil, fmt.Errorf("memnet: listen on %v: give an address and a port", addr)
	}
	q, err := newQueue()
	if err != nil {
		return nil, err
	}
	s := &Socket{w: w, addr: addr, q: q}
	w.mu.Lock()
	w.bound[addr] = append(w.bound[addr], s)
	w.mu.Unlock()
	return s, nil
}

// Lose sets what the wire loses: f sees every datagram, under the wire's
// lock (so f needs none of its own), and returns true to lose it. nil
// loses nothing.
func (w *Wire) Lose(f func(Datagram) bool) {
	w.mu.Lock()
	w.lose = f
	w.mu.Unlock()
}

// Reorder sets what the wire reorders: f sees every datagram it does not
// lose, under the wire's lock, and returns true to hold it back until the
// next datagram of its path (source as seen, destination) is delivered,
// which then arrives first. A held datagram whose path carries nothing
// more stays held. nil reorders nothing.
func (w *Wire) Reorder(f func(Datagram) bool) {
	w.mu.Lock()
	w.reorder = f
	w.mu.Unlock()
}

// Move makes the host whose sockets are bound at from be seen at to, as
// when a roaming host gets a new address or its NAT a new mapping: what
// its sockets send comes from to (same ports), what is sent to to reaches
// them, and what is still sent to from is lost. Move(from, from) puts it
// back.
func (w *Wire) Move(from, to netip.Addr) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if old, ok := w.seenAt[from]; ok {
		delete(w.boundAt, old)
		delete(w.seenAt, from)
	}
	if to != from {
		w.seenAt[from] = to
		w.boundAt[to] = from
	}
}

// Stats reads the wire's counts.
func (w *Wire) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// send carries data from socket s to the address to.
func (w *Wire) send(s *Socket, to netip.AddrPort, data []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	from := s.addr
	if seen, ok := w.seenAt[from.Addr()]; ok {
		from = netip.AddrPortFrom(seen, from.Port())
	}
	d := Datagram{From: from, To: to, Data: data}
	if w.lose != nil && w.lose(d) {
		w.stats.Lost++
		return
	}
	k := path{from, to}
	if w.reorder != nil && w.reorder(d) {
		d.Data = append([]byte(nil), data...)
		w.held[k] = append(w.held[k], d)
		w.stats.Reordered++
		return
	}
	w.deliver(d)
	if h := w.held[k]; len(h) > 0 {
		delete(w.held, k)
		for _, d := range h {
			w.deliver(d)
		}
	}
}

// deliver appends a copy of d to the queue of the socket it reaches.
// Caller holds mu.
func (w *Wire) deliver(d Datagram) {
	from, to := d.From, d.To
	dst := to
	if b, ok := w.boundAt[to.Addr()]; ok {
		dst = netip.AddrPortFrom(b, to.Port())
	} else if _, gone := w.seenAt[to.Addr()]; gone {
		w.stats.Unreachable++ // the host left that address
		return
	}
	group := w.bound[dst]
	if len(group) == 0 {
		w.stats.Unreachable++
		return
	}
	r := group[0]
	if len(group) > 1 {
		r = pick(group, from)
	}
	w.stats.Delivered++
	r.q.push(item{data: append([]byte(nil), d.Data...), from: from})
}

// pick is the member of a group a datagram from src reaches (Listen).
func pick(group []*Socket, src netip.AddrPort) *Socket {
	if i := int(src.Port() & udp.LaneMask); i < len(group) {
		return group[i]
	}
	h := fnv.New32a()
	b, _ := src.MarshalBinary()
	h.Write(b)
	return group[int(h.Sum32()%uint32(len(group)))]
}

// Spaced is a Lose or Reorder function that picks one datagram of each
// path (source as seen, destination) in every gap of lo to hi datagrams,
// the gaps drawn from a generator seeded with seed: about 2/(lo+hi) of
// them, no two of a path fewer than lo datagrams apart. As a loss, FEC
// whose groups span fewer than lo datagrams of a path recovers all of it.
// The gaps vary lest the picks keep hitting one place in a periodic
// stream (every 20th datagram of groups of 8 data and 2 parity symbols is
// the same parity symbol each time). Use each one on one Wire (it counts
// under that wire's lock).
func Spaced(lo, hi int, seed uint64) func(Datagram) bool {
	rnd := rand.New(rand.NewPCG(seed, 0x6d656d6e6574))
	gap := func() int { return lo + rnd.IntN(hi-lo+1) }
	next := map[path]int{} // datagrams of the path until its next one
	return func(d Datagram) bool {
		k := path{d.From, d.To}
		n, ok := next[k]
		if !ok {
			n = gap()
		}
		if n--; n > 0 {
			next[k] = n
			return false
		}
		next[k] = gap()
		return true
	}
}

// Socket is a UDP socket on a Wire: shard.Socket, and the handshake sends
// of the router's plane. Safe for concurrent use, as a kernel socket.
type Socket struct {
	w    *Wire
	addr netip.AddrPort
	q    *queue
}

// Fd is readable while datagrams wait (an eventfd).
func (s *Socket) Fd() int { return s.q.fd }

// LocalAddr is the address the socket is bound at (not where a Move makes
// it seen).
func (s *Socket) LocalAddr() netip.AddrPort { return s.addr }

// GRO is false: one datagram a message.
func (s *Socket) GRO() bool { return false }

// Recv moves up to n waiting datagrams into b (Bufs, Sizes, Addrs; a
// datagram longer than its buffer is cut, as the kernel does) and returns
// how many; 0 when none wait.
func (s *Socket) Recv(b *udp.Batch, n int) (int, error) {
	n = min(n, b.Len())
	got := 0
	for got < n {
		it, ok := s.q.pop()
		if !ok {
			break
		}
		b.Sizes[got] = copy(b.Bufs[got], it.data)
		b.Addrs[got] = it.from
		b.Seg[got], b.Local[got] = 0, netip.Addr{}
		got++
	}
	return got, nil
}

// Send puts b's first n datagrams on the wire. The wire takes them all
// (b.Sent); it may lose them on the way.
func (s *Socket) Send(b *udp.Batch, n int) (int, error) {
	n = min(n, b.Len())
	b.LocalGone = netip.Addr{}
	for i := range n {
		s.w.send(s, b.Addrs[i], b.Bufs[i][:b.Sizes[i]])
		b.Sent[i] = true
	}
	return n, nil
}

// SendTo sends one datagram.
func (s *Socket) SendTo(data []byte, to netip.AddrPort) error {
	s.w.send(s, to, data)
	return nil
}

// SendFrom sends one datagram; a socket has one address, so from changes
// nothing.
func (s *Socket) SendFrom(data []byte, to netip.AddrPort, _ netip.Addr) error {
	return s.SendTo(data, to)
}

// Close unbinds the socket and closes its eventfd. Close it only after
// whatever polls it stopped.
func (s *Socket) Close() error {
	s.w.mu.Lock()
	g := s.w.bound[s.addr]
	for i, o := range g {
		if o == s {
			g = append(g[:i:i], g[i+1:]...)
			break
		}
	}
	if len(g) == 0 {
		delete(s.w.bound, s.addr)
	} else {
		s.w.bound[s.addr] = g
	}
	s.w.mu.Unlock()
	return s.q.close()
}

// TUN is one TUN queue in memory: shard.TUNQueue. The test writes packets
// in (Inject: what the kernel routes into the tunnel), which the shard
// reads, and takes the packets the shard wrote (Take). Plain packets, no
// virtio-net header. Safe for concurrent use.
type TUN struct {
	in  *queue
	mu  sync.Mutex
	out [][]byte
}

// NewTUN makes an empty queue.
func NewTUN() (*TUN, error) {
	q, err := newQueue()
	if err != nil {
		return nil, err
	}
	return &TUN{in: q}, nil
}

// Fd is readable while injected packets wait for the shard (an eventfd).
func (t *TUN) Fd() int { return t.in.fd }

// VnetHdr is false: plain packets.
func (t *TUN) VnetHdr() bool { return false }

// Read takes the oldest injected packet; (0, nil) when none waits. A
// packet longer than b is cut.
func (t *TUN) Read(b []byte) (int, error) {
	it, ok := t.in.pop()
	if !ok {
		return 0, nil
	}
	return copy(b, it.data), nil
}

// Write keeps a copy of a packet the shard wrote, for Take.
func (t *TUN) Write(b []byte) error {
	t.mu.Lock()
	t.out = append(t.out, append([]byte(nil), b...))
	t.mu.Unlock()
	return nil
}

// Inject queues pkt for the shard to read, as if the kernel routed it
// into the tunnel through this queue.
func (t *TUN) Inject(pkt []byte) {
	t.in.push(item{data: append([]byte(nil), pkt...)})
}

// Take returns the packets the shard wrote since the last Take, oldest
// first.
func (t *TUN) Take() [][]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.out
	t.out = nil
	return out
}

// Close closes the eventfd. Close it only after whatever polls it
// stopped.
func (t *TUN) Close() error { return t.in.close() }

// item is one waiting datagram or packet.
type item struct {
	data []byte
	from netip.AddrPort
}

// queue is a FIFO whose eventfd is readable exactly while it is not
// empty: push makes the count non-zero when the first item arrives, pop
// reads it back to zero when it takes the last, both under mu.
type queue struct {
	mu     sync.Mutex
	fd     int
	items  []item
	closed bool
}

func newQueue() (*queue, error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memnet: eventfd: %w", err)
	}
	return &queue{fd: fd}, nil
}

func (q *queue) push(it item) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	if len(q.items) == 0 {
		var one [8]byte
		binary.NativeEndian.PutUint64(one[:], 1)
		_, _ = unix.Write(q.fd, one[:])
	}
	q.items = append(q.items, it)
}

func (q *queue) pop() (item, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == 0 {
		return item{}, false
	}
	it := q.items[0]
	q.items[0] = item{}
	q.items = q.items[1:]
	if len(q.items) == 0 {
		q.items = nil
		var b [8]byte
		_, _ = unix.Read(q.fd, b[:])
	}
	return it, true
}

func (q *queue) close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return errors.New("memnet: closed twice")
	}
	q.closed = true
	q.items = nil
	return unix.Close(q.fd)
}
