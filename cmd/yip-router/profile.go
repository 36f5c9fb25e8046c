package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
)

// cpuProfileEnv names the file `up` writes a CPU profile of its whole run
// to (go tool pprof): where a router's CPU goes under a real load, which
// the in-process benchmarks do not show (thousands of peers, the garbage
// collector at GOGC=25, the control loop beside the shards). "%p" in it
// becomes the process ID, so routers started with the same environment
// (two in a lab's namespaces) write a file each.
const cpuProfileEnv = "YIP_CPUPROFILE"

// startCPUProfile starts the profile into path and returns what stops it
// and closes the file.
func startCPUProfile(path string) (func(), error) {
	path = strings.ReplaceAll(path, "%p", strconv.Itoa(os.Getpid()))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
