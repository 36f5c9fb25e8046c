package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yip-router/yip-router/internal/lab"
	"github.com/yip-router/yip-router/internal/netns"
)

// TestFullTunnel: AllowedIPs = 0.0.0.0/0 on A, whose namespace reaches
// everything, B's underlay address included, only through a default
// route. With Table = auto the default route goes into table 51820 behind
// wg-quick's rules, and the router's sockets carry mark 51820: an address
// only B has (the clear path to it is dropped at B) answers through the
// tunnel, the handshake's datagrams still leave by the default route (no
// loop into the tunnel), and when A stops its rules and table are gone.
func TestFullTunnel(t *testing.T) {
	const target = "198.51.100.1" // on B's loopback
	l := newLabWith(t, lab.Options{Shards: [2]int{1, 1}}, func(l *lab.Lab) error {
		va, vb := l.Veth(lab.A), l.Veth(lab.B)
		for _, args := range [][]string{
			{"-n", l.NS[lab.A], "addr", "del", l.Underlay[lab.A].String() + "/24", "dev", va},
			{"-n", l.NS[lab.A], "addr", "add", l.Underlay[lab.A].String() + "/32", "dev", va},
			{"-n", l.NS[lab.A], "route", "add", "default", "via", l.Underlay[lab.B].String(), "dev", va, "onlink"},
			{"-n", l.NS[lab.B], "addr", "add", target + "/32", "dev", "lo"},
		} {
			if err := netns.IP(args...); err != nil {
				return err
			}
		}
		if _, err := l.Exec(lab.B, "iptables", "-A", "INPUT", "-i", vb, "-d", target, "-j", "DROP"); err != nil {
			return err
		}
		return l.WriteConfig(lab.A, "AllowedIPs = 0.0.0.0/0\n")
	})
	if err := l.WaitTunnel(lab.A, netip.MustParseAddr(target), 15*time.Second); err != nil {
		t.Fatal(err)
	}
	rules4, _ := l.Exec(lab.A, "ip", "-4", "rule")
	rules6, _ := l.Exec(lab.A, "ip", "-6", "rule")
	table, _ := l.Exec(lab.A, "ip", "-4", "route", "show", "table", "51820")
	if !strings.Contains(rules4, "32764:\tfrom all lookup main suppress_prefixlength 0") ||
		!strings.Contains(rules4, "32765:\tnot from all fwmark 0xca6c lookup 51820") ||
		strings.Contains(rules6, "51820") || strings.Contains(rules6, "suppress") ||
		!strings.HasPrefix(strings.TrimSpace(table), "default dev "+l.Ifname[lab.A]) || strings.Count(table, "\n") != 1 {
		t.Fatalf("policy routing:\n%s\n%s\ntable 51820: %s", rules4, rules6, table)
	}
	marks := socketMarks(t, l, lab.A)
	if len(marks) < 2 || strings.Count(strings.Join(marks, " "), "0xca6c") != len(marks) {
		t.Errorf("router sockets' marks: %q", marks)
	}
	st, err := l.Status(lab.A)
	if err != nil {
		t.Fatal(err)
	}
	if p := st.Peers[0]; len(p.Lanes) != 1 || p.Lanes[0].RxPackets == 0 {
		t.Fatalf("A's peer: %+v", p)
	}
	if st.FwMark != 51820 || strings.Join(st.FullTunnel, ",") != "IPv4" {
		t.Errorf("status: fwmark %#x, full tunnel %q", st.FwMark, st.FullTunnel)
	}
	if out, err := l.Exec(lab.A, bin, "show", "-i", l.Ifname[lab.A]); err != nil || !strings.Contains(out, "  fwmark: 0xca6c\n  full tunnel: IPv4 (table 51820)\n") {
		t.Errorf("show:\n%s\n%v", out, err)
	}
	if !strings.Contains(l.Log(lab.A), "full tunnel") {
		t.Error("A's log does not mention the full tunnel")
	}

	if err := l.Stop(lab.A); err != nil {
		t.Fatal(err)
	}
	rules4, _ = l.Exec(lab.A, "ip", "-4", "rule")
	table, _ = l.Exec(lab.A, "ip", "-4", "route", "show", "table", "51820")
	if strings.Contains(rules4, "51820") || strings.Contains(rules4, "suppress") || strings.TrimSpace(table) != "" {
		t.Fatalf("after stop:\n%s\ntable 51820: %s", rules4, table)
	}
}

