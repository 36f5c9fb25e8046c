package e2e

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/internal/lab"
	"github.com/yip-router/yip-router/internal/netns"
)

// With a PresharedKey on both sides the handshakes are keyed by it: the
// tunnel comes up and carries pings both ways. An initiation keyed by B's
// public key only (what anyone holding that key can send) gets no answer
// at all, not even a cookie reply; one keyed by the PSK from a static key
// B does not know is refused after the DH, then met with cookie replies
// past its source's budget.
func TestTunnelPSK(t *testing.T) {
	psk, err := crypto.GeneratePresharedKey()
	if err != nil {
		t.Fatal(err)
	}
	l := newLab(t, lab.Options{Shards: [2]int{2, 2}, PSK: psk})
	if err := l.WaitTunnel(lab.A, l.Inner4[lab.B], 15*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		from lab.Side
		to   netip.Addr
	}{{lab.A, l.Inner4[lab.B]}, {lab.B, l.Inner4[lab.A]}} {
		if rtts, err := l.Ping(c.from, c.to, 3, 20*time.Millisecond); err != nil || len(rtts) < 3 {
			t.Fatalf("ping %c -> %s: %d/3 replies, %v", 'A'+rune(c.from), c.to, len(rtts), err)
		}
	}

	target := netip.AddrPortFrom(l.Underlay[lab.B], lab.Port)
	var c *net.UDPConn
	if err := netns.Do(l.NS[lab.A], func() error {
		var err error
		c, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(target))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	port := c.LocalAddr().(*net.UDPAddr).AddrPort().Port()
	// replies counts the datagrams B sends back within wait.
	replies := func(wait time.Duration) int {
		n := 0
		buf := make([]byte, 2048)
		deadline := time.Now().Add(wait)
		for {
			_ = c.SetReadDeadline(deadline)
			if _, err := c.Read(buf); err != nil {
				if !errors.Is(err, os.ErrDeadlineExceeded) {
					t.Errorf("reading replies: %v", err)
				}
				return n
			}
			n++
		}
	}
	probes := func(psk crypto.PresharedKey) [][]byte {
		stranger, _ := crypto.GeneratePrivateKey()
		loc := crypto.NewLocal(stranger, true)
		pb, err := loc.AddPeer(l.PublicKey(lab.B), psk)
		if err != nil {
			t.Fatal(err)
		}
		var out [][]byte
		for i := range 30 {
			_, d, err := loc.Initiate(pb, uint32(i+1), crypto.LaneOffer{Ports: []uint16{port}}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
		}
		return out
	}
	before, err := l.Status(lab.B)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range probes(crypto.PresharedKey{}) {
		_, _ = c.Write(d)
	}
	if n := replies(500 * time.Millisecond); n != 0 {
		t.Errorf("30 public-key-only initiations: %d replies", n)
	}
	mid, err := l.Status(lab.B)
	if err != nil {
		t.Fatal(err)
	}
	if mid.Handshakes.CookieDemanded != before.Handshakes.CookieDemanded || mid.Handshakes.Refused != before.Handshakes.Refused {
		t.Errorf("public-key-only initiations were recognised: cookie replies +%d, refused +%d",
			mid.Handshakes.CookieDemanded-before.Handshakes.CookieDemanded, mid.Handshakes.Refused-before.Handshakes.Refused)
	}

	// Keyed by the PSK, from a key B does not know: recognised.
	for _, d := range probes(psk) {
		_, _ = c.Write(d)
	}
	n := replies(500 * time.Millisecond)
	after, err := l.Status(lab.B)
	if err != nil {
		t.Fatal(err)
	}
	cookies := after.Handshakes.CookieDemanded - mid.Handshakes.CookieDemanded
	refused := after.Handshakes.Refused - mid.Handshakes.Refused
	if cookies < 20 || refused == 0 || refused > 10 || uint64(n) != cookies {
		t.Errorf("30 PSK-keyed initiations from an unknown key: %d cookie replies (%d received), %d refused after DH",
			cookies, n, refused)
	}
	if rtts, err := l.Ping(lab.A, l.Inner4[lab.B], 3, 20*time.Millisecond); err != nil || len(rtts) != 3 {
		t.Fatalf("tunnel after the probes: %d/3 replies, %v", len(rtts), err)
	}
}
