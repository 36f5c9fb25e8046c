// Package cpuplan picks the CPUs the shards run on, for the router that
// pins them and for `yip-router check`, which reports the plan before a
// start: one shard per physical core of the affinity mask (auto), or the
// first N CPUs of the mask. sys is the sysfs root ("/sys"), so tests give a
// fake topology.
package cpuplan

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/yip-router/yip-router/config"
)

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

// Choose picks the shard CPUs from the affinity mask, ascending: auto takes
// the first CPU of each physical core in the mask (one shard per core: two
// shards on SMT siblings would fight over one core's execution units), at
// most config.MaxShards of them; N takes the first N CPUs of the mask, and
// fails when the mask has fewer.
func Choose(mask []int, s config.Shards, sys string) ([]int, error) {
	if !s.Valid() {
		return nil, fmt.Errorf("shards %q: want auto or a number of shards 1..%d", s, config.MaxShards)
	}
	if len(mask) == 0 {
		return nil, fmt.Errorf("empty CPU affinity mask")
	}
	mask = slices.Clone(mask)
	slices.Sort(mask)
	if !s.Auto {
		if s.N > len(mask) {
			return nil, fmt.Errorf("%d shards requested but the CPU affinity mask has %d CPUs (%v); use taskset or fewer shards", s.N, len(mask), mask)
		}
		return mask[:s.N], nil
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
	if len(out) > config.MaxShards {
		out = out[:config.MaxShards]
	}
	return out, nil
}
