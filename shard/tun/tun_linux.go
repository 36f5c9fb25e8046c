// Package tun opens Linux TUN devices, one queue per shard. Each queue is a
// raw non-blocking fd that the shard polls itself (not through Go's
// netpoller), so a shard can sleep in one poll(2) on its sockets, its queue
// and its ring wake-up eventfd.
package tun

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

const cloneDevice = "/dev/net/tun"

// Device is a TUN interface with one or more queues.
type Device struct {
	Name   string
	Queues []*Queue
}

// Queue is one queue fd of a device.
type Queue struct {
	fd int
}

// Open creates the TUN device name (the kernel picks one for a pattern like
// "yip%d") with the given number of queues. One queue opens a plain
// single-queue device, so --shards 1 works where multiqueue is missing;
// more use IFF_MULTI_QUEUE, which the kernel balances by flow hash (an inner
// flow always lands on the same queue, so sharding never reorders it).
func Open(name string, queues int) (*Device, error) {
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
		ifr.SetUint16(flags)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			unix.Close(fd)
			d.Close()
			if queues > 1 && errors.Is(err, unix.EINVAL) {
				return nil, fmt.Errorf("tun: queue %d of %s: multiqueue TUN not supported here (run with --shards 1): %w", i, name, err)
			}
			return nil, fmt.Errorf("tun: TUNSETIFF %s queue %d: %w", name, i, err)
		}
		d.Name = ifr.Name() // resolves a pattern on the first queue
		d.Queues = append(d.Queues, &Queue{fd: fd})
	}
	return d, nil
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

// Read reads one packet. It returns (0, nil) when the queue is empty.
func (q *Queue) Read(b []byte) (int, error) {
	for {
		n, err := unix.Read(q.fd, b)
		switch {
		case err == nil:
			return n, nil
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return 0, nil
		}
		return 0, os.NewSyscallError("read tun", err)
	}
}

// Write writes one packet. A full queue (EAGAIN) or a packet the kernel
// refuses (EINVAL, e.g. not IP) is reported so the caller can count a drop.
func (q *Queue) Write(b []byte) error {
	for {
		_, err := unix.Write(q.fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return os.NewSyscallError("write tun", err)
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
