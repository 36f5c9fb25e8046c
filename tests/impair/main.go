// Command impair runs the WAN impairment bridge of internal/impair.
//
//	impair run -ns NS -a IF -b IF [impairment flags]
//		bridges links IF and IF of namespace NS until SIGINT/SIGTERM,
//		then prints the counters as JSON.
//	impair bench [impairment flags] [-t 10s] [-udp 600M] [-tcp-buf 33554432]
//		builds the lab's two namespaces joined through the bridge (no
//		routers) and measures it with iperf3 between the plain
//		namespaces: TCP, or UDP at the given rate with 1400-byte packets.
//		-tcp-buf raises both namespaces' TCP buffer ceiling, without
//		which the stock 4 MiB send buffer, not the bridge, limits one
//		TCP flow over a long delay.
//
// The impairment flags apply to both directions (each with its own seed).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/yip-router/yip-router/internal/impair"
	"github.com/yip-router/yip-router/internal/lab"
	"github.com/yip-router/yip-router/internal/netns"
)

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "run" && os.Args[1] != "bench") {
		fmt.Fprintln(os.Stderr, "usage: impair run|bench [flags] (-h for flags)")
		os.Exit(2)
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	var d impair.Direction
	fs.DurationVar(&d.Delay, "delay", 0, "one-way delay")
	fs.DurationVar(&d.Jitter, "jitter", 0, "uniform jitter ± (keeps order)")
	fs.Float64Var(&d.Loss, "loss", 0, "random loss probability")
	geBad := fs.Float64("ge-bad", 1, "Gilbert–Elliott: loss probability in the bad state")
	geBurst := fs.Float64("ge-burst", 0, "Gilbert–Elliott: mean bad-state length in frames (0: off)")
	geRate := fs.Float64("ge-rate", 0, "Gilbert–Elliott: stationary loss rate")
	fs.Float64Var(&d.Reorder, "reorder", 0, "fraction of frames given -reorder-delay extra")
	fs.DurationVar(&d.ReorderDelay, "reorder-delay", time.Millisecond, "extra delay of reordered frames")
	fs.Int64Var(&d.Rate, "rate", 0, "rate limit, bytes/s (0: none)")
	fs.Int64Var(&d.QueueBytes, "queue", 0, "rate limiter queue bound, bytes (default rate/10)")
	fs.Uint64Var(&d.Seed, "seed", 1, "random seed")
	ns := fs.String("ns", "", "run: namespace")
	ifA := fs.String("a", "", "run: first link")
	ifB := fs.String("b", "", "run: second link")
	dur := fs.Duration("t", 10*time.Second, "bench: iperf3 duration")
	udp := fs.String("udp", "", "bench: UDP at this iperf3 rate (e.g. 600M) instead of TCP")
	tcpBuf := fs.Int("tcp-buf", 0, "bench: ceiling of both ends' TCP buffers, bytes (tcp_rmem/tcp_wmem max; 0: the host's)")
	_ = fs.Parse(os.Args[2:])
	if *geBurst > 0 {
		g := impair.BurstLoss(*geBad, *geBurst, *geRate)
		d.Burst = &g
	}
	cfg := impair.Both(d)
	var err error
	if mode == "run" {
		err = run(*ns, *ifA, *ifB, cfg)
	} else {
		err = bench(cfg, *dur, *udp, *tcpBuf)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "impair:", err)
		os.Exit(1)
	}
}

func run(ns, a, b string, cfg *impair.Config) error {
	br, err := impair.Start(ns, a, b, cfg)
	if err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	st := br.Stats()
	_ = br.Close()
	return json.NewEncoder(os.Stdout).Encode(st)
}

func bench(cfg *impair.Config, dur time.Duration, udp string, tcpBuf int) error {
	l, err := lab.New(lab.Options{Impair: cfg})
	if err != nil {
		return err
	}
	defer l.Close()
	if tcpBuf > 0 {
		for _, s := range []lab.Side{lab.A, lab.B} {
			if err := netns.TCPBuffers(l.NS[s], tcpBuf); err != nil {
				return err
			}
		}
	}
	srv := exec.Command("ip", "netns", "exec", l.NS[lab.B], "iperf3", "-s", "-1")
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	time.Sleep(300 * time.Millisecond)
	if out, err := l.Exec(lab.A, "ping", "-c", "3", "-i", "0.2", l.Underlay[lab.B].String()); err != nil {
		return err
	} else {
		fmt.Print(lastLines(out, 2))
	}
	args := []string{"-c", l.Underlay[lab.B].String(), "-t", fmt.Sprint(int(dur.Seconds())), "-f", "m"}
	if udp != "" {
		args = append(args, "-u", "-b", udp, "-l", "1400", "-w", "4M")
	}
	out, err := l.Exec(lab.A, "iperf3", args...)
	fmt.Print(lastLines(out, 6))
	st := l.ImpairStats()
	for i, s := range st {
		fmt.Printf("dir %s: %+v\n", []string{"A→B", "B→A"}[i], s)
	}
	return err
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n") + "\n"
}
