package e2e

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/yip-router/yip-router/crypto"
	"github.com/yip-router/yip-router/internal/lab"
	"github.com/yip-router/yip-router/internal/netns"
)

// TestRouteConflictRefused: a peer's AllowedIPs that the main table
// already routes through another interface used to be skipped in silence
// (a full tunnel on a host with a default route left IPv4 outside the
// tunnel). up now stops with an error naming the interface that has the
// route and the fix; for a default route in the main table (Table =
// main), Table = auto or the two halves.
func TestRouteConflictRefused(t *testing.T) {
	if err := netns.Available(); err != nil {
		t.Skip("end-to-end test skipped: ", err)
	}
	for _, tc := range []struct {
		name, route, peer, table, want string
	}{
		{"prefix", "10.202.0.0/16", "", "", "already routed through dev "},
		// With Table = auto a default route is a full tunnel
		// (TestFullTunnel); with the main table it meets main's own.
		{"default", "default", "0.0.0.0/0", "Table = main", "leave Table at auto (the default: a table of its own and policy rules, as wg-quick), or list 0.0.0.0/1, 128.0.0.0/1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := lab.New(lab.Options{Bin: bin, Shards: [2]int{1, 1}, Extra: [2]string{tc.table}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close(); os.RemoveAll(l.Dir) })
			if err := netns.IP("-n", l.NS[lab.A], "route", "add", tc.route, "dev", l.Veth(lab.A)); err != nil {
				t.Fatal(err)
			}
			if tc.peer != "" {
				k, err := crypto.GeneratePrivateKey()
				if err != nil {
					t.Fatal(err)
				}
				if err := l.WriteConfig(lab.A, fmt.Sprintf("\n[Peer]\nPublicKey = %s\nAllowedIPs = %s\n", k.Public(), tc.peer)); err != nil {
					t.Fatal(err)
				}
			}
			err = l.Start(lab.A)
			if err == nil {
				t.Fatal("up started with a route another interface has")
			}
			if msg := err.Error(); !strings.Contains(msg, tc.want) || !strings.Contains(msg, l.Veth(lab.A)) {
				t.Fatalf("error does not name %q and the other interface:\n%s", tc.want, msg)
			}
		})
	}
}

// A reload whose new AllowedIPs the main table already routes through
// another interface is refused whole: no peer added, no route changed.
func TestRouteConflictReloadRefused(t *testing.T) {
	l := newLab(t, lab.Options{Shards: [2]int{1, 1}})
	if err := l.WaitTunnel(lab.A, l.Inner4[lab.B], 15*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := netns.IP("-n", l.NS[lab.A], "route", "add", "10.203.0.0/16", "dev", l.Veth(lab.A)); err != nil {
		t.Fatal(err)
	}
	k, err := crypto.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WriteConfig(lab.A, fmt.Sprintf("\n[Peer]\nPublicKey = %s\nAllowedIPs = 10.203.0.0/16, 10.204.0.0/16\n", k.Public())); err != nil {
		t.Fatal(err)
	}
	if err := l.Signal(lab.A, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(l.Log(lab.A), "reload failed") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if log := l.Log(lab.A); !strings.Contains(log, "already routed through dev "+l.Veth(lab.A)) {
		t.Fatalf("no refusal naming the other interface in the log:\n%s", tail(log, 20))
	}
	st, err := l.Status(lab.A)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Peers) != 1 {
		t.Fatalf("%d peers after a refused reload, want 1", len(st.Peers))
	}
	if out, _ := l.Exec(lab.A, "ip", "route", "show", "10.204.0.0/16"); strings.TrimSpace(string(out)) != "" {
		t.Fatalf("a refused reload installed a route: %s", out)
	}
	pingAll(t, l, lab.A, l.Inner4[lab.B], 10)
}
