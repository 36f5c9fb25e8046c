package router

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// AffinityCPUs returns the CPUs in the process's affinity mask, ascending.
func AffinityCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var cpus []int
	for i := range 1024 {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	return cpus, nil
}

// PhysicalCore names the core a CPU belongs to (package/core id) under the
// sysfs root sys, so SMT siblings share a name. Unknown topology gives each
// CPU its own core.
func PhysicalCore(sys string, cpu int) string {
	base := fmt.Sprintf("%s/devices/system/cpu/cpu%d/topology/", sys, cpu)
	pkg, err1 := os.ReadFile(base + "physical_package_id")
	core, err2 := os.ReadFile(base + "core_id")
	if err1 != nil || err2 != nil {
		return "cpu" + strconv.Itoa(cpu)
	}
	return strings.TrimSpace(string(pkg)) + "/" + strings.TrimSpace(string(core))
}

// ChooseCPUs picks the shard CPUs from the affinity mask: "auto" takes the
// first CPU of each physical core in the mask (one shard per core: two
// shards on SMT siblings would fight over one core's execution units), and
// n>0 takes the first n CPUs of the mask. sys is the sysfs root.
func ChooseCPUs(mask []int, auto bool, n int, sys string) ([]int, error) {
	if len(mask) == 0 {
		return nil, fmt.Errorf("empty CPU affinity mask")
	}
	mask = slices.Clone(mask)
	slices.Sort(mask)
	if !auto {
		if n < 1 {
			return nil, fmt.Errorf("shards must be at least 1")
		}
		if n > len(mask) {
			return nil, fmt.Errorf("%d shards requested but the CPU affinity mask has %d CPUs (%v); use taskset or fewer shards", n, len(mask), mask)
		}
		return mask[:n], nil
	}
	seen := map[string]bool{}
	var out []int
	for _, c := range mask {
		pc := PhysicalCore(sys, c)
		if !seen[pc] {
			seen[pc] = true
			out = append(out, c)
		}
	}
	if len(out) > 64 {
		out = out[:64]
	}
	return out, nil
}
