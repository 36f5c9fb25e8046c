package e2e

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/yip-router/yip-router/internal/lab"
)

// Offloads on, each forced off, and all off: a TCP transfer over IPv4 and
// over IPv6 (SHA-256 compared) and a UDP stream sent with UDP GSO (so the
// TUN reads USO superpackets) all get through, with 1 and 2 shards; the
// routers say which offloads are on, the counters show the ones on were
// used and the ones off were not, and neither namespace's stack saw a bad
// checksum.
func TestOffloads(t *testing.T) {
	cases := []struct {
		off    string
		shards int
	}{
		{"", 1}, {"", 2}, {"tso", 2}, {"uso", 1}, {"gro", 2}, {"udp-gso", 1}, {"udp-gro", 2}, {"all", 1},
	}
	for _, c := range cases {
		name := c.off
		if name == "" {
			name = "none"
		}
		t.Run(fmt.Sprintf("off=%s/shards=%d", name, c.shards), func(t *testing.T) {
			extra := ""
			if c.off != "" {
				extra = "DisableOffload = " + c.off
			}
			l := newLab(t, lab.Options{Shards: [2]int{c.shards, c.shards}, Extra: [2]string{extra, extra}})
			if err := l.WaitTunnel(lab.A, l.Inner4[lab.B], 15*time.Second); err != nil {
				t.Fatal(err)
			}
			for _, dst := range []netip.Addr{l.Inner4[lab.B], l.Inner6[lab.B]} {
				res, err := l.TCPTransfer(lab.A, dst, 24<<20, 2)
				if err != nil {
					t.Fatal(err)
				}
				if !res.Match || res.Bytes != 24<<20 {
					t.Fatalf("TCP to %s: %d bytes, SHA-256 match %v", dst, res.Bytes, res.Match)
				}
			}
			// Shards publish counters every 50 ms: let the TCP phase's
			// last figures land before taking them as its total.
			time.Sleep(250 * time.Millisecond)
			tcpSuper := counter(t, l, lab.A, "tun_super_in")
			// Paced (96 Mbit/s) well below what even a busy 2-core
			// machine carries: the check is that it gets through.
			for _, dst := range []netip.Addr{l.Inner4[lab.B], l.Inner6[lab.B]} {
				st, err := l.UDPStreamGSO(lab.A, dst, 10000, 3000, 1200, 8)
				if err != nil {
					t.Fatal(err)
				}
				if st.Received < st.Sent*9/10 {
					t.Errorf("UDP stream to %s: %d of %d datagrams arrived", dst, st.Received, st.Sent)
				}
			}
			stA, err := l.Status(lab.A)
			if err != nil {
				t.Fatal(err)
			}
			stB, err := l.Status(lab.B)
			if err != nil {
				t.Fatal(err)
			}
			disabled := map[string]bool{}
			for _, n := range strings.Split(c.off, ",") {
				disabled[n] = n != ""
			}
			for _, n := range []string{"tso", "uso", "gro", "udp-gso", "udp-gro"} {
				want := "on"
				if disabled[n] || disabled["all"] {
					want = "off: DisableOffload"
				}
				if stA.Offloads[n] != want || stB.Offloads[n] != want {
					t.Errorf("offload %s: A %q, B %q, want %q", n, stA.Offloads[n], stB.Offloads[n], want)
				}
			}
			superOut := counter(t, l, lab.B, "tun_super_out")
			groIn := counter(t, l, lab.B, "udp_super_in")
			on := func(n string) bool { return !disabled[n] && !disabled["all"] }
			if on("tso") != (tcpSuper > 0) {
				t.Errorf("tso %v but %d TCP superpackets read", on("tso"), tcpSuper)
			}
			if on("gro") != (superOut > 0) {
				t.Errorf("gro %v but %d superpackets written", on("gro"), superOut)
			}
			if !on("udp-gro") && groIn > 0 {
				t.Errorf("udp-gro off but %d GRO messages received", groIn)
			}
			if on("udp-gro") && on("udp-gso") && groIn == 0 {
				t.Error("udp-gso and udp-gro on but no GRO message received")
			}
			if uso := counter(t, l, lab.A, "tun_super_in") - tcpSuper; on("uso") != (uso > 0) {
				t.Errorf("uso %v but %d UDP superpackets read", on("uso"), uso)
			}
			for s := range 2 {
				for _, proto := range []string{"Tcp", "Udp"} {
					if n := snmp(t, l, lab.Side(s), proto, "InCsumErrors"); n != 0 {
						t.Errorf("router %c's namespace: %s InCsumErrors = %d", 'A'+s, proto, n)
					}
				}
				if n := snmp6(t, l, lab.Side(s), "Udp6InCsumErrors"); n != 0 {
					t.Errorf("router %c's namespace: Udp6InCsumErrors = %d", 'A'+s, n)
				}
			}
		})
	}
}

// counter sums a shard counter over side's shards.
func counter(t *testing.T, l *lab.Lab, s lab.Side, name string) uint64 {
	t.Helper()
	st, err := l.Status(s)
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, sh := range st.Shards {
		n += sh.Counters[name]
	}
	return n
}

// snmp reads one field of /proc/net/snmp in side's namespace.
func snmp(t *testing.T, l *lab.Lab, s lab.Side, proto, field string) uint64 {
	t.Helper()
	out, err := l.Exec(s, "cat", "/proc/net/snmp")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(line, proto+": ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if names == nil {
			names = f
			continue
		}
		for i, n := range names {
			if n == field && i < len(f) {
				v, _ := strconv.ParseUint(f[i], 10, 64)
				return v
			}
		}
	}
	t.Fatalf("no %s %s in /proc/net/snmp", proto, field)
	return 0
}

// snmp6 reads one counter of /proc/net/snmp6 in side's namespace.
func snmp6(t *testing.T, l *lab.Lab, s lab.Side, name string) uint64 {
	t.Helper()
	out, err := l.Exec(s, "cat", "/proc/net/snmp6")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == name {
			v, _ := strconv.ParseUint(f[1], 10, 64)
			return v
		}
	}
	t.Fatalf("no %s in /proc/net/snmp6", name)
	return 0
}
