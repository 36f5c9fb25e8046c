package main

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The real command on the example config and this machine: whatever the
// machine, the config is valid and every topic is reported.
func TestCheckExample(t *testing.T) {
	code, out, stderr := runCLI(t, "", "check", "-c", "../../examples/gw-a.conf")
	if code != 0 && code != 1 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"OK    config: ../../examples/gw-a.conf: interface yip0, listen port 47133, 1 peer(s), MTU 1410\n",
		"socket buffers: rmem_max ", "socket buffers: wmem_max ", "TUN: ", "CPUs: affinity mask ",
		"forwarding: net.ipv4.ip_forward", "listen port: ", "metrics: ", "error(s), ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if hasError := strings.Contains(out, "\nERROR "); hasError != (code == 1) {
		t.Errorf("exit %d but ERROR lines: %v\n%s", code, hasError, out)
	}
}

// A port in use is an ERROR and the exit status says so; a bad config too.
func TestCheckFailures(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	port := pc.LocalAddr().(*net.UDPAddr).Port
	b, err := os.ReadFile("../../examples/gw-b.conf")
	if err != nil {
		t.Fatal(err)
	}
	conf := strings.Replace(string(b), "ListenPort = 47133", "ListenPort = "+strconv.Itoa(port)+"\nListenAddress = 127.0.0.1", 1)
	p := filepath.Join(t.TempDir(), "busy.conf")
	if err := os.WriteFile(p, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCLI(t, "", "check", "-c", p, "--shards", "1")
	if code != 1 || !strings.Contains(out, "ERROR listen port: cannot bind UDP 127.0.0.1:"+strconv.Itoa(port)) {
		t.Errorf("busy port: exit %d\n%s", code, out)
	}
	if !strings.Contains(out, "--shards 1 gives 1 shard(s)") {
		t.Errorf("--shards not applied:\n%s", out)
	}
	if err := os.WriteFile(p, []byte("[Interface]\nListenPort = 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCLI(t, "", "check", "-c", p)
	if code != 1 || !strings.Contains(out, "ERROR config: "+p+":2: [Interface] ListenPort") {
		t.Errorf("bad config: exit %d\n%s", code, out)
	}
	if code, _, _ := runCLI(t, "", "check"); code != 2 {
		t.Errorf("no -c: exit %d, want 2", code)
	}
	if code, _, errOut := runCLI(t, "", "check", "-c", p, "--shards", "0"); code != 2 || !strings.Contains(errOut, `--shards "0": want auto or a number of shards 1..64`) {
		t.Errorf("--shards 0: exit %d, want 2\n%s", code, errOut)
	}
}
