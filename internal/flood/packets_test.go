package flood

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// refBlake2s is BLAKE2s as RFC 7693 writes it (keyed, digest of nn bytes),
// written out here so the mac1 tests do not check golang.org/x/crypto
// against itself.
func refBlake2s(key, msg []byte, nn int) []byte {
	iv := [8]uint32{0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19}
	sigma := [10][16]int{
		{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
		{14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
		{11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
		{7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
		{9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
		{2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
		{12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
		{13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
		{6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
		{10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
	}
	h := iv
	h[0] ^= 0x01010000 ^ uint32(len(key))<<8 ^ uint32(nn)
	data := msg
	if len(key) > 0 {
		blk := make([]byte, 64)
		copy(blk, key)
		data = append(blk, msg...)
	}
	compress := func(block []byte, t uint64, last bool) {
		var m [16]uint32
		for i := range m {
			m[i] = binary.LittleEndian.Uint32(block[4*i:])
		}
		var v [16]uint32
		copy(v[:8], h[:])
		copy(v[8:], iv[:])
		v[12] ^= uint32(t)
		v[13] ^= uint32(t >> 32)
		if last {
			v[14] = ^v[14]
		}
		g := func(a, b, c, d int, x, y uint32) {
			v[a] = v[a] + v[b] + x
			v[d] = bits.RotateLeft32(v[d]^v[a], -16)
			v[c] = v[c] + v[d]
			v[b] = bits.RotateLeft32(v[b]^v[c], -12)
			v[a] = v[a] + v[b] + y
			v[d] = bits.RotateLeft32(v[d]^v[a], -8)
			v[c] = v[c] + v[d]
			v[b] = bits.RotateLeft32(v[b]^v[c], -7)
		}
		for _, s := range sigma {
			g(0, 4, 8, 12, m[s[0]], m[s[1]])
			g(1, 5, 9, 13, m[s[2]], m[s[3]])
			g(2, 6, 10, 14, m[s[4]], m[s[5]])
			g(3, 7, 11, 15, m[s[6]], m[s[7]])
			g(0, 5, 10, 15, m[s[8]], m[s[9]])
			g(1, 6, 11, 12, m[s[10]], m[s[11]])
			g(2, 7, 8, 13, m[s[12]], m[s[13]])
			g(3, 4, 9, 14, m[s[14]], m[s[15]])
		}
		for i := range h {
			h[i] ^= v[i] ^ v[i+8]
		}
	}
	var t uint64
	for len(data) > 64 {
		t += 64
		compress(data[:64], t, false)
		data = data[64:]
	}
	last := make([]byte, 64)
	copy(last, data)
	compress(last, t+uint64(len(data)), true)
	out := make([]byte, 32)
	for i := range h {
		binary.LittleEndian.PutUint32(out[4*i:], h[i])
	}
	return out[:nn]
}

func TestBlake2sReference(t *testing.T) {
	// RFC 7693, appendix B: BLAKE2s-256("abc").
	want := "508c5e8c327c14e2e1a72ba34eeb452f37458b209ed63a294d999b4c86675982"
	if got := hex.EncodeToString(refBlake2s(nil, []byte("abc"), 32)); got != want {
		t.Fatalf("reference BLAKE2s(abc) = %s, want %s", got, want)
	}
}

// A known vector: responder key 00 01 … 1f, a message of type 1 whose
// bytes 4..115 are their own index. Derived independently with Python's
// hashlib:
//
//	key = refBlake2s(b"mac1----" + bytes(range(32))).digest()
//	mac1 = refBlake2s(m[:116], key=key, digest_size=16).digest()
func TestWGMAC1KnownVector(t *testing.T) {
	var pub [32]byte
	for i := range pub {
		pub[i] = byte(i)
	}
	m := make([]byte, WGInitiationLen)
	m[0] = 1
	for i := 4; i < 116; i++ {
		m[i] = byte(i)
	}
	key := WGMAC1Key(pub)
	if got, want := hex.EncodeToString(key[:]), "4fb2527ac956001553dc1ad9b55171b7d9daa3de1cdbcd71451830170c7e6cac"; got != want {
		t.Fatalf("mac1 key %s, want %s", got, want)
	}
	mac := WGMAC1(key, m)
	if got, want := hex.EncodeToString(mac[:]), "44a5276c0c75b37d5cfede7eaeb9cf59"; got != want {
		t.Fatalf("mac1 %s, want %s", got, want)
	}
	// mac1 and mac2 are outside what mac1 covers.
	for i := 116; i < len(m); i++ {
		m[i] = 0xff
	}
	if WGMAC1(key, m) != mac {
		t.Fatal("mac1 depends on the bytes from mac1 on")
	}
}

func TestWGInitiations(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var pub [32]byte
	for i := range pub {
		pub[i] = byte(rng.Uint32())
	}
	key := refBlake2s(nil, append([]byte("mac1----"), pub[:]...), 32)
	msgs := WGInitiations(pub, 64)
	seen := map[string]bool{}
	for i, m := range msgs {
		if len(m) != 148 || binary.LittleEndian.Uint32(m) != 1 {
			t.Fatalf("message %d: %d bytes, type %d", i, len(m), binary.LittleEndian.Uint32(m))
		}
		if want := refBlake2s(key, m[:116], 16); !bytes.Equal(m[116:132], want) {
			t.Fatalf("message %d: mac1 %x, want %x", i, m[116:132], want)
		}
		if !bytes.Equal(m[132:], make([]byte, 16)) {
			t.Fatalf("message %d: mac2 %x, want zero", i, m[132:])
		}
		if seen[string(m[4:8])] {
			t.Fatalf("message %d repeats a sender index", i)
		}
		seen[string(m[4:8])] = true
	}
}

func TestUDPPacket(t *testing.T) {
	src, dst := netip.MustParseAddrPort("10.64.1.2:1234"), netip.MustParseAddrPort("172.31.250.2:47133")
	p := UDPPacket(make([]byte, 64), src, dst, []byte("hello"))
	if len(p) != 33 || p[0] != 0x45 || p[9] != 17 || [4]byte(p[12:16]) != src.Addr().As4() || [4]byte(p[16:20]) != dst.Addr().As4() {
		t.Fatalf("header % x", p[:20])
	}
	if binary.BigEndian.Uint16(p[20:]) != 1234 || binary.BigEndian.Uint16(p[22:]) != 47133 || binary.BigEndian.Uint16(p[24:]) != 13 || string(p[28:]) != "hello" {
		t.Fatalf("UDP % x", p[20:])
	}
}

func TestGarbageAndSpoofed(t *testing.T) {
	self, dst := netip.MustParseAddr("172.31.251.2"), netip.MustParseAddrPort("172.31.250.2:47133")
	g := Garbage(self, dst)
	if len(g) != GarbageCount {
		t.Fatalf("%d garbage packets", len(g))
	}
	for _, p := range g {
		if n := len(p) - 28; n < 1 || n > GarbageMax || [4]byte(p[12:16]) != self.As4() {
			t.Fatalf("garbage payload of %d bytes from %v", n, netip.AddrFrom4([4]byte(p[12:16])))
		}
	}
	if !bytes.Equal(Garbage(self, dst)[7], g[7]) {
		t.Fatal("garbage not the same run to run")
	}
	pl := [][]byte{[]byte("a"), []byte("bb"), []byte("ccc")}
	net := netip.MustParsePrefix(SpoofNet)
	for i, p := range Spoofed(pl, dst) {
		if src := netip.AddrFrom4([4]byte(p[12:16])); !net.Contains(src) || string(p[28:]) != string(pl[i]) || binary.BigEndian.Uint16(p[22:]) != dst.Port() {
			t.Fatalf("spoofed packet %d from %v: % x", i, src, p)
		}
	}
}

func TestReplayClearsUDPChecksum(t *testing.T) {
	p := UDPPacket(make([]byte, 40), netip.MustParseAddrPort("1.2.3.4:5"), netip.MustParseAddrPort("5.6.7.8:9"), []byte("x"))
	p[26], p[27] = 0xab, 0xcd
	orig := append([]byte(nil), p...)
	Replay([][]byte{p})
	if p[26] != 0 || p[27] != 0 || !bytes.Equal(p[:26], orig[:26]) || p[28] != orig[28] {
		t.Fatalf("% x", p)
	}
}

func TestSplitGSO(t *testing.T) {
	payload := make([]byte, 3*1000+123)
	for i := range payload {
		payload[i] = byte(i * 13)
	}
	p := UDPPacket(make([]byte, 28+len(payload)), netip.MustParseAddrPort("172.31.250.1:40000"), netip.MustParseAddrPort("172.31.250.2:47133"), payload)
	binary.BigEndian.PutUint16(p[4:], 0xfffe) // IP ID, wraps in the run
	p[26], p[27] = 0x12, 0x34                 // a partial checksum
	segs := SplitGSO(p, 1000)
	if len(segs) != 4 {
		t.Fatalf("%d segments, want 4", len(segs))
	}
	var joined []byte
	for i, d := range segs {
		n := len(d) - 28
		if want := min(1000, len(payload)-1000*i); n != want {
			t.Fatalf("segment %d: %d bytes, want %d", i, n, want)
		}
		if binary.BigEndian.Uint16(d[2:]) != uint16(len(d)) || binary.BigEndian.Uint16(d[24:]) != uint16(8+n) || d[26] != 0 || d[27] != 0 {
			t.Fatalf("segment %d: lengths %d/%d, checksum % x", i, binary.BigEndian.Uint16(d[2:]), binary.BigEndian.Uint16(d[24:]), d[26:28])
		}
		if id := binary.BigEndian.Uint16(d[4:]); id != uint16(0xfffe+i) {
			t.Fatalf("segment %d: IP ID %#x", i, id)
		}
		if ipChecksum(d[:20]) != 0 { // a valid header sums to all ones
			t.Fatalf("segment %d: bad IP header checksum", i)
		}
		if !bytes.Equal(d[12:24], p[12:24]) {
			t.Fatalf("segment %d: addresses or ports changed", i)
		}
		joined = append(joined, d[28:]...)
	}
	if !bytes.Equal(joined, payload) {
		t.Fatal("segments do not join to the payload")
	}
	if got := SplitGSO(p[:28+500], 1000); len(got) != 1 || len(got[0]) != 528 {
		t.Fatalf("a packet of one segment: %d", len(got))
	}
	if got := SplitGSO(p, 0); len(got) != 1 {
		t.Fatal("seg 0 split")
	}
}

// The cookie key and mac2 against the reference BLAKE2s: mac2 covers mac1
// and nothing from mac2 on.
func TestWGCookieKeyAndMAC2(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	var pub [32]byte
	var cookie [16]byte
	for i := range pub {
		pub[i] = byte(rng.Uint32())
	}
	for i := range cookie {
		cookie[i] = byte(rng.Uint32())
	}
	key := WGCookieKey(pub)
	if want := refBlake2s(nil, append([]byte("cookie--"), pub[:]...), 32); !bytes.Equal(key[:], want) {
		t.Fatalf("cookie key %x, want %x", key, want)
	}
	for _, n := range []int{WGInitiationLen, WGResponseLen} {
		m := make([]byte, n)
		for i := range m {
			m[i] = byte(rng.Uint32())
		}
		mac := WGMAC2(cookie, m)
		if want := refBlake2s(cookie[:], m[:n-16], 16); !bytes.Equal(mac[:], want) {
			t.Fatalf("%d-byte message: mac2 %x, want %x", n, mac, want)
		}
		m[n-1] ^= 1
		if WGMAC2(cookie, m) != mac {
			t.Fatal("mac2 depends on the mac2 field")
		}
		m[n-17] ^= 1
		if WGMAC2(cookie, m) == mac {
			t.Fatal("mac2 does not cover mac1")
		}
	}
}
