package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/yip-router/yip-router/internal/flood"
	"github.com/yip-router/yip-router/internal/impair"
	"github.com/yip-router/yip-router/internal/lab"
	"github.com/yip-router/yip-router/internal/netns"
)

// wgTopo is wireguard-go in the same setup as internal/lab builds for
// yip-router: two fresh namespaces, a veth pair with the lab's underlay
// addresses (or, with an impairment, the lab's bridge between them:
// lab.JoinImpaired, as lab.Options.Impair uses), the lab's inner
// addresses, and the tunnel MTU set to mtu.
type wgTopo struct {
	dir   string
	ns    [2]string
	ifn   [2]string
	link  [2]string     // the underlay veth ends (or the bridged links)
	pubB  [32]byte      // side B's static public key
	wan   *lab.Impaired // nil without an impairment
	procs [2]*exec.Cmd
	logs  [2]*os.File
}

// wgDefaultMTU is the MTU wireguard-go gives the TUN device it creates
// (device.DefaultMTU), which wg-quick keeps on a path like this one.
const wgDefaultMTU = 1420

var (
	wgUnderlay = [2]string{"172.31.250.1", "172.31.250.2"}
	wgInner    = [2]netip.Addr{netip.MustParseAddr("10.201.0.1"), netip.MustParseAddr("10.202.0.1")}
)

// newWG starts wireguard-go (bin) on both sides; cpus and wan as for
// newYip.
func newWG(bin string, mtu int, cpus [2]string, wan *impair.Config) (_ topology, err error) {
	var idb [3]byte
	_, _ = rand.Read(idb[:])
	id := hex.EncodeToString(idb[:])
	dir, err := os.MkdirTemp("", "yip-cmp-wg-")
	if err != nil {
		return nil, err
	}
	// Interface names are global here: wireguard-go's UAPI socket is
	// /var/run/wireguard/NAME.sock, outside the namespace.
	t := &wgTopo{dir: dir, ns: [2]string{"ycmpA-" + id, "ycmpB-" + id}, ifn: [2]string{"ywa" + id, "ywb" + id},
		link: [2]string{"cva" + id, "cvb" + id}}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	for _, ns := range t.ns {
		if err := netns.Add(ns); err != nil {
			return nil, err
		}
	}
	if wan != nil {
		if t.wan, err = lab.JoinImpaired("ycmpM-"+id, t.ns, t.link,
			[2]string{wgUnderlay[0] + "/24", wgUnderlay[1] + "/24"}, wan); err != nil {
			return nil, err
		}
	} else if err := netns.Veth(t.ns[0], t.link[0], wgUnderlay[0]+"/24", t.ns[1], t.link[1], wgUnderlay[1]+"/24"); err != nil {
		return nil, err
	}
	var priv, pub [2]string
	for s := range 2 {
		if priv[s], pub[s], err = wgKeys(); err != nil {
			return nil, err
		}
	}
	k, err := base64.StdEncoding.DecodeString(pub[lab.B])
	if err != nil || len(k) != len(t.pubB) {
		return nil, fmt.Errorf("wg pubkey printed %q", pub[lab.B])
	}
	t.pubB = [32]byte(k)
	for _, s := range []lab.Side{lab.B, lab.A} {
		if err := t.start(s, bin, cpus[s]); err != nil {
			return nil, err
		}
		o := 1 - s
		keyFile := filepath.Join(dir, fmt.Sprintf("key-%d", s))
		if err := os.WriteFile(keyFile, []byte(priv[s]+"\n"), 0o600); err != nil {
			return nil, err
		}
		args := []string{"set", t.ifn[s], "listen-port", fmt.Sprint(lab.Port), "private-key", keyFile,
			"peer", pub[o], "allowed-ips", netip.PrefixFrom(wgInner[o], 16).Masked().String()}
		if s == lab.A {
			args = append(args, "endpoint", fmt.Sprintf("%s:%d", wgUnderlay[o], lab.Port))
		}
		if out, err := exec.Command("ip", append([]string{"netns", "exec", t.ns[s], "wg"}, args...)...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("wg %s: %v: %s", strings.Join(args, " "), err, out)
		}
		steps := [][]string{
			{"-n", t.ns[s], "addr", "add", wgInner[s].String() + "/16", "dev", t.ifn[s]},
			{"-n", t.ns[s], "link", "set", t.ifn[s], "mtu", fmt.Sprint(mtu), "up"},
			{"-n", t.ns[s], "route", "add", netip.PrefixFrom(wgInner[o], 16).Masked().String(), "dev", t.ifn[s]},
		}
		for _, st := range steps {
			if err := netns.IP(st...); err != nil {
				return nil, err
			}
		}
	}
	if err := waitTunnel(t, 15*time.Second); err != nil {
		return nil, fmt.Errorf("%w; logs:\n%s", err, t.logText())
	}
	return t, nil
}

