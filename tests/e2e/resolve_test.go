package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yip-router/yip-router/internal/lab"
	"github.com/yip-router/yip-router/internal/netns"
)

// TestEndpointNameResolvesLater gives A B's Endpoint as a host name that
// A's namespace cannot resolve at start (its own /etc/hosts, through ip
// netns exec, and a resolver that answers nothing). A starts anyway with
// a warning, and the tunnel comes up once the name appears in the hosts
// file. Then B's first address stops answering and the name moves to B's
// second one: A's unanswered rekeys make it look the name up again, and
// the tunnel carries traffic through the new address.
func TestEndpointNameResolvesLater(t *testing.T) {
	const name = "gw-b.yip.test"
	second := netip.MustParseAddr("172.31.250.3")
	var hosts string
	writeHosts := func(line string) {
		t.Helper()
		// In place: the file is bind-mounted into A's mount namespace.
		if err := os.WriteFile(hosts, []byte("127.0.0.1 localhost\n"+line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l := newLabWith(t, lab.Options{Shards: [2]int{1, 1}, EndpointName: name,
		Env: []string{"YIP_TEST_RESOLVE_EVERY=10s", "YIP_TEST_REKEY_AFTER=2s"}}, func(l *lab.Lab) error {
		etc := filepath.Join("/etc/netns", l.NS[lab.A])
		if err := os.MkdirAll(etc, 0o755); err != nil {
			return err
		}
		t.Cleanup(func() { os.RemoveAll(etc) })
		hosts = filepath.Join(etc, "hosts")
		writeHosts("")
		// No resolver in A's namespace: lookups of other names fail at
		// once instead of waiting for the host's.
		if err := os.WriteFile(filepath.Join(etc, "resolv.conf"), []byte("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n"), 0o644); err != nil {
			return err
		}
		return netns.IP("-n", l.NS[lab.B], "addr", "add", second.String()+"/24", "dev", l.Veth(lab.B))
	})
	if log := l.Log(lab.A); !strings.Contains(log, `cannot resolve "`+name+`"`) {
		t.Fatalf("no warning about the name in A's log:\n%s", tail(log, 20))
	}
	st, err := l.Status(lab.A)
	if err != nil {
		t.Fatal(err)
	}
	if p := st.Peers[0]; p.Endpoint != "" || p.EndpointName != fmt.Sprintf("%s:%d", name, lab.Port) {
		t.Fatalf("before the name resolves: endpoint %q, name %q", p.Endpoint, p.EndpointName)
	}
	if out, err := l.Exec(lab.A, bin, "show", l.Ifname[lab.A]); err != nil || !strings.Contains(out, "does not resolve") {
		t.Errorf("show does not say the name does not resolve (%v):\n%s", err, out)
	}

	// The name appears: A finds it on a retry (a tenth of 10 s, plus the
	// Go resolver's 5 s hosts-file cache) and the tunnel comes up.
	writeHosts(l.Underlay[lab.B].String() + " " + name + "\n")
	if err := l.WaitTunnel(lab.A, l.Inner4[lab.B], 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if st, err = l.Status(lab.A); err != nil {
		t.Fatal(err)
	}
	if p := st.Peers[0]; p.Endpoint != netip.AddrPortFrom(l.Underlay[lab.B], lab.Port).String() || st.EndpointLookups.OK == 0 {
		t.Fatalf("after the name resolved: endpoint %q, lookups %+v", p.Endpoint, st.EndpointLookups)
	}

	// B's first address goes dark for A and the name moves to B's
	// second: A's rekeys go unanswered, A looks the name up again, and
	// traffic flows through the second address.
	writeHosts(second.String() + " " + name + "\n")
	if _, err := l.Exec(lab.A, "iptables", "-A", "OUTPUT", "-d", l.Underlay[lab.B].String(), "-p", "udp", "-j", "DROP"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(45 * time.Second)
	want := netip.AddrPortFrom(second, lab.Port).String()
	for {
		if st, err = l.Status(lab.A); err == nil && st.Peers[0].Endpoint == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A still talks to %q, want %s", st.Peers[0].Endpoint, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := l.WaitTunnel(lab.A, l.Inner4[lab.B], 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if log := l.Log(lab.A); !strings.Contains(log, "peer endpoint name resolves to a new address") {
		t.Errorf("A's log does not say the endpoint moved")
	}
}
