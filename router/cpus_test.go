package router

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
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

func TestChooseCPUs(t *testing.T) {
	// 4 cores with SMT: cpu i and i+4 are siblings.
	sys := fakeTopology(t, []int{0, 1, 2, 3, 0, 1, 2, 3})
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	got, err := ChooseCPUs(all, true, 0, sys)
	if err != nil || !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Fatalf("auto on 4 cores x 2 threads: %v %v", got, err)
	}
	// taskset -c 2-5: CPUs 2,3 (cores 2,3) and 4,5 (cores 0,1): 4 shards.
	if got, _ := ChooseCPUs([]int{2, 3, 4, 5}, true, 0, sys); !slices.Equal(got, []int{2, 3, 4, 5}) {
		t.Fatalf("auto under taskset -c 2-5: %v", got)
	}
	// taskset -c 1,5: two threads of one core: one shard.
	if got, _ := ChooseCPUs([]int{5, 1}, true, 0, sys); !slices.Equal(got, []int{1}) {
		t.Fatalf("auto on SMT siblings: %v", got)
	}
	if got, _ := ChooseCPUs(all, false, 3, sys); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("--shards 3: %v", got)
	}
	if _, err := ChooseCPUs([]int{0, 1}, false, 3, sys); err == nil {
		t.Fatal("3 shards on 2 CPUs accepted")
	}
	// Unknown topology: every CPU is its own core.
	if got, _ := ChooseCPUs([]int{0, 1, 2}, true, 0, t.TempDir()); !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("no topology: %v", got)
	}
	if mask, err := AffinityCPUs(); err != nil || len(mask) == 0 {
		t.Fatalf("affinity of this process: %v %v", mask, err)
	}
}

func TestDiffPrefixes(t *testing.T) {
	p := netip.MustParsePrefix
	add, del := diffPrefixes([]netip.Prefix{p("10.0.0.0/8"), p("10.1.0.0/16")}, []netip.Prefix{p("10.1.0.0/16"), p("fd00::/8")})
	if !slices.Equal(add, []netip.Prefix{p("fd00::/8")}) || !slices.Equal(del, []netip.Prefix{p("10.0.0.0/8")}) {
		t.Fatalf("add %v del %v", add, del)
	}
}
