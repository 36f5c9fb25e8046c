package cpuplan

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/yip-router/yip-router/config"
)

// fakeTopology writes sysfs topology for cpus: cpu i is on core core[i].
func fakeTopology(t *testing.T, core []int) string {
	t.Helper()
	sys := t.TempDir()
	for i, c := range core {
		d := filepath.Join(sys, "devices/system/cpu", "cpu"+strconv.Itoa(i), "topology")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d, "physical_package_id"), []byte("0\n"), 0o644)
		os.WriteFile(filepath.Join(d, "core_id"), []byte(strconv.Itoa(c)+"\n"), 0o644)
	}
	return sys
}

var auto = config.Shards{Auto: true}

func TestChoose(t *testing.T) {
	// 4 cores with SMT: cpu i and i+4 are siblings.
	sys := fakeTopology(t, []int{0, 1, 2, 3, 0, 1, 2, 3})
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	got, err := Choose(all, auto, sys)
	if err != nil || !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Fatalf("auto on 4 cores x 2 threads: %v %v", got, err)
	}
	// taskset -c 2-5: CPUs 2,3 (cores 2,3) and 4,5 (cores 0,1): 4 shards.
	if got, _ := Choose([]int{2, 3, 4, 5}, auto, sys); !slices.Equal(got, []int{2, 3, 4, 5}) {
		t.Fatalf("auto under taskset -c 2-5: %v", got)
	}
	// taskset -c 1,5: two threads of one core: one shard.
	if got, _ := Choose([]int{5, 1}, auto, sys); !slices.Equal(got, []int{1}) {
		t.Fatalf("auto on SMT siblings: %v", got)
	}
	if got, _ := Choose(all, config.Shards{N: 3}, sys); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("--shards 3: %v", got)
	}
	// N ignores the topology: the first N CPUs, siblings or not.
	if got, _ := Choose([]int{4, 0}, config.Shards{N: 2}, sys); !slices.Equal(got, []int{0, 4}) {
		t.Fatalf("--shards 2 on siblings: %v", got)
	}
	if _, err := Choose([]int{0, 1}, config.Shards{N: 3}, sys); err == nil {
		t.Fatal("3 shards on 2 CPUs accepted")
	}
	// Unknown topology: every CPU is its own core.
	if got, _ := Choose([]int{0, 1, 2}, auto, t.TempDir()); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("no topology: %v", got)
	}
	if _, err := Choose(nil, auto, sys); err == nil {
		t.Fatal("empty mask accepted")
	}
}

func TestChooseLimits(t *testing.T) {
	var mask []int
	for c := range config.MaxShards + 6 {
		mask = append(mask, c)
	}
	got, err := Choose(mask, auto, t.TempDir())
	if err != nil || len(got) != config.MaxShards || got[len(got)-1] != config.MaxShards-1 {
		t.Fatalf("auto on %d cores: %d CPUs, %v", len(mask), len(got), err)
	}
	if got, err := Choose(mask, config.Shards{N: config.MaxShards}, t.TempDir()); err != nil || len(got) != config.MaxShards {
		t.Fatalf("MaxShards shards: %d CPUs, %v", len(got), err)
	}
	for _, s := range []config.Shards{{}, {N: config.MaxShards + 1}, {N: -1}, {Auto: true, N: 2}} {
		if got, err := Choose(mask, s, t.TempDir()); err == nil {
			t.Errorf("Choose(%+v) = %v, want an error", s, got)
		}
	}
}

func TestPhysicalCore(t *testing.T) {
	sys := fakeTopology(t, []int{0, 1, 0})
	if a, b := PhysicalCore(sys, 0), PhysicalCore(sys, 2); a != "0/0" || a != b {
		t.Errorf("siblings: %q %q", a, b)
	}
	if a, b := PhysicalCore(sys, 0), PhysicalCore(sys, 1); a == b {
		t.Errorf("two cores named %q", a)
	}
	if got := PhysicalCore(sys, 7); got != "cpu7" {
		t.Errorf("unknown topology: %q", got)
	}
}
