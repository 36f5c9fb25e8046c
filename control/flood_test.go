package control

import (
	"net"
	"net/netip"
	"testing"

	"github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/shard"
)

// BenchmarkFloodInitiation is what one spoofed initiation with a valid
// mac1 costs the shard that receives it while the router is under load
// (it answers with a cookie reply): the work that competes with data on
// that shard during a handshake flood.
func BenchmarkFloodInitiation(b *testing.B) {
	resp := newMemCore(b, "192.0.2.1:51820", 1, nil)
	// A peer without a PSK, so that resp accepts the public-key-only
	// form the attacker uses.
	pk, _ := crypto.GeneratePrivateKey()
	if err := resp.SetPeers([]config.Peer{{PublicKey: pk.Public()}}); err != nil {
		b.Fatal(err)
	}
	// Distinct initiations (a repeated one is dropped as a replay), cycled:
	// with four times as many as the replay filter's slots, about 2% of
	// them are still remembered when they come round again.
	inits := attackerInitiations(b, resp, 16384)
	// "sendto" sends the cookie replies from a real UDP socket to the
	// discard port (nothing listens): the system call is part of the cost.
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	sink := netip.MustParseAddrPort("127.0.0.1:9")
	for _, send := range []string{"staged", "sendto"} {
		b.Run(send, func(b *testing.B) {
			resp.plane.send = func(_, _ int, p []byte, _ netip.AddrPort) error {
				if send == "sendto" {
					_, err := conn.WriteToUDPAddrPort(p, sink)
					return err
				}
				return nil
			}
			from := netip.MustParseAddrPort("10.64.0.1:40000")
			resp.inits.set(resp.clock.Now(), 1<<30)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				from = netip.AddrPortFrom(from.Addr().Next(), uint16(i))
				resp.Unmatched(0, ConnGroup, inits[i%len(inits)], from, netip.Addr{})
			}
		})
	}
}

// Garbage that matches no lane — the bulk of any flood — is refused
// without allocating, whatever its length (short, cookie-reply length,
// handshake length with a wrong mac1 under each of several handshake
// keys: three PSKs and the public-key-only form).
func TestGarbageCostsNoAllocation(t *testing.T) {
	if raceEnabled {
		// A quarter of the pooled BLAKE2s states put back are dropped
		// under -race: about one allocation per datagram with four keys.
		t.Skip("allocation test: run without -race")
	}
	resp := newMemCore(t, "192.0.2.1:51820", 1, nil)
	var pcs []config.Peer
	for i := range 4 {
		pk, _ := crypto.GeneratePrivateKey()
		pcs = append(pcs, config.Peer{PublicKey: pk.Public(), PresharedKey: crypto.PresharedKey{byte(i)}})
	}
	if err := resp.SetPeers(pcs); err != nil {
		t.Fatal(err)
	}
	if n := resp.local.HandshakeKeys(); n != 4 {
		t.Fatalf("%d handshake keys, want 4", n)
	}
	resp.plane.send = func(int, int, []byte, netip.AddrPort) error { return nil }
	from := netip.MustParseAddrPort("10.64.0.1:40000")
	for _, n := range []int{30, 70, 200, 400} {
		junk := make([]byte, n)
		for i := range junk {
			junk[i] = byte(i*7 + n)
		}
		if v := resp.Unmatched(0, ConnGroup, junk, from, netip.Addr{}); v != shard.NotHandshake { // also the warm-up
			t.Errorf("%d-byte garbage datagram: verdict %d", n, v)
		}
		if a := testing.AllocsPerRun(100, func() { resp.Unmatched(0, ConnGroup, junk, from, netip.Addr{}) }); a != 0 {
			t.Errorf("%d-byte garbage datagram: %.1f allocations", n, a)
		}
	}
}