// TestHooksAndFwMark: PreUp runs before the interface exists, PostUp once
// it is up with its routes, PreDown while it still exists and PostDown
// after it is gone, each with %i replaced; FwMark marks every socket of
// the router (two per shard).
func TestHooksAndFwMark(t *testing.T) {
	if err := netns.Available(); err != nil {
		t.Skip("end-to-end test skipped: ", err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "hooks")
	exists := `$(ip link show %i >/dev/null 2>&1 && echo exists || echo absent)`
	extra := strings.Join([]string{
		"FwMark = 0x2a",
		"PreUp = echo pre-up %i " + exists + " >> " + out,
		"PostUp = echo post-up %i " + exists + " $(ip route show dev %i | grep -c 10.202.0.0/16) >> " + out,
		"PreDown = echo pre-down %i " + exists + " >> " + out,
		"PostDown = echo post-down %i " + exists + " >> " + out,
	}, "\n")
	l, err := lab.New(lab.Options{Bin: bin, Shards: [2]int{2, 1}, Extra: [2]string{extra}, Keep: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- router A log ---\n%s", tail(l.Log(lab.A), 60))
		}
		l.Close()
		os.RemoveAll(l.Dir)
	})
	if err := l.Start(lab.A); err != nil {
		t.Fatal(err)
	}
	name := l.Ifname[lab.A]
	// up answers on its control socket before PostUp is done.
	deadline := time.Now().Add(10 * time.Second)
	for b, _ := os.ReadFile(out); !strings.Contains(string(b), "post-up") && time.Now().Before(deadline); b, _ = os.ReadFile(out) {
		time.Sleep(50 * time.Millisecond)
	}
	// 2 shards: a listen, a lane, a strangers' and a known socket each.
	if marks := socketMarks(t, l, lab.A); len(marks) != 8 || strings.Count(strings.Join(marks, " "), "0x2a") != 8 {
		t.Errorf("router sockets' marks: %q", marks)
	}
	if st, err := l.Status(lab.A); err != nil || st.FwMark != 0x2a || st.FullTunnel != nil {
		t.Errorf("status: %v, %v", st, err)
	}
	if err := l.Stop(lab.A); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	want := fmt.Sprintf("pre-up %[1]s absent\npost-up %[1]s exists 1\npre-down %[1]s exists\npost-down %[1]s absent\n", name)
	if string(b) != want {
		t.Fatalf("hooks wrote\n%s\nwant\n%s", b, want)
	}
}

// TestPostUpFails: a failing PostUp stops up with an error naming the
// command; the interface is removed and, as with wg-quick, PreDown and
// PostDown do not run.
func TestPostUpFails(t *testing.T) {
	if err := netns.Available(); err != nil {
		t.Skip("end-to-end test skipped: ", err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "hooks")
	extra := strings.Join([]string{
		"PostUp = echo post-up %i >> " + out,
		"PostUp = exit 7",
		"PostUp = echo never >> " + out,
		"PreDown = echo pre-down >> " + out,
		"PostDown = echo post-down >> " + out,
	}, "\n")
	l, err := lab.New(lab.Options{Bin: bin, Extra: [2]string{extra}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); os.RemoveAll(l.Dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logOut, err := exec.CommandContext(ctx, "ip", "netns", "exec", l.NS[lab.A], bin, "up", "-c", l.ConfigPath(lab.A), "--shards", "1").CombinedOutput()
	if err == nil || ctx.Err() != nil || !strings.Contains(string(logOut), `PostUp command "exit 7": exit status 7`) {
		t.Fatalf("up with a failing PostUp: %v\n%s", err, logOut)
	}
	if b, _ := os.ReadFile(out); string(b) != "post-up "+l.Ifname[lab.A]+"\n" {
		t.Errorf("hooks wrote %q", b)
	}
	if err := netns.IP("-n", l.NS[lab.A], "link", "show", l.Ifname[lab.A]); err == nil {
		t.Error("the interface outlived the failed up")
	}
}

// socketMarks lists the fwmark ss reports for each UDP socket of side's
// router ("none" for a socket without one).
func socketMarks(t *testing.T, l *lab.Lab, s lab.Side) []string {
	t.Helper()
	out, err := l.Exec(s, "ss", "-uanep")
	if err != nil {
		t.Fatal(err)
	}
	var marks []string
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, fmt.Sprintf("pid=%d,", l.Pid(s))) {
			continue
		}
		m := "none"
		if _, after, ok := strings.Cut(line, "fwmark:"); ok {
			m = strings.Fields(after)[0]
		}
		marks = append(marks, m)
	}
	return marks
}
