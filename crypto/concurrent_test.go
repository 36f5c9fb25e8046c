package crypto

import (
	"net/netip"
	"sync"
	"testing"
	"time"
)

// Shards answer handshakes concurrently while the router reconfigures
// peers: run that under -race. Each initiator has its own peer entry, so
// every handshake must complete.
func TestConcurrentHandshakes(t *testing.T) {
	kb, _ := GeneratePrivateKey()
	resp := NewLocal(kb, true)
	cc := NewCookieChecker()
	const workers, rounds = 4, 8
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for w := range workers {
		ka, _ := GeneratePrivateKey()
		ini := NewLocal(ka, true)
		peerOfResp, _ := ini.AddPeer(resp.PublicKey(), PresharedKey{byte(w)})
		if _, err := resp.AddPeer(ini.PublicKey(), PresharedKey{byte(w)}); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := netip.AddrPortFrom(netip.MustParseAddr("192.0.2.9"), uint16(1000+w))
			for i := range rounds {
				now := t0.Add(time.Duration(i) * time.Second)
				in, d1, err := ini.Initiate(peerOfResp, uint32(i), offer(2, 1), now)
				if err != nil {
					errs <- err
					return
				}
				_ = cc.CheckMac2(d1, src, now)
				if _, err := resp.CookieReply(d1, cc, src, now); err != nil {
					errs <- err
					return
				}
				inc, err := resp.ConsumeInitiation(d1)
				if err != nil {
					errs <- err
					return
				}
				d2, _, err := inc.Respond(uint32(i), offer(2, 2))
				if err != nil {
					errs <- err
					return
				}
				if _, err := in.ConsumeResponse(d2); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	// Meanwhile, the router adds and removes unrelated peers.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			k, _ := GeneratePrivateKey()
			if _, err := resp.AddPeer(k.Public(), PresharedKey{}); err != nil {
				errs <- err
				return
			}
			resp.RemovePeer(k.Public())
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
