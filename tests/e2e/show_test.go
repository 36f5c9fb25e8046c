package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/yip-router/yip-router/internal/lab"
	"github.com/yip-router/yip-router/router"
)

// The dump and the views of a running router with traffic agree with
// show --json, taken just before and just after them.
func TestShowDump(t *testing.T) {
	l := newLab(t, lab.Options{Shards: [2]int{2, 2}})
	if err := l.WaitTunnel(lab.A, l.Inner4[lab.B], 15*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := l.TCPTransfer(lab.A, l.Inner4[lab.B], 8<<20, 2); err != nil {
		t.Fatal(err)
	}
	show := func(args ...string) string {
		t.Helper()
		out, err := l.Exec(lab.A, bin, append([]string{"show"}, append(args, "-i", l.Ifname[lab.A])...)...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// A rekey between the snapshots would reset the session counters:
	// try again then.
	var before, after *router.Status
	var dump, transfer string
	for try := 0; ; try++ {
		var err error
		if before, err = l.Status(lab.A); err != nil {
			t.Fatal(err)
		}
		dump, transfer = show("--dump"), show("transfer")
		if after, err = l.Status(lab.A); err != nil {
			t.Fatal(err)
		}
		if before.Peers[0].Handshakes == after.Peers[0].Handshakes || try == 3 {
			break
		}
	}
	if len(after.Peers) != 1 {
		t.Fatalf("%d peers", len(after.Peers))
	}
	lines := strings.Split(strings.TrimSuffix(dump, "\n"), "\n")
	if len(lines) != 3 || lines[0] != "yip-router-dump\t1" {
		t.Fatalf("dump:\n%s", dump)
	}
	iface, peer := strings.Split(lines[1], "\t"), strings.Split(lines[2], "\t")
	if len(iface) != 20 || len(peer) != 15 || iface[0] != "interface" || peer[0] != "peer" {
		t.Fatalf("dump columns:\n%s", dump)
	}
	num := func(s string) uint64 {
		t.Helper()
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("dump field %q: %v\n%s", s, err, dump)
		}
		return v
	}
	// between checks that a dump counter lies within the JSON snapshots.
	between := func(what, field string, lo, hi uint64) {
		t.Helper()
		if v := num(field); v < lo || v > hi {
			t.Errorf("%s = %d, JSON says %d before and %d after", what, v, lo, hi)
		}
	}
	st := after
	for i, want := range []string{st.Interface, st.PublicKey, strconv.Itoa(int(st.ListenPort)), strconv.Itoa(len(st.Shards))} {
		if iface[i+1] != want {
			t.Errorf("interface column %d = %q, JSON says %q", i+2, iface[i+1], want)
		}
	}
	between("uptime", iface[5], uint64(before.Uptime.Seconds()), uint64(after.Uptime.Seconds()))
	var on []string
	for _, o := range []string{"tso", "uso", "gro", "udp-gso", "udp-gro"} {
		if st.Offloads[o] == "on" {
			on = append(on, o)
		}
	}
	if want := strings.Join(on, ","); iface[6] != want && !(want == "" && iface[6] == "(none)") {
		t.Errorf("offloads on = %q, JSON says %v", iface[6], st.Offloads)
	}
	between("handshakes initiated", iface[7], before.Handshakes.Initiated, after.Handshakes.Initiated)
	between("handshakes completed", iface[8], before.Handshakes.Completed, after.Handshakes.Completed)
	between("kernel socket drops", iface[16], before.Kernel.SocketDrops, after.Kernel.SocketDrops)
	between("kernel strangers' drops", iface[18], before.Kernel.StrangerDrops, after.Kernel.StrangerDrops)
	between("kernel known sockets' drops", iface[19], before.Kernel.KnownDrops, after.Kernel.KnownDrops)

	pb, pa := before.Peers[0], after.Peers[0]
	if pa.RxBytes == 0 || pa.TxBytes == 0 || len(pa.Lanes) != 2 {
		t.Fatalf("no traffic or lanes in JSON: %+v", pa)
	}
	for i, want := range []string{l.Ifname[lab.A], pa.PublicKey, pa.Endpoint, strings.Join(pa.AllowedIPs, ","),
		strconv.FormatInt(pa.LastHandshake.Unix(), 10)} {
		if peer[i+1] != want {
			t.Errorf("peer column %d = %q, JSON says %q", i+2, peer[i+1], want)
		}
	}
	between("rx bytes", peer[6], pb.RxBytes, pa.RxBytes)
	between("tx bytes", peer[7], pb.TxBytes, pa.TxBytes)
	between("rx packets", peer[8], pb.RxPackets, pa.RxPackets)
	between("tx packets", peer[9], pb.TxPackets, pa.TxPackets)
	if peer[10] != "2" {
		t.Errorf("lanes = %s, want 2", peer[10])
	}
	between("fec recovered", peer[11], pb.FECRecovered, pa.FECRecovered)
	between("fec lost", peer[12], pb.FECLost, pa.FECLost)
	between("handshakes", peer[13], pb.Handshakes, pa.Handshakes)
	if peer[14] != "off" {
		t.Errorf("persistent keepalive = %q, want off (the lab sets none)", peer[14])
	}

	// The views.
	tf := strings.Split(strings.TrimSpace(transfer), "\t")
	if len(tf) != 3 || tf[0] != pa.PublicKey {
		t.Fatalf("show transfer: %q", transfer)
	}
	between("transfer rx", tf[1], pb.RxBytes, pa.RxBytes)
	between("transfer tx", tf[2], pb.TxBytes, pa.TxBytes)
	for view, want := range map[string]string{
		"peers":             pa.PublicKey,
		"endpoints":         pa.PublicKey + "\t" + pa.Endpoint,
		"latest-handshakes": pa.PublicKey + "\t" + strconv.FormatInt(pa.LastHandshake.Unix(), 10),
		"allowed-ips":       pa.PublicKey + "\t" + strings.Join(pa.AllowedIPs, " "),
	} {
		if out := show(view); out != want+"\n" {
			t.Errorf("show %s = %q, want %q", view, out, want+"\n")
		}
	}
	// The view after the flags, and dump as a view, say the same.
	if out := show("dump"); !strings.HasPrefix(out, "yip-router-dump\t1\ninterface\t"+st.Interface+"\t") {
		t.Errorf("show dump:\n%s", out)
	}
	out, err := l.Exec(lab.A, bin, "show", "-i", l.Ifname[lab.A], "peers")
	if err != nil || out != pa.PublicKey+"\n" {
		t.Errorf("show -i IFACE peers = %q, %v", out, err)
	}
}
