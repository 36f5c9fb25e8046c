package ring

import (
	"runtime"
	"testing"
)

// BenchmarkSPSCSameGoroutine is the cost of the ring itself per item.
func BenchmarkSPSCSameGoroutine(b *testing.B) {
	for _, batch := range []int{1, 32} {
		b.Run(map[int]string{1: "batch1", 32: "batch32"}[batch], func(b *testing.B) {
			r, _ := NewSPSC[*Packet](1024)
			buf := make([]*Packet, batch)
			for i := 0; i < b.N; i += batch {
				r.Push(buf)
				r.Pop(buf)
			}
		})
	}
}

// BenchmarkSPSCCrossCore moves b.N items from one goroutine to another in
// batches of 32 (ns/op is per item). Run with -cpu 2 to have two cores.
func BenchmarkSPSCCrossCore(b *testing.B) {
	r, _ := NewSPSC[*Packet](1024)
	done := make(chan struct{})
	go func() {
		buf := make([]*Packet, 32)
		for got := 0; got < b.N; {
			n := r.Pop(buf)
			if n == 0 {
				runtime.Gosched()
			}
			got += n
		}
		close(done)
	}()
	buf := make([]*Packet, 32)
	for sent := 0; sent < b.N; {
		n := r.Push(buf[:min(32, b.N-sent)])
		if n == 0 {
			runtime.Gosched()
		}
		sent += n
	}
	<-done
}
