package impair

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/yip-router/yip-router/internal/netns"
)

// Config is the impairment of both directions of a bridge: Dir[0] applies
// to frames from the first link to the second (in the lab: A to B),
// Dir[1] to the other way.
type Config struct {
	Dir [2]Direction
	// Slots is the number of frame buffers per direction (default 16384:
	// 25 ms at 1 Gbit/s of 1400-byte frames is ~2200); a frame that finds
	// none free is dropped (DropFull).
	Slots int
}

// Both returns a Config with d in both directions (the second one seeded
// differently).
func Both(d Direction) *Config {
	c := &Config{Dir: [2]Direction{d, d}}
	c.Dir[1].Seed = d.Seed + 0x5bd1e995
	return c
}

const (
	slotSize = 2048 // veth MTU 1500 + header; offloads are off (see Start)
	batch    = 64
)

// Bridge runs a Config between two links of a namespace.
type Bridge struct {
	fds  [2]int
	dirs [2]*dir
	stop atomic.Bool
	wg   sync.WaitGroup
	base time.Time
}

type dir struct {
	mu   sync.Mutex
	m    *Model
	q    *Queue
	kick chan struct{}
	in   int
	out  int
}

// Start opens AF_PACKET sockets on links if0 and if1 of namespace ns and
// bridges them under cfg until Close. The links should have no addresses;
// Start turns their offloads off (so frames are single segments with full
// checksums) and sets them promiscuous. The peers' links should have
// offloads off too (DisableOffloads).
func Start(ns, if0, if1 string, cfg *Config) (*Bridge, error) {
	slots := cfg.Slots
	if slots == 0 {
		slots = 16384
	}
	if slots < 2*batch {
		// The reader holds a batch of buffers while it receives.
		return nil, fmt.Errorf("impair: %d slots, need at least %d", slots, 2*batch)
	}
	b := &Bridge{fds: [2]int{-1, -1}, base: time.Now()}
	err := netns.Do(ns, func() error {
		for i, name := range []string{if0, if1} {
			if err := disableOffloads(name); err != nil {
				return err
			}
			ifi, err := net.InterfaceByName(name)
			if err != nil {
				return err
			}
			fd, err := packetSocket(ifi.Index)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			b.fds[i] = fd
		}
		return nil
	})
	if err != nil {
		b.closeFDs()
		return nil, err
	}
	for i := range 2 {
		b.dirs[i] = &dir{m: NewModel(cfg.Dir[i]), q: NewQueue(slots, slotSize), kick: make(chan struct{}, 1), in: b.fds[i], out: b.fds[1-i]}
	}
	for _, d := range b.dirs {
		b.wg.Add(2)
		go b.read(d)
		go b.write(d)
	}
	return b, nil
}

func packetSocket(ifindex int) (int, error) {
	proto := int(htons(unix.ETH_P_ALL))
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return -1, err
	}
	set := func(level, opt, v int) error { return unix.SetsockoptInt(fd, level, opt, v) }
	tv := unix.NsecToTimeval(int64(100 * time.Millisecond))
	for _, e := range []error{
		set(unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1),
		set(unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20),
		set(unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 8<<20),
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv),
		unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex}),
		unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &unix.PacketMreq{Ifindex: int32(ifindex), Type: unix.PACKET_MR_PROMISC}),
	} {
		if e != nil {
			unix.Close(fd)
			return -1, e
		}
	}
	return fd, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// DisableOffloads turns off checksum offload, segmentation offloads and
// GRO on link name of the calling thread's namespace (netns.Do), as
// `ethtool -K name tx off sg off tso off gso off gro off` would: frames
// then cross the bridge one segment at a time with complete checksums.
func DisableOffloads(ns, name string) error {
	return netns.Do(ns, func() error { return disableOffloads(name) })
}

func disableOffloads(name string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	const (
		setTxCsum = 0x17
		setSG     = 0x19
		setTSO    = 0x1f
		setGSO    = 0x24
		setGRO    = 0x2c
	)
	for _, cmd := range []uint32{setGRO, setGSO, setTSO, setSG, setTxCsum} {
		v := struct{ cmd, data uint32 }{cmd, 0}
		var ifr struct {
			name [unix.IFNAMSIZ]byte
			data uintptr
			_    [16]byte
		}
		copy(ifr.name[:], name)
		ifr.data = uintptr(unsafe.Pointer(&v))
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); e != 0 && e != unix.EOPNOTSUPP {
			return fmt.Errorf("ethtool %#x on %s: %w", cmd, name, e)
		}
	}
	return nil
}

func (b *Bridge) now() int64 { return int64(time.Since(b.base)) }

