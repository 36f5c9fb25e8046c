// Package bench holds the end-to-end benchmarks: two yip-router processes
// in two namespaces with iperf3 through the tunnel. They are measurements,
// not tests: they run only with YIP_BENCH_E2E=1 (make bench-e2e) and print
// their figures; docs/BENCHMARKS.md records them with the command.
package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/yip-router/yip-router/internal/lab"
	"github.com/yip-router/yip-router/internal/netns"
)

type iperfResult struct {
	End struct {
		SumSent struct {
			BitsPerSecond float64 `json:"bits_per_second"`
		} `json:"sum_sent"`
		SumReceived struct {
			BitsPerSecond float64 `json:"bits_per_second"`
		} `json:"sum_received"`
		Sum struct {
			BitsPerSecond float64 `json:"bits_per_second"`
			LostPercent   float64 `json:"lost_percent"`
		} `json:"sum"`
	} `json:"end"`
}

func iperf(t *testing.T, l *lab.Lab, args ...string) iperfResult {
	t.Helper()
	srv := exec.Command("ip", "netns", "exec", l.NS[lab.B], "iperf3", "-s", "-1", "-B", l.Inner4[lab.B].String())
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Wait()
	time.Sleep(300 * time.Millisecond)
	out, err := exec.Command("ip", append([]string{"netns", "exec", l.NS[lab.A], "iperf3", "-c", l.Inner4[lab.B].String(), "-J"}, args...)...).Output()
	if err != nil {
		t.Fatalf("iperf3: %v", err)
	}
	var r iperfResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("iperf3 output: %v", err)
	}
	return r
}

// TestE2EThroughput: TCP (4 flows, 10 s) and paced UDP streams (300 Mbit/s
// and 1 Gbit/s offered, 1380-byte datagrams: +28 = 1408 bytes fits the 1410
// MTU unfragmented, 10 s) through the tunnel, for 1 and 2 shards per router.
// Both routers, iperf3 client and server share this machine's cores, so the
// figures are a floor, not a per-core ceiling.
func TestE2EThroughput(t *testing.T) {
	if os.Getenv("YIP_BENCH_E2E") != "1" {
		t.Skip("end-to-end benchmark: run with YIP_BENCH_E2E=1 (make bench-e2e)")
	}
	if err := netns.Available(); err != nil {
		t.Skip(err)
	}
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("iperf3 not installed (make bench-e2e installs it)")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "yip-router")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/yip-router").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, shards := range []int{1, 2} {
		l, err := lab.New(lab.Options{Bin: bin, Shards: [2]int{shards, shards}})
		if err != nil {
			t.Fatal(err)
		}
		func() {
			defer l.Close()
			for _, s := range []lab.Side{lab.B, lab.A} {
				if err := l.Start(s); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.WaitTunnel(lab.A, l.Inner4[lab.B], 15*time.Second); err != nil {
				t.Fatal(err)
			}
			tcp := iperf(t, l, "-t", "10", "-P", "4")
			fmt.Printf("shards=%d  TCP 4 flows: %.2f Gbit/s received\n", shards, tcp.End.SumReceived.BitsPerSecond/1e9)
			for _, rate := range []string{"300M", "1G"} {
				udp := iperf(t, l, "-t", "10", "-u", "-b", rate, "-l", "1380")
				got := udp.End.Sum.BitsPerSecond * (1 - udp.End.Sum.LostPercent/100)
				fmt.Printf("shards=%d  UDP %s offered (1380 B): %.2f Gbit/s delivered, %.2f%% lost\n",
					shards, rate, got/1e9, udp.End.Sum.LostPercent)
			}
		}()
	}
}
