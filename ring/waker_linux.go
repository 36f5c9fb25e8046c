package ring

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Waker lets producers wake a consumer that sleeps in poll(2) together with
// its sockets and TUN queue. The eventfd is written only when the consumer
// announced it is going to sleep, so while it is busy a producer pays one
// atomic load per batch and no syscall.
//
// Protocol (a Dekker-style handshake; sync/atomic is sequentially
// consistent): the consumer calls PrepareSleep, re-checks its rings, and
// either CancelSleep()s or polls Fd(); after waking it calls CancelSleep and
// Drain. A producer pushes, then calls Wake.
type Waker struct {
	fd       int
	sleeping atomic.Uint32
	wakes    atomic.Uint64
}

// NewWaker creates the eventfd.
func NewWaker() (*Waker, error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("ring: eventfd: %w", err)
	}
	return &Waker{fd: fd}, nil
}

// Fd is the descriptor to poll for readability.
func (w *Waker) Fd() int { return w.fd }

// PrepareSleep announces that the consumer is about to sleep.
func (w *Waker) PrepareSleep() { w.sleeping.Store(1) }

// CancelSleep says the consumer is awake.
func (w *Waker) CancelSleep() { w.sleeping.Store(0) }

// Wake wakes the consumer if, and only if, it announced sleep.
func (w *Waker) Wake() {
	if w.sleeping.Load() == 1 && w.sleeping.CompareAndSwap(1, 0) {
		w.wakes.Add(1)
		var one [8]byte
		binary.NativeEndian.PutUint64(one[:], 1)
		_, _ = unix.Write(w.fd, one[:]) // EAGAIN only if the counter is saturated: still readable
	}
}

// Kick writes the eventfd whatever the consumer's state: for rare events
// (shutdown) that must not be lost to the sleep handshake.
func (w *Waker) Kick() {
	w.sleeping.Store(0)
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	_, _ = unix.Write(w.fd, one[:])
}

// Wakes is how many times a producer had to write the eventfd.
func (w *Waker) Wakes() uint64 { return w.wakes.Load() }

// Drain clears the eventfd after a wake-up.
func (w *Waker) Drain() {
	var buf [8]byte
	_, _ = unix.Read(w.fd, buf[:]) // EAGAIN when already drained
}

// Close releases the eventfd.
func (w *Waker) Close() error { return unix.Close(w.fd) }