// read moves frames from d.in into d's queue, batch by batch.
func (b *Bridge) read(d *dir) {
	defer b.wg.Done()
	var (
		slots [batch]int32
		iov   [batch]unix.Iovec
		hdrs  [batch]unix.Mmsghdr
	)
	d.mu.Lock()
	for i := range slots {
		slots[i], _ = d.q.Get()
	}
	d.mu.Unlock()
	setup := func(i int) {
		buf := d.q.Buf(slots[i])
		iov[i].Base = &buf[0]
		iov[i].SetLen(len(buf))
		hdrs[i].Hdr.Iov = &iov[i]
		hdrs[i].Hdr.Iovlen = 1
	}
	for i := range slots {
		setup(i)
	}
	for !b.stop.Load() {
		n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(d.in), uintptr(unsafe.Pointer(&hdrs[0])), batch, unix.MSG_WAITFORONE, 0, 0)
		if e != 0 {
			if e == unix.EAGAIN || e == unix.EINTR {
				continue
			}
			if !b.stop.Load() {
				time.Sleep(10 * time.Millisecond)
			}
			continue
		}
		now := b.now()
		wake := false
		d.mu.Lock()
		for i := range int(n) {
			ln := int(hdrs[i].Len)
			if hdrs[i].Hdr.Flags&unix.MSG_TRUNC != 0 || ln > slotSize {
				d.m.Stats.Seen++
				d.m.Stats.DropBig++
				continue
			}
			if d.q.Free() == 0 {
				// No buffer for it: dropped before the model charges
				// its delay and rate accounting for a frame never sent.
				d.m.Stats.Seen++
				d.m.Stats.DropFull++
				continue
			}
			due, c := d.m.Decide(now, ln)
			if c != Pass {
				continue
			}
			fresh, _ := d.q.Get() // a free slot was checked above, under d.mu
			if head, ok := d.q.Peek(); !ok || due < head {
				wake = true
			}
			d.q.Push(slots[i], ln, due)
			slots[i] = fresh
			setup(i)
		}
		d.mu.Unlock()
		if wake {
			select {
			case d.kick <- struct{}{}:
			default:
			}
		}
	}
}

// write sends d's frames on d.out when they are due, those due together in
// one sendmmsg.
func (b *Bridge) write(d *dir) {
	defer b.wg.Done()
	var (
		slots [batch]int32
		iov   [batch]unix.Iovec
		hdrs  [batch]unix.Mmsghdr
	)
	timer := time.NewTimer(time.Hour)
	for !b.stop.Load() {
		d.mu.Lock()
		due, ok := d.q.Peek()
		now := b.now()
		if !ok || due > now {
			d.mu.Unlock()
			wait := 100 * time.Millisecond
			if ok {
				wait = time.Duration(due - now)
			}
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-d.kick:
				timer.Stop() // Go ≥ 1.23: no stale tick after Stop
			}
			continue
		}
		k := 0
		for k < batch {
			due, ok := d.q.Peek()
			if !ok || due > now {
				break
			}
			s, n := d.q.Pop()
			slots[k] = s
			buf := d.q.Buf(s)
			iov[k].Base = &buf[0]
			iov[k].SetLen(n)
			hdrs[k].Hdr.Iov = &iov[k]
			hdrs[k].Hdr.Iovlen = 1
			k++
		}
		d.mu.Unlock()
		sent, bytes := 0, uint64(0)
		for sent < k {
			n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(d.out), uintptr(unsafe.Pointer(&hdrs[sent])), uintptr(k-sent), 0, 0, 0)
			if e != 0 {
				if e == unix.EINTR {
					continue
				}
				break // the rest is dropped
			}
			for i := sent; i < sent+int(n); i++ {
				bytes += uint64(iov[i].Len)
			}
			sent += int(n)
		}
		d.mu.Lock()
		d.m.Stats.Sent += uint64(sent)
		d.m.Stats.Bytes += bytes
		d.m.Stats.DropSend += uint64(k - sent)
		for _, s := range slots[:k] {
			d.q.Put(s)
		}
		d.mu.Unlock()
	}
}

// Set changes the impairment (Slots aside) of a running bridge; counters
// and queued frames are kept.
func (b *Bridge) Set(cfg *Config) {
	for i, d := range b.dirs {
		d.mu.Lock()
		d.m.Set(cfg.Dir[i])
		d.mu.Unlock()
	}
}

// Stats returns both directions' counters.
func (b *Bridge) Stats() [2]Stats {
	var s [2]Stats
	for i, d := range b.dirs {
		d.mu.Lock()
		s[i] = d.m.Stats
		d.mu.Unlock()
	}
	return s
}

// Close stops the bridge (frames still queued are discarded).
func (b *Bridge) Close() error {
	if b.stop.Swap(true) {
		return errors.New("impair: bridge already closed")
	}
	for _, d := range b.dirs {
		select {
		case d.kick <- struct{}{}:
		default:
		}
	}
	b.wg.Wait()
	b.closeFDs()
	return nil
}

func (b *Bridge) closeFDs() {
	for i, fd := range b.fds {
		if fd >= 0 {
			unix.Close(fd)
			b.fds[i] = -1
		}
	}
}
