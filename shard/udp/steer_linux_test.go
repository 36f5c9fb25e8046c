package udp

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func newSteeringOrSkip(t *testing.T, n, maxLanes int) *Steering {
	t.Helper()
	st, err := NewSteering(n, maxLanes)
	if err != nil {
		if os.Geteuid() != 0 {
			t.Skipf("loading eBPF needs root (CAP_BPF): %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// steeredGroup is a group of n lane sockets, n strangers' sockets and n
// known sockets on bind steered by maps of maxLanes, closed with the test.
func steeredGroup(t *testing.T, bind string, n, maxLanes int) (lanes, strangers, known []*Conn, st *Steering) {
	t.Helper()
	st = newSteeringOrSkip(t, n, maxLanes)
	lanes, strangers, known, err := ListenSteered(netip.AddrPortFrom(netip.MustParseAddr(bind), 0), n, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range slices.Concat(lanes, strangers, known) {
			c.Close()
		}
	})
	return lanes, strangers, known, st
}

// drain reads what c holds now.
func drain(t *testing.T, c *Conn, b *Batch) []netip.AddrPort {
	t.Helper()
	var from []netip.AddrPort
	for {
		n, err := c.Recv(b, b.Len())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return from
		}
		for i := range n {
			if got := string(b.Bufs[i][:b.Sizes[i]]); got != fmt.Sprint(b.Addrs[i].Port()) {
				t.Fatalf("payload %q from %v", got, b.Addrs[i])
			}
			from = append(from, b.Addrs[i])
		}
	}
}

// collect reads the group's sockets until total datagrams arrived (or 2 s
// passed), then once more after a moment for any extra: loopback may hand
// delivery to ksoftirqd on a busy machine, so what is not there at once
// can still come.
func collect(t *testing.T, group []*Conn, total int) [][]netip.AddrPort {
	t.Helper()
	from := make([][]netip.AddrPort, len(group))
	b := NewBatch(64)
	for j := range b.Bufs {
		b.Bufs[j] = make([]byte, 64)
	}
	got := 0
	read := func() {
		for i, c := range group {
			f := drain(t, c, b)
			from[i] = append(from[i], f...)
			got += len(f)
		}
	}
	for deadline := time.Now().Add(2 * time.Second); got < total && time.Now().Before(deadline); {
		read()
		if got < total {
			time.Sleep(time.Millisecond)
		}
	}
	time.Sleep(20 * time.Millisecond)
	read()
	return from
}

// send8 sends eight datagrams, each carrying the sender's port, to dst.
func send8(t *testing.T, s *Conn, dst netip.AddrPort) {
	t.Helper()
	b := NewBatch(8)
	for i := range 8 {
		b.Bufs[i] = []byte(fmt.Sprint(s.LocalAddr().Port()))
		b.Sizes[i] = len(b.Bufs[i])
		b.Addrs[i] = dst
	}
	if sent, err := s.Send(b, 8); err != nil || sent != 8 {
		t.Fatalf("sent %d: %v", sent, err)
	}
}

// Lane sockets on ports the kernel picked reach the group socket their
// remote is steered to, IPv4 and IPv6 and both on a dual-stack group; a
// remote steered nowhere lands on one strangers' socket (by hash), never
// on a lane socket, and is not dropped.
func TestSteeringByRemote(t *testing.T) {
	for _, tc := range []struct{ bind, senders string }{
		{"127.0.0.1", "127.0.0.1"}, {"::1", "::1"}, {"::", "127.0.0.1 ::1"},
	} {
		t.Run(tc.bind, func(t *testing.T) {
			const n, perSock = 4, 3
			group, strangers, known, st := steeredGroup(t, tc.bind, n, 64)
			port := group[0].LocalAddr().Port()
			senders := strings.Fields(tc.senders)
			want := map[netip.AddrPort]int{} // sender → socket index
			var socks []*Conn
			defer func() {
				for _, s := range socks {
					s.Close()
				}
			}()
			congruent := 0
			for i := range n {
				for k := range perSock * len(senders) {
					addr := netip.MustParseAddr(senders[k%len(senders)])
					s, err := ListenLane(addr)
					if err != nil {
						t.Fatal(err)
					}
					socks = append(socks, s)
					if int(s.LocalAddr().Port())&LaneMask == i {
						congruent++
					}
					if r := st.Steer(s.LocalAddr(), group[i], false); r != Steered {
						t.Fatalf("steering %v: %v", s.LocalAddr(), r)
					}
					if got, ok := st.Lookup(s.LocalAddr()); !ok || got != i {
						t.Fatalf("%v steered to %d, %v; want %d", s.LocalAddr(), got, ok, i)
					}
					want[s.LocalAddr()] = i
					send8(t, s, netip.AddrPortFrom(addr, port))
				}
			}
			if congruent == len(socks) {
				t.Fatalf("every lane socket's port is congruent to its socket mod 64: the kernel did not pick them")
			}
			// One sender steered nowhere.
			stray, err := ListenLane(netip.MustParseAddr(senders[0]))
			if err != nil {
				t.Fatal(err)
			}
			defer stray.Close()
			send8(t, stray, netip.AddrPortFrom(stray.LocalAddr().Addr(), port))
			strays := 0
			all := slices.Concat(group, strangers, known)
			from := collect(t, all, n*perSock*len(senders)*8+8)
			for i := range all {
				exp := perSock * len(senders) * 8
				if i >= n {
					exp = 0 // a strangers' or known socket
				}
				for _, f := range from[i] {
					if f == stray.LocalAddr() {
						if i < n || i >= 2*n {
							t.Fatalf("the unsteered sender (no known address) reached lane or known socket %d", i)
						}
						strays++
						continue
					}
					if w, ok := want[f]; !ok || w != i {
						t.Fatalf("socket %d got a datagram from %v (steered to %d, %v)", i, f, w, ok)
					}
					exp--
				}
				if exp != 0 {
					t.Fatalf("socket %d missed %d datagrams of its senders", i, exp)
				}
			}
			if strays != 8 {
				t.Fatalf("the unsteered sender's datagrams arrived %d times, want 8", strays)
			}
			// Unsteer from a socket that does not hold the entry keeps
			// it; from the one that does removes it.
			s0 := socks[0]
			st.Unsteer(s0.LocalAddr(), group[1])
			if _, ok := st.Lookup(s0.LocalAddr()); !ok {
				t.Fatal("Unsteer by a socket that does not hold the entry removed it")
			}
			st.Unsteer(s0.LocalAddr(), group[0])
			if _, ok := st.Lookup(s0.LocalAddr()); ok {
				t.Fatal("Unsteer kept the entry")
			}
		})
	}
}

// A full map refuses the next remote and says so; the refused remote's
// datagrams still arrive (by hash), and a lane socket outside the group is
// never entered.
func TestSteeringFull(t *testing.T) {
	group, strangers, _, st := steeredGroup(t, "127.0.0.1", 2, 2)
	lo := netip.MustParseAddr("127.0.0.1")
	var socks []*Conn
	var res []SteerResult
	for range 3 {
		s, err := ListenLane(lo)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		socks = append(socks, s)
		res = append(res, st.Steer(s.LocalAddr(), group[1], true))
	}
	if !slices.Equal(res, []SteerResult{Steered, Steered, Full}) {
		t.Fatalf("steering three remotes into a map of two: %v", res)
	}
	for _, c := range []*Conn{socks[0], strangers[0], strangers[1]} {
		if r := st.Steer(netip.MustParseAddrPort("127.0.0.1:9"), c, true); r != NotMember {
			t.Fatalf("a socket that takes no lanes (a lane socket outside the group, a strangers' socket): %v", r)
		}
	}
	if _, ok := st.Lookup(netip.MustParseAddrPort("127.0.0.1:9")); ok {
		t.Fatal("a non-member socket was steered to")
	}
	send8(t, socks[2], group[0].LocalAddr())
	got := 0
	for i, f := range collect(t, append(slices.Clone(group), strangers...), 8) {
		if i < len(group) && len(f) > 0 {
			t.Fatalf("the refused remote reached lane socket %d", i)
		}
		got += len(f)
	}
	if got != 8 {
		t.Fatalf("the refused remote's datagrams: %d of 8 arrived at the strangers' sockets", got)
	}
	// The strangers' sockets have a small receive buffer, the lane
	// sockets the large one.
	if rcv, _, _ := strangers[0].Buffers(); rcv > 2*strangerBuffer {
		t.Errorf("strangers' socket receive buffer %d, want at most %d", rcv, 2*strangerBuffer)
	}
}

// A known address's datagrams that no lane is steered for reach a known
// socket, anyone else's a strangers' socket; a lane steered at a known
// address still reaches its lane socket, and an address no longer known
// goes back to the strangers'.
func TestSteeringKnown(t *testing.T) {
	const n = 2
	group, strangers, known, st := steeredGroup(t, "127.0.0.1", n, 8)
	port := group[0].LocalAddr().Port()
	lane := func(ip string) *Conn {
		c, err := ListenLane(netip.MustParseAddr(ip))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	peer, stranger, steered := lane("127.0.0.2"), lane("127.0.0.1"), lane("127.0.0.2")
	if err := st.SetKnown(peer.LocalAddr().Addr(), true); err != nil {
		t.Fatal(err)
	}
	isKnown := func(a string) bool {
		var v uint8
		return st.known.Lookup(knownKeyOf(netip.MustParseAddr(a)), &v) == nil
	}
	if !isKnown("127.0.0.2") || isKnown("127.0.0.1") {
		t.Fatal("the known map does not hold what SetKnown set")
	}
	if r := st.Steer(steered.LocalAddr(), group[1], true); r != Steered {
		t.Fatalf("steering %v: %v", steered.LocalAddr(), r)
	}
	where := func(want int) [3]int { // datagrams at lane, strangers', known sockets
		all := slices.Concat(group, strangers, known)
		var at [3]int
		for i, f := range collect(t, all, want) {
			at[i/n] += len(f)
		}
		return at
	}
	for _, c := range []*Conn{peer, stranger, steered} {
		send8(t, c, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port))
	}
	if at := where(24); at != [3]int{8, 8, 8} {
		t.Fatalf("lane, strangers', known sockets got %v, want 8 each (the steered lane, the stranger, the known address)", at)
	}
	if err := st.SetKnown(netip.MustParseAddr("127.0.0.2"), false); err != nil {
		t.Fatal(err)
	}
	if err := st.SetKnown(netip.MustParseAddr("127.0.0.2"), false); err != nil {
		t.Fatalf("forgetting an address not known: %v", err)
	}
	send8(t, peer, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port))
	if at := where(8); at != [3]int{0, 8, 0} {
		t.Fatalf("after SetKnown(false): lane, strangers', known sockets got %v, want the strangers' 8", at)
	}
}

// An unproven claim (a handshake's source address) never takes a remote
// another socket holds; a proven one does; a claim on an entry the socket
// already holds is a success either way.
func TestSteeringUnprovenClaims(t *testing.T) {
	group, _, _, st := steeredGroup(t, "127.0.0.1", 2, 8)
	v := netip.MustParseAddrPort("127.0.0.1:40000")
	steps := []struct {
		sock   int
		proven bool
		want   SteerResult
		owner  int
	}{
		{0, false, Steered, 0}, // a handshake installs the victim's lane
		{1, false, Taken, 0},   // another peer handshakes from the same address
		{0, false, Steered, 0}, // a rekey of the first
		{1, true, Steered, 1},  // a datagram proved the second there
		{0, false, Taken, 1},
	}
	for i, s := range steps {
		if r := st.Steer(v, group[s.sock], s.proven); r != s.want {
			t.Fatalf("step %d: %v, want %v", i, r, s.want)
		}
		if o, ok := st.Lookup(v); !ok || o != s.owner {
			t.Fatalf("step %d: steered to %d (%v), want %d", i, o, ok, s.owner)
		}
	}
}

// Source ports are read where the UDP header is, not at a fixed offset:
// IPv4 options and an IPv6 destination-options header do not break the
// lookup.
func TestSteeringPastOptions(t *testing.T) {
	for _, tc := range []struct {
		ip    string
		level int
		opt   int
		val   []byte
	}{
		{"127.0.0.1", unix.IPPROTO_IP, unix.IP_OPTIONS, []byte{1, 1, 1, 1, 1, 1, 1, 0}}, // 8 bytes: NOPs, end
		{"::1", unix.IPPROTO_IPV6, unix.IPV6_DSTOPTS, []byte{0, 0, 1, 4, 0, 0, 0, 0}},   // PadN
	} {
		t.Run(tc.ip, func(t *testing.T) {
			const n = 4
			group, _, _, st := steeredGroup(t, tc.ip, n, 64)
			want := map[netip.AddrPort]int{}
			for i := range 3 * n {
				s, err := ListenLane(netip.MustParseAddr(tc.ip))
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				if err := unix.SetsockoptString(s.Fd(), tc.level, tc.opt, string(tc.val)); err != nil {
					t.Fatalf("setting the option: %v", err)
				}
				st.Steer(s.LocalAddr(), group[i%n], true)
				want[s.LocalAddr()] = i % n
				send8(t, s, group[0].LocalAddr())
			}
			for i, from := range collect(t, group, 3*n*8) {
				if len(from) != 3*8 {
					t.Fatalf("socket %d got %d datagrams, want 24", i, len(from))
				}
				for _, f := range from {
					if want[f] != i {
						t.Fatalf("socket %d got a datagram from %v, steered to %d", i, f, want[f])
					}
				}
			}
		})
	}
}

// The same remote as IPv4 and as a v4-mapped IPv6 address is one key:
// a dual-stack socket reports it unmapped, the kernel sees it mapped.
func TestSteerKeyMapped(t *testing.T) {
	a := keyOf(netip.MustParseAddrPort("192.0.2.1:4000"))
	b := keyOf(netip.MustParseAddrPort("[::ffff:192.0.2.1]:4000"))
	if a != b {
		t.Fatalf("%x != %x", a, b)
	}
	if a[10] != 0xff || a[11] != 0xff || a[12] != 192 || a[16] != 4000>>8 || a[17] != 4000&0xff || a[18] != 0 {
		t.Fatalf("key layout %x", a)
	}
}
