package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/yip-router/yip-router/internal/lab"
	"github.com/yip-router/yip-router/internal/netns"
)

// tcpBufWAN is the default ceiling of the endpoints' TCP buffers through
// the bridge. A sender keeps every unacknowledged byte in its send
// buffer, so the stock 4 MiB net.ipv4.tcp_wmem ceiling holds one flow
// near 0.5 Gbit/s over a 50 ms round trip whatever carries it: the harness,
// not the tunnels, set the clean path's goodput. 32 MiB covers the
// bandwidth-delay product of 1 Gbit/s at 50 ms several times over, room
// for the retransmission queue under loss too. A WAN host tuned for the
// path sets the same.
const tcpBufWAN = 32 << 20

// parseSize reads a byte count with an optional K, M or G suffix (powers
// of 1024), as the -tcp-buf flag takes it.
func parseSize(s string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, strings.TrimSuffix(s, "G")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > (1<<31-1)/mult {
		return 0, fmt.Errorf("%q: want a byte count such as 32M (0: the host's settings)", s)
	}
	return n * mult, nil
}

// tcpBuf is the -tcp-buf flag's value in bytes: the flag, or by default
// tcpBufWAN through the bridge and 0 (the host's settings, which do not
// limit a veth's sub-millisecond round trip) on the direct link.
func tcpBuf(flagged string, w *wan) (int, error) {
	if flagged != "" {
		return parseSize(flagged)
	}
	if w != nil {
		return tcpBufWAN, nil
	}
	return 0, nil
}

// tuneTCP sets the ceiling of TCP's buffer autotuning in both gateway
// namespaces, where iperf3 runs; the host's settings stay as they are.
func tuneTCP(t topology, bytes int) error {
	if bytes == 0 {
		return nil
	}
	for _, s := range []lab.Side{lab.A, lab.B} {
		if err := netns.TCPBuffers(t.NS(s), bytes); err != nil {
			return err
		}
	}
	return nil
}

// selectTests keeps the specs whose names start with one of prefixes (all
// of them when prefixes is empty), so a run can measure only the rows it
// needs (e.g. -tests tcp1,udp-100M).
func selectTests(specs []testSpec, prefixes []string) ([]testSpec, error) {
	if len(prefixes) == 0 {
		return specs, nil
	}
	var kept []testSpec
	for _, s := range specs {
		for _, p := range prefixes {
			if strings.HasPrefix(s.name, p) {
				kept = append(kept, s)
				break
			}
		}
	}
	if len(kept) == 0 {
		names := make([]string, len(specs))
		for i, s := range specs {
			names[i] = s.name
		}
		return nil, fmt.Errorf("-tests %s matches none of %s", strings.Join(prefixes, ","), strings.Join(names, ", "))
	}
	return kept, nil
}

// sizeString prints a byte count as parseSize reads it.
func sizeString(n int) string {
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"G", 30}, {"M", 20}, {"K", 10}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d%s", n>>u.shift, u.suffix)
		}
	}
	return fmt.Sprint(n)
}
