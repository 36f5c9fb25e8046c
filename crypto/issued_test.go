package crypto

import (
	"net/netip"
	"sync"
	"testing"
)

// The filter of addresses given a cookie: no false negative for a cookie
// of the current or the previous slot, few false positives, and a slot's
// filter is cleared only when its index comes round three slots later.
func TestIssuedFilter(t *testing.T) {
	var f issuedFilter
	addr := func(i int) netip.AddrPort {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), uint16(40000+i%7))
	}
	const s = int64(14_700_000) // a slot of today's clock
	if f.mayHave(addr(1), s) {
		t.Fatal("an empty filter has an address")
	}
	for i := range 20000 {
		f.add(addr(i), s)
	}
	for i := range 20000 {
		if !f.mayHave(addr(i), s) {
			t.Fatalf("address %d, given a cookie, is missing", i)
		}
	}
	fp := 0
	for i := 20000; i < 120000; i++ {
		if f.mayHave(addr(i), s) {
			fp++
		}
	}
	if fp > 100 { // 0.1% of 100,000; expected about 0.0001%
		t.Fatalf("%d false positives in 100,000", fp)
	}
	if f.mayHave(addr(1), s-1) || f.mayHave(addr(1), s+1) {
		t.Fatal("an address given a cookie of one slot is in another slot's filter")
	}
	f.add(addr(500000), s+1)
	f.add(addr(500001), s+2)
	if !f.mayHave(addr(1), s) || !f.mayHave(addr(500000), s+1) {
		t.Fatal("the next slots' cookies cleared a filter still in use")
	}
	f.add(addr(500002), s+3) // slot s's filter is reused
	if f.mayHave(addr(1), s) || !f.mayHave(addr(500002), s+3) || !f.mayHave(addr(500001), s+2) {
		t.Fatal("slot s+3 did not take slot s's filter alone")
	}
}

// Shards give cookies and check them at once (run under -race).
func TestIssuedFilterConcurrent(t *testing.T) {
	var f issuedFilter
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				a := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(w), byte(i >> 8), byte(i)}), 1)
				f.add(a, 7)
				if !f.mayHave(a, 7) {
					t.Error("an address just added is missing")
					return
				}
			}
		})
	}
	wg.Wait()
}
