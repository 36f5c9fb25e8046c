package netns

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func sysctlIn(t *testing.T, ns, key string) []string {
	t.Helper()
	argv := []string{"sysctl", "-n", key}
	if ns != "" {
		argv = append([]string{"ip", "netns", "exec", ns}, argv...)
	}
	out, err := exec.Command(argv[0], argv[1:]...).Output()
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
	return strings.Fields(string(out))
}

// TCPBuffers changes only the ceiling, only in the namespace it is given.
func TestTCPBuffers(t *testing.T) {
	if err := Available(); err != nil {
		t.Skip(err)
	}
	ns := fmt.Sprintf("yipnst%d", os.Getpid())
	if err := Add(ns); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = Del(ns) }()
	const max = 48 << 20
	keys := []string{"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"}
	var before, host [2][]string
	for i, k := range keys {
		before[i], host[i] = sysctlIn(t, ns, k), sysctlIn(t, "", k)
	}
	if err := TCPBuffers(ns, max); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		got := sysctlIn(t, ns, k)
		want := []string{before[i][0], before[i][1], fmt.Sprint(max)}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s in %s = %v, want %v", k, ns, got, want)
		}
		if h := sysctlIn(t, "", k); strings.Join(h, " ") != strings.Join(host[i], " ") {
			t.Errorf("host's %s changed: %v, was %v", k, h, host[i])
		}
	}
	if err := TCPBuffers("yip-no-such-ns", max); err == nil {
		t.Error("no error for a namespace that does not exist")
	}
}
