package crypto

// Wire lengths of handshake messages and cookie replies. Each message can
// take any length from its minimum (its fields with no padding) up to a cap
// (hsMaxLen, which every router's receiver accepts); within that range its
// length is drawn from a distribution of data-datagram lengths, so that no
// message type has a length range of its own that a length-only classifier
// could separate from data.

// WireLengths is a distribution of datagram lengths that a handshake message
// or cookie reply takes its length from: typically the lengths of the data
// datagrams recently sent to the same peer.
type WireLengths interface {
	// DrawLen returns a length in [lo, hi] drawn from the distribution
	// restricted to that range, or false if none of it lies there. It is
	// called concurrently, from any goroutine.
	DrawLen(lo, hi int) (int, bool)
}

// lenBand is one component of the built-in distribution: lengths lo..hi
// (wire lengths of data datagrams, inner length + DataOverhead), uniform,
// with weight w (out of the table's total).
type lenBand struct{ lo, hi, w int }

// tunnelBands is the built-in distribution, used when no recent data
// lengths to the peer are known or none of them is a length the message can
// take. It is shaped like a tunnel's data in the usual bimodal way of IP
// traffic (per-length shares, not per-byte):
//
//   - ACK-sized, 42%: bare TCP ACKs over IPv4 and IPv6, without and with the
//     timestamp option (inner 40, 52, 60, 72 bytes);
//   - small, 12%: DNS, VoIP, interactive and QUIC acknowledgements (inner
//     73..260 bytes);
//   - mid, 8%: requests and short responses (inner 261..960 bytes);
//   - large, 3%: inner 961..1409 bytes;
//   - full-size, 35%: packets at the default tunnel MTU (1410 bytes,
//     config.DefaultMTU).
//
// A message draws from the bands restricted to its feasible lengths
// [min, cap]: handshake messages (their minimum is above any ACK and their
// cap below full size) take small, mid and large lengths, weighted as here;
// a cookie reply to an older initiator (cap 88) takes the 80-byte ACK length.
var tunnelBands = [...]lenBand{
	{80, 80, 12},
	{92, 92, 20},
	{100, 100, 4},
	{112, 112, 6},
	{113, 300, 12},
	{301, 1000, 8},
	{1001, 1449, 3},
	{1450, 1450, 35},
}

// TunnelLengths is the built-in distribution (tunnelBands).
var TunnelLengths WireLengths = tunnelLengths{}

type tunnelLengths struct{}

// DrawLen draws from tunnelBands restricted to [lo, hi]: each band weighs
// its weight times the share of its lengths that lie in the range (in
// thousandths, so that a band cut to a few lengths still counts).
func (tunnelLengths) DrawLen(lo, hi int) (int, bool) {
	var ws [len(tunnelBands)]int
	total := 0
	for i, b := range tunnelBands {
		a, z := max(b.lo, lo), min(b.hi, hi)
		if a > z {
			continue
		}
		ws[i] = max(1, b.w*1000*(z-a+1)/(b.hi-b.lo+1))
		total += ws[i]
	}
	if total == 0 {
		return 0, false
	}
	r := randUint(total)
	for i, b := range tunnelBands {
		if r >= ws[i] {
			r -= ws[i]
			continue
		}
		a, z := max(b.lo, lo), min(b.hi, hi)
		return a + randUint(z-a+1), true
	}
	return 0, false // not reached
}

// drawLen is the wire length of a message that can take lengths lo..hi:
// from d if it has lengths in the range, else from the built-in
// distribution, else (a range between its bands) uniform. lo > hi (a message
// that cannot fit the cap) gives lo.
func drawLen(d WireLengths, lo, hi int) int {
	if lo >= hi {
		return lo
	}
	if d != nil {
		if n, ok := d.DrawLen(lo, hi); ok && n >= lo && n <= hi {
			return n
		}
	}
	if n, ok := TunnelLengths.DrawLen(lo, hi); ok {
		return n
	}
	return lo + randUint(hi-lo+1)
}
