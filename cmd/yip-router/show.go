package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/yip-router/yip-router/router"
)

func showCmd() *cobra.Command {
	var o showOptions
	cmd := &cobra.Command{
		Use:   "show [IFACE | all] [--json | --dump | --watch] [-i IFACE | --socket PATH] [" + strings.Join(views, "|") + "]",
		Short: "status of running routers",
		Long: `Print the status of the routers running in this network namespace (or of
the one named IFACE, as wg spells it: show wg0, show all dump): interface,
handshakes, offloads, shards and their counters, each peer with its lanes.
A view prints only that, tab-separated:
` + strings.Join(views, ", ") + `.
--dump is the versioned dump for scripts, --json an array with one element
per router (docs/SHOW.md). --watch refreshes per-shard and per-lane rates
until Ctrl-C, like top. The control sockets are in ` + router.RunDir + `;
reading them needs root.`,
		ValidArgsFunction: showCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			return exit(runShow(o, args, cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.asJSON, "json", false, "print JSON")
	f.StringVarP(&o.iface, "interface", "i", "", "`IFACE` of the router to show (default: every running router)")
	f.StringVar(&o.sock, "socket", "", "control socket `PATH` (overrides -i)")
	f.BoolVar(&o.watch, "watch", false, "refresh per-shard and per-lane rates until Ctrl-C, like top")
	f.DurationVar(&o.every, "interval", time.Second, "refresh interval of --watch")
	f.BoolVar(&o.dump, "dump", false, "print the versioned tab-separated dump for scripts (docs/SHOW.md); same as the dump view")
	f.BoolVar(&o.allNS, "all-namespaces", false, "list the routers of every network namespace, not only this one's")
	_ = cmd.RegisterFlagCompletionFunc("interface", cobra.NoFileCompletions)
	_ = cmd.MarkFlagFilename("socket", "sock")
	return cmd
}

// showOptions are show's flags.
type showOptions struct {
	asJSON, watch, dump, allNS bool
	iface, sock                string
	every                      time.Duration
}

// showCompletions completes show's arguments: all, then a view.
func showCompletions(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	switch len(args) {
	case 0:
		return append([]cobra.Completion{"all"}, views...), cobra.ShellCompDirectiveNoFileComp
	case 1:
		return views, cobra.ShellCompDirectiveNoFileComp
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}

func runShow(o showOptions, args []string, stdout, stderr io.Writer) int {
	// As wg spells it: `show [NAME | all] [VIEW]`; pflag has taken the
	// flags out wherever they were.
	name, args := showTarget(args)
	view := ""
	if len(args) > 0 {
		if len(args) > 1 || !slices.Contains(views, args[0]) {
			fmt.Fprintf(stderr, "yip-router show: unknown view %q (views: %s)\n", strings.Join(args, " "), strings.Join(views, ", "))
			return 2
		}
		view = args[0]
	}
	if name != "" && name != "all" {
		if o.iface != "" && o.iface != name {
			fmt.Fprintf(stderr, "yip-router show: interface %q and -i %q\n", name, o.iface)
			return 2
		}
		o.iface = name
	}
	if o.dump {
		if view != "" && view != "dump" {
			fmt.Fprintln(stderr, "yip-router show: --dump and the", view, "view exclude each other")
			return 2
		}
		view = "dump"
	}
	if view != "" && (o.asJSON || o.watch) {
		fmt.Fprintln(stderr, "yip-router show: a view excludes --json and --watch")
		return 2
	}
	var paths []string
	switch {
	case o.sock != "":
		paths = []string{o.sock}
	case o.iface != "":
		paths = []string{router.FindSocket(o.iface)}
	default:
		var err error
		paths, err = router.Sockets(o.allNS)
		if err != nil || len(paths) == 0 {
			fmt.Fprintln(stderr, "yip-router show:", errNoRouters)
			return 1
		}
	}
	if o.watch {
		return watch(stdout, paths, o.every, 0, isTerminal(stdout))
	}
	code := 0
	var all []*router.Status
	listing := o.sock == "" && o.iface == ""
	for _, p := range paths {
		st, err := router.QueryStatus(p)
		if listing && errors.Is(err, syscall.ECONNREFUSED) {
			// The socket of a router that was killed before it could
			// remove it (the unit keeps the directory): not running.
			continue
		}
		if err != nil {
			fmt.Fprintln(stderr, "yip-router show:", err)
			code = 1
			continue
		}
		all = append(all, st)
	}
	switch view {
	case "":
	case "dump":
		writeDump(stdout, all)
		return code
	default:
		writeView(stdout, view, all, o.sock == "" && o.iface == "")
		return code
	}
	if o.asJSON {
		writeJSON(stdout, all)
		return code
	}
	for _, st := range all {
		printStatus(stdout, st)
	}
	return code
}

// writeJSON prints the routers' status as one JSON array, however many
// there are (one shape for scripts: `jq '.[0]'` picks a router).
func writeJSON(w io.Writer, all []*router.Status) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if all == nil {
		all = []*router.Status{}
	}
	_ = enc.Encode(all)
}

// showTarget takes a leading interface name or "all" off args, as `wg
// show` spells them: a first argument that is neither a view nor a flag.
// A view's name is a view (-i NAME shows an interface named like one).
func showTarget(args []string) (name string, rest []string) {
	if len(args) == 0 || slices.Contains(views, args[0]) || strings.HasPrefix(args[0], "-") {
		return "", args
	}
	return args[0], args[1:]
}

// human formats a byte count with binary units.
func human(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func ago(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return time.Since(t).Round(time.Second).String() + " ago"
}

func printStatus(w io.Writer, st *router.Status) {
	fmt.Fprintf(w, "interface: %s\n  public key: %s\n  listening port: %d\n  uptime: %s\n",
		st.Interface, st.PublicKey, st.ListenPort, st.Uptime.Round(time.Second))
	h := st.Handshakes
	fmt.Fprintf(w, "  handshakes: %d initiated, %d completed, %d answered, %d cookie replies, %d refused, %d rate-limited, %d unanswered over the cookie cap\n",
		h.Initiated, h.Completed, h.Answered, h.CookieDemanded, h.Refused, h.RateLimited, h.CookieCapped)
	if len(st.Offloads) > 0 {
		var offs []string
		for _, name := range []string{"tso", "uso", "gro", "udp-gso", "udp-gro"} {
			if v, ok := st.Offloads[name]; ok {
				offs = append(offs, name+" "+v)
			}
		}
		fmt.Fprintf(w, "  offloads: %s\n", strings.Join(offs, ", "))
	}
	fmt.Fprintf(w, "  padding: %s (tun mtu %d)\n", st.Padding, st.TunMTU)
	if st.Steering != "" {
		fmt.Fprintf(w, "  steering: %s\n", st.Steering)
	}
	if st.FwMark != 0 {
		fmt.Fprintf(w, "  fwmark: %#x\n", st.FwMark)
	}
	if len(st.FullTunnel) > 0 {
		fmt.Fprintf(w, "  full tunnel: %s (table %d)\n", strings.Join(st.FullTunnel, ", "), st.FwMark)
	}
	k := st.Kernel
	fmt.Fprintf(w, "  kernel drops: tun tx %d, tun rx %d, socket %d, strangers' sockets %d, known sockets %d\n", k.TUNTxDropped, k.TUNRxDropped, k.SocketDrops, k.StrangerDrops, k.KnownDrops)
	fmt.Fprintf(w, "  shards: %d\n", len(st.Shards))
	for _, s := range st.Shards {
		c := s.Counters
		fmt.Fprintf(w, "    shard %d (cpu %d): tun in/out %d/%d  udp in/out %d/%d  %s in, %s out  handed off %d  fec recovered %d\n",
			s.ID, s.CPU, c["tun_in"], c["tun_out"], c["udp_in"], c["udp_out"], human(c["bytes_in"]), human(c["bytes_out"]), c["handed_off"], c["fec_recovered"])
		fmt.Fprintf(w, "      superpackets: tun read %d, tun written %d, udp gro received %d\n",
			c["tun_super_in"], c["tun_super_out"], c["udp_super_in"])
		var drops []string
		for k, v := range c {
			if strings.HasPrefix(k, "drop_") {
				drops = append(drops, fmt.Sprintf("%s %d", strings.TrimPrefix(k, "drop_"), v))
			}
		}
		slices.Sort(drops)
		if len(drops) > 0 {
			fmt.Fprintf(w, "      drops: %s\n", strings.Join(drops, ", "))
		}
	}
	for _, p := range st.Peers {
		fmt.Fprintf(w, "\npeer: %s\n", p.PublicKey)
		if p.Endpoint != "" || p.EndpointName != "" {
			fmt.Fprintf(w, "  endpoint: %s\n", endpointLine(p))
		}
		fmt.Fprintf(w, "  allowed ips: %s\n", strings.Join(p.AllowedIPs, ", "))
		fmt.Fprintf(w, "  latest handshake: %s (%d in all)\n", ago(p.LastHandshake), p.Handshakes)
		fmt.Fprintf(w, "  transfer: %s received, %s sent (%d / %d packets)\n", human(p.RxBytes), human(p.TxBytes), p.RxPackets, p.TxPackets)
		fmt.Fprintf(w, "  fec: %d recovered, %d lost\n", p.FECRecovered, p.FECLost)
		for _, l := range p.Lanes {
			pad := ""
			if st.Padding != "off" && !l.Padded {
				pad = ", unpadded (the peer has not said it reads padding)"
			}
			if echo, known := l.PeerEchoes(); known && !echo {
				pad += ", no delay echo (the peer has not said it reads one: no round trip, no loss split)"
			}
			via := ""
			if l.Local != "" {
				via = " from " + l.Local
			}
			fmt.Fprintf(w, "  lane %d on shard %d → %s%s: rx %d pkts %s, tx %d pkts %s, fec %s, last rx %s%s\n",
				l.Index, l.Shard, l.Remote, via, l.RxPackets, human(l.RxBytes), l.TxPackets, human(l.TxBytes), fecText(l), ago(l.LastRx), pad)
		}
	}
	fmt.Fprintln(w)
}

// fecText is a lane's FEC as show prints it: the ratio, the loss it was
// sized for and its bursts (when longer than independent loss; assumed
// until measured), what the path's queue did to the last report, and the
// peer's split of that report when the queue overflowed (path split).
func fecText(l router.LaneStatus) string {
	fec := l.FEC
	if l.FECLossPct != nil {
		fec += fmt.Sprintf(" for %.2f%% loss", *l.FECLossPct)
		if b := l.FECBurst; b != nil && *b > 1 && *l.FECLossPct > 0 {
			fec += fmt.Sprintf(" in bursts of %.1f", *b)
			if !l.FECBurstMeasured {
				fec += " (assumed)"
			}
		}
	}
	if l.Path != "" {
		fec += fmt.Sprintf(", path %s (rtt %.1f ms, least %.1f", l.Path, l.RTTms, l.RTTLeastMs)
		if c := l.Split; c != nil && l.Path == "split" {
			fec += fmt.Sprintf("; the peer lost %d of %d in a queue, %d of %d outside",
				c.QueuedLost, c.QueuedExpected, c.ClearLost, c.ClearExpected)
		}
		fec += ")"
	}
	return fec
}

// endpointLine is a peer's endpoint as show prints it: the address, the
// host name it came from, whether the peer roamed; a name that has not
// resolved yet says so.
func endpointLine(p router.PeerStatus) string {
	line := p.Endpoint
	switch {
	case p.Endpoint == "":
		line = "none yet (" + p.EndpointName + " does not resolve; looked up again while running)"
	case p.EndpointName != "":
		line += " (" + p.EndpointName + ")"
	}
	if p.EndpointMoves > 0 {
		line += fmt.Sprintf(" (roamed: %d lane moves)", p.EndpointMoves)
	}
	return line
}