// Under a flood of spoofed initiations, cookie replies to unknown sources
// stop at cookieReplyCap per second (each costs the data shard a seal and
// a send), while a peer's known address is always answered: its
// handshake goes through the cookie path as before.
func TestCookieRepliesCappedExceptKnown(t *testing.T) {
	resp := newMemCore(t, "192.0.2.1:51820", 1, nil)
	known := netip.MustParseAddrPort("198.51.100.7:40000")
	pk, _ := crypto.GeneratePrivateKey()
	if err := resp.SetPeers([]config.Peer{{PublicKey: pk.Public(), Endpoint: known,
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.0.1/32")}}}); err != nil {
		t.Fatal(err)
	}
	sent := 0
	var lastTo netip.AddrPort
	resp.plane.send = func(_, _ int, _ []byte, to netip.AddrPort) error { sent++; lastTo = to; return nil }
	const flood = 3 * cookieReplyCap
	inits := attackerInitiations(t, resp, flood+1)
	resp.inits.set(resp.clock.Now(), 1<<30) // under load: cookies demanded
	from := netip.MustParseAddrPort("10.64.0.1:40000")
	verdicts := map[shard.Verdict]int{}
	for i := range flood {
		from = netip.AddrPortFrom(from.Addr().Next(), uint16(i))
		verdicts[resp.Unmatched(0, ConnGroup, inits[i], from, netip.Addr{})]++
	}
	// A second boundary inside the loop can allow one more cap's worth.
	if sent == 0 || sent > 2*cookieReplyCap {
		t.Fatalf("%d cookie replies to %d spoofed initiations (cap %d/s)", sent, flood, cookieReplyCap)
	}
	// Those left unanswered are Ignored: the shard charges them to its
	// strangers' rate like junk.
	if verdicts[shard.Answered] != sent || verdicts[shard.Ignored] != flood-sent {
		t.Fatalf("verdicts %v for %d cookie replies sent", verdicts, sent)
	}
	// A second boundary inside the loop also resets the load count: the
	// next initiations then take the unloaded path and are refused
	// (unknown key). Every one is accounted for either way.
	if c, r := resp.hs.cookiesCapped.Load(), resp.hs.refused.Load(); c+r != uint64(flood-sent) || c == 0 {
		t.Fatalf("cookie_capped %d + refused %d, want %d", c, r, flood-sent)
	}
	sent = 0
	resp.Unmatched(0, ConnGroup, inits[flood], known, netip.Addr{})
	if sent != 1 || lastTo != known {
		t.Fatalf("the known peer's address got %d replies past the cap", sent)
	}
}

// A flood of initiations with a valid mac1 from a key nobody knows pays a
// DH only until refusedThreshold of them were refused this second; the
// rest of the second gets cookie replies (or silence past the reply cap),
// well under cookieThreshold. Each from its own /24, so the per-prefix
// limiter does not stop them first.
func TestRefusedInitiationsTripLoad(t *testing.T) {
	_, resp := memPair(t, "198.51.100.7:40000")
	const flood = 200
	inits := attackerInitiations(t, resp, flood)
	verdicts := map[shard.Verdict]int{}
	for i, d := range inits {
		src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 64 + byte(i>>8), byte(i), 1}), 40000)
		verdicts[resp.Unmatched(0, ConnGroup, d, src, netip.Addr{})]++
	}
	refused, cookies := resp.hs.refused.Load(), resp.hs.cookies.Load()+resp.hs.cookiesCapped.Load()
	if refused != refusedThreshold || refused+cookies != flood {
		t.Fatalf("%d initiations: %d refused after a DH, %d met with cookies; want %d and the rest", flood, refused, cookies, refusedThreshold)
	}
	// Refused or left without a reply: Ignored; met with a cookie reply:
	// Answered. A replayed initiation is Ignored too.
	if verdicts[shard.Ignored] != int(refused+resp.hs.cookiesCapped.Load()) || verdicts[shard.Answered] != int(resp.hs.cookies.Load()) {
		t.Fatalf("verdicts %v; %d refused, %d cookie replies, %d capped", verdicts, refused, resp.hs.cookies.Load(), resp.hs.cookiesCapped.Load())
	}
	if v := resp.Unmatched(0, ConnGroup, inits[flood-1], netip.MustParseAddrPort("10.99.0.1:40000"), netip.Addr{}); v != shard.Ignored {
		t.Fatalf("a replayed initiation: verdict %d, want Ignored", v)
	}
}
