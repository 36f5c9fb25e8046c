package hostcheck

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Root holds CAP_NET_ADMIN; a process that does not (the test re-run as
// nobody with no capabilities, through setpriv) does not.
func TestHasNetAdmin(t *testing.T) {
	if os.Getenv("YIP_TEST_CAP_CHILD") == "1" {
		if hasNetAdmin() {
			os.Exit(3)
		}
		os.Exit(0)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: checks root's capability and drops to nobody")
	}
	if !hasNetAdmin() {
		t.Fatal("root without CAP_NET_ADMIN")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) not installed")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(exe, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", exe, "-test.run", "^TestHasNetAdmin$")
	cmd.Env = append(os.Environ(), "YIP_TEST_CAP_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "ermission denied") {
			t.Skipf("the test binary is not reachable as nobody: %s", out)
		}
		t.Fatalf("as nobody without capabilities: %v: %s (exit 3: it claimed CAP_NET_ADMIN)", err, out)
	}
}
