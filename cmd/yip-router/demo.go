package main

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/yip-router/yip-router/config"
	"github.com/yip-router/yip-router/internal/lab"
	"github.com/yip-router/yip-router/internal/netns"
	"github.com/yip-router/yip-router/router"
)

func demoCmd() *cobra.Command {
	var shards, mb int
	var fecMode string
	cmd := &cobra.Command{
		Use:   "demo [--shards N] [--mb M] [--fec MODE]",
		Short: "two routers in two namespaces, traffic, a report (root)",
		Long: `The newcomer's tour: two routers in two network namespaces joined by a
veth pair, ping, TCP and UDP traffic through the tunnel, a report, and
everything torn down (also on Ctrl-C). Needs root.`,
		Args:              noArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return exit(runDemo(shards, mb, fecMode, cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	cmd.Flags().IntVar(&shards, "shards", 0, "shards per router (0: auto, one per physical core)")
	cmd.Flags().IntVar(&mb, "mb", 256, "megabytes to send over TCP")
	cmd.Flags().StringVar(&fecMode, "fec", "auto", "FEC `MODE` of both routers: off, auto or K:R")
	_ = cmd.RegisterFlagCompletionFunc("fec", fixedCompletions("off", "auto"))
	return cmd
}

// runDemo is the newcomer's tour: two routers in two namespaces, traffic
// through the tunnel, a report, and everything torn down (also on Ctrl-C).
func runDemo(shards, mb int, fecMode string, stdout, stderr io.Writer) int {
	if err := netns.Available(); err != nil {
		fmt.Fprintln(stderr, "yip-router demo:", err)
		fmt.Fprintln(stderr, "The demo creates two network namespaces joined by a veth pair and a TUN device in each; run it as root (sudo make demo).")
		return 1
	}
	bin, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "yip-router demo:", err)
		return 1
	}
	l, err := lab.New(lab.Options{Bin: bin, Shards: [2]int{shards, shards}, FEC: [2]string{fecMode, fecMode}})
	if err != nil {
		fmt.Fprintln(stderr, "yip-router demo: setting up namespaces:", err)
		return 1
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Fprintln(stderr, "\ninterrupted: tearing down")
		l.Close()
		os.Exit(130)
	}()
	defer l.Close()
	code := demo(l, mb, stdout, stderr)
	signal.Stop(sigs)
	return code
}

func demo(l *lab.Lab, mb int, out, errw io.Writer) int {
	fail := func(what string, err error) int {
		fmt.Fprintf(errw, "yip-router demo: %s: %v\n", what, err)
		for s := range 2 {
			fmt.Fprintf(errw, "--- router %c log ---\n%s\n", 'A'+s, l.Log(lab.Side(s)))
		}
		return 1
	}
	fmt.Fprintf(out, "yip-router demo: namespaces %s and %s, veth %s <-> %s\n",
		l.NS[0], l.NS[1], l.Underlay[0], l.Underlay[1])
	for _, s := range []lab.Side{lab.B, lab.A} {
		if err := l.Start(s); err != nil {
			return fail("starting router", err)
		}
	}
	base, err := l.Ping(lab.A, l.Underlay[lab.B], 5, 100*time.Millisecond)
	if err != nil || len(base) == 0 {
		return fail("underlay ping", fmt.Errorf("%v (%d replies)", err, len(base)))
	}
	t0 := time.Now()
	if err := l.WaitTunnel(lab.A, l.Inner4[lab.B], 15*time.Second); err != nil {
		return fail("tunnel", err)
	}
	fmt.Fprintf(out, "tunnel up in %s (handshake on first packet)\n\n", time.Since(t0).Round(time.Millisecond))

	fmt.Fprintln(out, "ping through the tunnel:")
	var tunnelRTT []time.Duration
	for _, c := range []struct {
		from lab.Side
		to   netip.Addr
	}{{lab.A, l.Inner4[lab.B]}, {lab.B, l.Inner4[lab.A]}, {lab.A, l.Inner6[lab.B]}, {lab.B, l.Inner6[lab.A]}} {
		rtts, err := l.Ping(c.from, c.to, 10, 50*time.Millisecond)
		if err != nil {
			return fail("ping", err)
		}
		fmt.Fprintf(out, "  %c -> %-12s %2d/10 replies, avg %s\n", 'A'+rune(c.from), c.to, len(rtts), avg(rtts))
		tunnelRTT = append(tunnelRTT, rtts...)
	}
	fmt.Fprintf(out, "  underlay RTT %s, through the tunnel %s: %s added\n\n",
		avg(base), avg(tunnelRTT), avg(tunnelRTT)-avg(base))

	res, err := l.TCPTransfer(lab.A, l.Inner4[lab.B], int64(mb)<<20, 4)
	if err != nil {
		return fail("TCP transfer", err)
	}
	fmt.Fprintf(out, "TCP, 4 flows A -> B: %d MiB in %s = %.2f Gbit/s, SHA-256 match: %v\n",
		res.Bytes>>20, res.Duration.Round(time.Millisecond), res.Gbps(), res.Match)
	st, err := l.UDPStream(lab.A, l.Inner4[lab.B], 20000, 60000, 1000)
	if err != nil {
		return fail("UDP stream", err)
	}
	fmt.Fprintf(out, "UDP, 20k pps x 1000 B for 3 s A -> B: %d of %d arrived, loss %.3f%%, %d reordered\n\n",
		st.Received, st.Sent, st.LossPct(), st.Reordered)

	for s := range 2 {
		status, err := l.Status(lab.Side(s))
		if err != nil {
			return fail("status", err)
		}
		printDemoStatus(out, 'A'+rune(s), status)
	}
	if !res.Match {
		fmt.Fprintln(errw, "yip-router demo: the TCP transfer arrived corrupted")
		return 1
	}
	fmt.Fprintln(out, "done: tearing down the namespaces.")
	return 0
}

func printDemoStatus(w io.Writer, name rune, st *router.Status) {
	h := st.Handshakes
	fmt.Fprintf(w, "router %c (%s): %d shards, handshakes %d initiated / %d answered\n", name, st.Interface, len(st.Shards), h.Initiated, h.Answered)
	var on, off []string
	for _, n := range config.OffloadNames() {
		if st.Offloads[n] == "on" {
			on = append(on, n)
		} else {
			off = append(off, n)
		}
	}
	fmt.Fprintf(w, "  offloads on: %s", strings.Join(on, ", "))
	if len(off) > 0 {
		fmt.Fprintf(w, "; off: %s", strings.Join(off, ", "))
	}
	fmt.Fprintln(w)
	for _, s := range st.Shards {
		c := s.Counters
		drops := uint64(0)
		for k, v := range c {
			if len(k) > 5 && k[:5] == "drop_" {
				drops += v
			}
		}
		fmt.Fprintf(w, "  shard %d on cpu %d: %d datagrams in, %d out, %d parity sent, %d recovered by FEC, %d handed to another shard, %d dropped\n",
			s.ID, s.CPU, c["udp_in"], c["udp_out"], c["parity_out"], c["fec_recovered"], c["handed_off"], drops)
		fmt.Fprintf(w, "    %d TUN superpackets split, %d written coalesced, %d UDP GRO messages received\n",
			c["tun_super_in"], c["tun_super_out"], c["udp_super_in"])
	}
	for _, p := range st.Peers {
		for _, ln := range p.Lanes {
			fmt.Fprintf(w, "  lane %d (shard %d) -> %s: %d packets in, %d out, FEC %s\n", ln.Index, ln.Shard, ln.Remote, ln.RxPackets, ln.TxPackets, ln.FEC)
		}
	}
	fmt.Fprintln(w)
}

func avg(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	var t time.Duration
	for _, x := range d {
		t += x
	}
	return (t / time.Duration(len(d))).Round(time.Microsecond)
}
