// Package tun opens Linux TUN devices, one queue per shard. Each queue is a
// raw non-blocking fd that the shard polls itself (not through Go's
// netpoller), so a shard can sleep in one poll(2) on its sockets, its queue
// and its ring wake-up eventfd.
package tun

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

const cloneDevice = "/dev/net/tun"

// Device is a TUN interface with one or more queues.
type Device struct {
	Name   string
	Queues []*Queue
	// Offloads is what the kernel granted of what Open asked for.
	Offloads Offloads
}

// Offloads are the TUN device's offloads. With VnetHdr every read and
// write starts with a virtio_net_hdr; TSO lets the kernel hand us TCP
// superpackets of up to 64 KB and take them back, USO the same for UDP
// (kernels from 6.2). Both need VnetHdr.
type Offloads struct {
	VnetHdr bool
	TSO     bool
	USO     bool
}

// Queue is one queue fd of a device.
type Queue struct {
	fd   int
	vnet bool
}

// TUNSETOFFLOAD flags (linux/if_tun.h); x/sys/unix does not carry them.
const (
	tunFCsum = 0x01
	tunFTSO4 = 0x02
	tunFTSO6 = 0x04
	tunFUSO4 = 0x20
	tunFUSO6 = 0x40
)

// Open creates the TUN device name (the kernel picks one for a pattern like
// "yip%d") with the given number of queues. One queue opens a plain
// single-queue device, so --shards 1 works where multiqueue is missing;
// more use IFF_MULTI_QUEUE, which the kernel balances by flow hash (an inner
// flow always lands on the same queue, so sharding never reorders it).
// want says which offloads to ask for; Device.Offloads says which the
// kernel accepted (an older kernel refuses USO: Open carries on without).
func Open(name string, queues int, want Offloads) (*Device, error) {
	if queues < 1 || queues > 256 {
		return nil, fmt.Errorf("tun: %d queues out of range 1..256", queues)
	}
	if len(name) >= unix.IFNAMSIZ {
		return nil, fmt.Errorf("tun: interface name %q longer than %d bytes", name, unix.IFNAMSIZ-1)
	}
	flags := uint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if queues > 1 {
		flags |= unix.IFF_MULTI_QUEUE
	}
	if want.VnetHdr {
		flags |= unix.IFF_VNET_HDR
	} else {
		want = Offloads{}
	}
	d := &Device{Name: name}
	for i := range queues {
		fd, err := unix.Open(cloneDevice, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			d.Close()
			if errors.Is(err, unix.ENOENT) {
				return nil, fmt.Errorf("tun: %s missing (load the tun module): %w", cloneDevice, err)
			}
			if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
				return nil, fmt.Errorf("tun: opening %s needs root or CAP_NET_ADMIN: %w", cloneDevice, err)
			}
			return nil, fmt.Errorf("tun: open %s: %w", cloneDevice, err)
		}
		ifr, err := unix.NewIfreq(d.Name)
		if err != nil {
			unix.Close(fd)
			d.Close()
			return nil, fmt.Errorf("tun: interface name %q: %w", d.Name, err)
		}
		f := flags
		if i == 0 {
			// The device must be new: without IFF_TUN_EXCL a second
			// router with the same Name would attach queues to a live
			// router's device (and change its offloads) before anything
			// else noticed.
			f |= unix.IFF_TUN_EXCL
		}
		ifr.SetUint16(f)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			unix.Close(fd)
			d.Close()
			if i == 0 && errors.Is(err, unix.EBUSY) {
				return nil, fmt.Errorf("tun: interface %s already exists (another router, or a device of that name): %w", name, err)
			}
			if queues > 1 && errors.Is(err, unix.EINVAL) {
				return nil, fmt.Errorf("tun: queue %d of %s: multiqueue TUN not supported here (run with --shards 1): %w", i, name, err)
			}
			return nil, fmt.Errorf("tun: TUNSETIFF %s queue %d: %w", name, i, err)
		}
		d.Name = ifr.Name() // resolves a pattern on the first queue
		d.Queues = append(d.Queues, &Queue{fd: fd, vnet: want.VnetHdr})
		if i == 0 && want.VnetHdr {
			// Offloads are the device's: set once, on the first queue.
			d.Offloads = setOffload(fd, want)
		}
	}
	return d, nil
}

// setOffload asks for checksum offload plus want's TSO and USO, dropping
// USO, then TSO, when the kernel refuses; it returns what it got.
func setOffload(fd int, want Offloads) Offloads {
	for _, o := range []Offloads{want, {VnetHdr: true, TSO: want.TSO}, {VnetHdr: true}} {
		flags := tunFCsum
		if o.TSO {
			flags |= tunFTSO4 | tunFTSO6
		}
		if o.USO {
			flags |= tunFUSO4 | tunFUSO6
		}
		if unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, flags) == nil {
			return o
		}
	}
	// Not even checksum offload: reads and writes still carry the
	// header, every packet complete.
	_ = unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, 0)
	return Offloads{VnetHdr: true}
}

// Close closes every queue; the kernel removes a non-persistent device with
// its last queue.
func (d *Device) Close() error {
	var first error
	for _, q := range d.Queues {
		if err := q.Close(); err != nil && first == nil {
			first = err
		}
	}
	d.Queues = nil
	return first
}

// Fd is the queue's descriptor, for poll(2).
func (q *Queue) Fd() int { return q.fd }

// VnetHdr reports whether every read and write on q starts with a
// virtio_net_hdr.
func (q *Queue) VnetHdr() bool { return q.vnet }

// Read reads one packet. It returns (0, nil) when the queue is empty.
//
// Read and Write are raw system calls: the queue is non-blocking, so they
// never block, and a raw call skips the runtime's system call bookkeeping
// and keeps its monitor from taking the shard's P away mid-call (see
// udp.Conn.Recv).
func (q *Queue) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	for {
		r, _, errno := unix.RawSyscall(unix.SYS_READ, uintptr(q.fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch errno {
		case 0:
			return int(r), nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, nil
		}
		return 0, os.NewSyscallError("read tun", errno)
	}
}

// Write writes one packet. A full queue (EAGAIN) or a packet the kernel
// refuses (EINVAL, e.g. not IP) is reported so the caller can count a drop.
func (q *Queue) Write(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	for {
		_, _, errno := unix.RawSyscall(unix.SYS_WRITE, uintptr(q.fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return os.NewSyscallError("write tun", errno)
		}
		return nil
	}
}

// Close closes the queue.
func (q *Queue) Close() error {
	if q.fd < 0 {
		return nil
	}
	err := unix.Close(q.fd)
	q.fd = -1
	return err
}
