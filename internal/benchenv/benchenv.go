// Package benchenv describes the machine and the build a benchmark ran on,
// for the results files of make bench-compare and make bench-scale, so a
// reader can tell two runs apart.
package benchenv

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// Host is the build and machine of a run; it is embedded in each tool's
// results (the JSON keys are flat).
type Host struct {
	Commit   string `json:"yip_router_commit"`
	Kernel   string `json:"kernel"`
	CPUs     int    `json:"cpus"`
	CPUModel string `json:"cpu_model"`
}

// Describe reads the host; commit "" means `git describe` of the working
// directory.
func Describe(commit string) Host {
	h := Host{Commit: commit, CPUs: runtime.NumCPU()}
	if h.Commit == "" {
		h.Commit = FirstLine(exec.Command("git", "describe", "--always", "--dirty").Output())
	}
	h.Kernel = FirstLine(exec.Command("uname", "-r").Output())
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, ln := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(ln, ":"); ok && strings.TrimSpace(k) == "model name" {
				h.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return h
}

// FirstLine is the first line of a command's output, or "unknown" when it
// failed.
func FirstLine(b []byte, err error) string {
	if err != nil {
		return "unknown"
	}
	ln, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return ln
}
