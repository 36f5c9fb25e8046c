package control

// Responses and cookie replies that come late, to a replaced initiation,
// or to one of several initiations sent to one endpoint.

import (
	"net/netip"
	"testing"
	"time"

	"github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/internal/testclock"
	"github.com/yip-router/yip-router/shard"
)

// A response to an initiation the retry replaced is not ours any more: it
// is not taken (the shard counts it as a stray datagram), it installs
// nothing and refuses nothing, and the response to the retry completes.
func TestResponseToReplacedInitiation(t *testing.T) {
	ini, resp := memPair(t, "198.51.100.7:40000")
	ini.kick(t)
	resp.deliver(ini.take(), ini.addr, ConnGroup)
	stale := resp.take()
	ini.kick(t) // no response yet: the retry replaces the initiation
	retry := ini.take()
	if len(stale) != 1 || len(retry) != 1 {
		t.Fatalf("%d responses, %d retries", len(stale), len(retry))
	}
	if ini.Unmatched(0, ConnLane, stale[0].b, resp.addr, netip.Addr{}) != shard.NotHandshake {
		t.Fatal("a response to the replaced initiation was taken")
	}
	if c := ini.Counts(); c.Completed != 0 || c.Refused != 0 || ini.peerOf(t).sess != nil {
		t.Fatalf("after the stale response: %+v, session %v", c, ini.peerOf(t).sess != nil)
	}
	resp.deliver(retry, ini.addr, ConnGroup)
	ini.deliver(resp.take(), resp.addr, ConnLane)
	if ini.Counts().Completed != 1 || !sessionsAgree(t, ini, resp) {
		t.Fatal("the retry's response made no agreed session")
	}
}

// The handshake's round trip becomes the lanes' RTT only if it is a
// measure of the path: a response later than rttMax completes the
// handshake but leaves the RTT unknown.
func TestLateResponseMeasuresNoRTT(t *testing.T) {
	for _, c := range []struct {
		delay, want time.Duration
	}{{40 * time.Millisecond, 40 * time.Millisecond}, {rttMax + time.Second, 0}} {
		ini, resp := memPair(t, "198.51.100.7:40000")
		ini.kick(t)
		resp.deliver(ini.take(), ini.addr, ConnGroup)
		ini.clock.Advance(c.delay)
		ini.deliver(resp.take(), resp.addr, ConnLane)
		p := ini.peerOf(t)
		var rtt time.Duration
		var sess bool
		ini.locked(func() { rtt, sess = p.rtt, p.sess != nil })
		if !sess || rtt != c.want {
			t.Fatalf("response after %v: session %v, RTT %v; want a session, RTT %v", c.delay, sess, rtt, c.want)
		}
	}
}

// Two peers reached at one endpoint (two keys behind one address and
// port) have an initiation pending there each: the first's handshake
// completing leaves the other's findable, so a cookie reply to it is
// still taken.
func TestSharedEndpointKeepsOtherInitiation(t *testing.T) {
	clock := testclock.New(epoch)
	ini := newMemCore(t, "198.51.100.7:40000", 1, clock)
	r1 := newMemCore(t, "192.0.2.1:51820", 1, clock)
	r2 := newMemCore(t, "192.0.2.1:51820", 1, clock)
	ep := r1.addr
	if err := ini.SetPeers([]config.Peer{
		{PublicKey: r1.local.PublicKey(), Endpoint: ep, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.0.2/32")}},
		{PublicKey: r2.local.PublicKey(), Endpoint: ep, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.0.3/32")}},
	}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*memCore{r1, r2} {
		if err := r.SetPeers([]config.Peer{{PublicKey: ini.local.PublicKey(),
			AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.0.1/32")}}}); err != nil {
			t.Fatal(err)
		}
	}
	var p1, p2 *peer
	ini.locked(func() { p1, p2 = ini.peers[r1.local.PublicKey()], ini.peers[r2.local.PublicKey()] })
	ini.NoSession(0, p1.id)
	ini.NoSession(0, p2.id)
	ini.Tick(clock.Now())
	inits := ini.take()
	if len(inits) != 2 {
		t.Fatalf("%d initiations, want 2", len(inits))
	}
	var replies [][]byte
	for _, d := range inits {
		if r, err := r2.local.CookieReply(d.b, crypto.NewCookieChecker(), ini.addr, clock.Now()); err == nil {
			replies = append(replies, r) // to the initiation to r2's key
		}
	}
	if len(replies) != 1 {
		t.Fatalf("r2 made cookie replies to %d initiations, want 1", len(replies))
	}
	r1.deliver(inits, ini.addr, ConnGroup)
	ini.deliver(r1.take(), ep, ConnLane)
	var done, pending bool
	ini.locked(func() { done, pending = p1.sess != nil && p1.init == nil, p2.init != nil })
	if !done || !pending {
		t.Fatalf("r1's handshake done %v, r2's initiation pending %v; want both", done, pending)
	}
	if ini.Unmatched(0, ConnLane, replies[0], ep, netip.Addr{}) != shard.Answered {
		t.Fatal("the cookie reply to the initiation still pending at the shared endpoint was not taken")
	}
}