// start runs `wireguard-go -f IFNAME` in side's namespace (under taskset
// when cpus is set) and waits for its UAPI socket.
func (t *wgTopo) start(s lab.Side, bin, cpus string) error {
	logf, err := os.Create(filepath.Join(t.dir, fmt.Sprintf("wg-%d.log", s)))
	if err != nil {
		return err
	}
	argv := []string{"ip", "netns", "exec", t.ns[s], bin, "-f", t.ifn[s]}
	if cpus != "" {
		argv = append([]string{"taskset", "-c", cpus}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	// Foreground (no daemonising re-exec, so the pid is the daemon's) and
	// without the banner that the variable also silences.
	cmd.Env = append(os.Environ(), "WG_PROCESS_FOREGROUND=1", "LOG_LEVEL=error")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	t.procs[s], t.logs[s] = cmd, logf
	sock := "/var/run/wireguard/" + t.ifn[s] + ".sock"
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			return nil
		}
	}
	return fmt.Errorf("wireguard-go %s did not open %s; log:\n%s", t.ifn[s], sock, t.logText())
}

func (t *wgTopo) logText() string {
	var b bytes.Buffer
	for s := range 2 {
		out, _ := os.ReadFile(filepath.Join(t.dir, fmt.Sprintf("wg-%d.log", s)))
		fmt.Fprintf(&b, "--- side %c\n%s", 'A'+rune(s), out)
	}
	return b.String()
}

// wgKeys makes a key pair with wg genkey / wg pubkey.
func wgKeys() (priv, pub string, err error) {
	out, err := exec.Command("wg", "genkey").Output()
	if err != nil {
		return "", "", fmt.Errorf("wg genkey: %w", err)
	}
	priv = strings.TrimSpace(string(out))
	cmd := exec.Command("wg", "pubkey")
	cmd.Stdin = strings.NewReader(priv + "\n")
	out, err = cmd.Output()
	if err != nil {
		return "", "", fmt.Errorf("wg pubkey: %w", err)
	}
	return priv, strings.TrimSpace(string(out)), nil
}

func (t *wgTopo) NS(s lab.Side) string           { return t.ns[s] }
func (t *wgTopo) Tun(s lab.Side) string          { return t.ifn[s] }
func (t *wgTopo) Inner(s lab.Side) netip.Addr    { return wgInner[s] }
func (t *wgTopo) Underlay(s lab.Side) netip.Addr { return netip.MustParseAddr(wgUnderlay[s]) }
func (t *wgTopo) Veth(s lab.Side) string         { return t.link[s] }

// Initiations are WireGuard handshake initiations (message type 1) with a
// valid mac1 for B's key and random contents (flood.WGInitiations).
func (t *wgTopo) Initiations(n int) ([][]byte, error) {
	return flood.WGInitiations(t.pubB, n), nil
}
func (t *wgTopo) Bridge() ([2]impair.Stats, bool) {
	if t.wan == nil {
		return [2]impair.Stats{}, false
	}
	return t.wan.Stats(), true
}
func (t *wgTopo) FEC() (fecStats, bool) { return fecStats{}, false }

func (t *wgTopo) PathState() (pathSample, bool) { return pathSample{}, false }

func (t *wgTopo) Pid(s lab.Side) int {
	if t.procs[s] == nil {
		return 0
	}
	return t.procs[s].Process.Pid
}

// Close stops the daemons (SIGTERM, then SIGKILL after 5 s), the bridge,
// and removes the namespaces and files.
func (t *wgTopo) Close() {
	for s, cmd := range t.procs {
		if cmd == nil {
			continue
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		t.logs[s].Close()
		t.procs[s] = nil
	}
	if t.wan != nil {
		_ = t.wan.Close()
		t.wan = nil
	}
	for _, ns := range t.ns {
		_ = netns.Del(ns)
	}
	_ = os.RemoveAll(t.dir)
}
