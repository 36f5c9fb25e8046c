package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// The profile YIP_CPUPROFILE names is a complete pprof file once stopped
// (gzip-compressed protobuf), and a path that cannot be written is an
// error naming the variable, before anything runs.
func TestCPUProfile(t *testing.T) {
	dir := t.TempDir()
	stop, err := startCPUProfile(filepath.Join(dir, "cpu-%p.prof"))
	if err != nil {
		t.Fatal(err)
	}
	stop()
	b, err := os.ReadFile(filepath.Join(dir, "cpu-"+strconv.Itoa(os.Getpid())+".prof"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		t.Fatalf("the profile is not a pprof file: % x", b[:min(len(b), 8)])
	}
	if _, err := startCPUProfile(filepath.Join(t.TempDir(), "missing", "cpu.prof")); err == nil || !bytes.Contains([]byte(err.Error()), []byte(cpuProfileEnv)) {
		t.Fatalf("an unwritable path: %v", err)
	}
}
