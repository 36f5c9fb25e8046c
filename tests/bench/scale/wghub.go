package main

// wireguard-go as the hub of the burst (-wg): the ratio the project's
// speed claims need, measured in the same run with the same generator.

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/flynn/noise"

	"github.com/yip-router/yip-router/internal/netns"
	"github.com/yip-router/yip-router/router"
)

// wgHub is a running wireguard-go: `wireguard-go -f IFNAME` in the hub
// namespace (under taskset when the hub is pinned), configured over its
// UAPI socket, its TUN up with the hub's inner address.
type wgHub struct {
	daemon
	peers int
}

// startWGHub starts bin as t's hub with private key priv and one peer per
// public key in pubs (peer i: AllowedIPs innerAddr(i)/32), listening on
// hubPort as yip-router does.
func startWGHub(t *topo, bin, cpus string, priv []byte, pubs [][]byte) (*wgHub, error) {
	h := &wgHub{peers: len(pubs)}
	argv := []string{"ip", "netns", "exec", t.hubNS, bin, "-f", t.ifname}
	if cpus != "" {
		argv = append([]string{"taskset", "-c", cpus}, argv...)
	}
	// Foreground: no daemonising re-exec, so the pid is the daemon's
	// (taskset and ip netns exec exec it in place).
	if err := h.start(argv, filepath.Join(t.dir, "wireguard-go.log"), "WG_PROCESS_FOREGROUND=1", "LOG_LEVEL=error"); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			h.stop()
		}
	}()
	// Interface names are global here: the UAPI socket is
	// /var/run/wireguard/NAME.sock, outside the namespace.
	sock := "/var/run/wireguard/" + t.ifname + ".sock"
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		select {
		case <-h.exited:
			return nil, fmt.Errorf("wireguard-go exited during start; log:\n%s", h.log())
		default:
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("wireguard-go did not open %s; log:\n%s", sock, h.log())
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "set=1\nprivate_key=%s\nlisten_port=%d\nreplace_peers=true\n", hex.EncodeToString(priv), hubPort)
	for i, pub := range pubs {
		fmt.Fprintf(&b, "public_key=%s\nallowed_ip=%s\n", hex.EncodeToString(pub), netip.PrefixFrom(innerAddr(i), 32))
	}
	b.WriteString("\n")
	if err := uapi(sock, b.String()); err != nil {
		return nil, fmt.Errorf("%w; log:\n%s", err, h.log())
	}
	// As deployed: the hub's address on the TUN, up, and a route to the
	// peers' inner addresses (wg-quick adds one per AllowedIPs; one
	// route covers them all here).
	for _, args := range [][]string{
		{"-n", t.hubNS, "addr", "add", hubInner.String(), "dev", t.ifname},
		{"-n", t.hubNS, "link", "set", t.ifname, "up"},
		{"-n", t.hubNS, "route", "add", netip.PrefixFrom(innerBase, 16).String(), "dev", t.ifname},
	} {
		if err := netns.IP(args...); err != nil {
			return nil, err
		}
	}
	ok = true
	return h, nil
}

// uapi sends one UAPI operation (its lines and the blank line ending it)
// to the socket and checks the answer's errno=0.
func uapi(sock, op string) error {
	c, err := net.DialTimeout("unix", sock, 10*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	if _, err := c.Write([]byte(op)); err != nil {
		return fmt.Errorf("uapi: %w", err)
	}
	r := bufio.NewReader(c)
	var got []string
	for {
		ln, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("uapi: %w after %q", err, got)
		}
		ln = strings.TrimSuffix(ln, "\n")
		if ln == "" {
			break
		}
		got = append(got, ln)
	}
	if len(got) != 1 || got[0] != "errno=0" {
		return fmt.Errorf("uapi: wireguard-go answered %q", got)
	}
	return nil
}

func (h *wgHub) command() string {
	return fmt.Sprintf("%s; configured over UAPI (set=1: private_key, listen_port=%d, %d peers with public_key and allowed_ip /32)",
		h.argvString(), hubPort, h.peers)
}

// handshakeCounts: wireguard-go counts no handshakes it answered.
func (h *wgHub) handshakeCounts() (router.HandshakeCounts, bool) {
	return router.HandshakeCounts{}, false
}

// wgBurst runs the burst against wireguard-go: a fresh topology (the same
// namespaces, addresses and routes as yip-router's), wireguard-go as the
// hub on the hub's CPUs with c.Peers WireGuard peers, and handshakes over
// simulated WireGuard peers (each its own key, address and socket) from
// this generator, pinned as for yip-router.
func wgBurst(c *config) (*HSResult, error) {
	hubKey, err := noise.DH25519.GenerateKeypair(rand.Reader)
	if err != nil {
		return nil, err
	}
	logf("wireguard-go: generating %d peer keys", c.Peers)
	peers, err := newWGPeers(c.Peers, newWGHubKeys([32]byte(hubKey.Public)), c.Shards, c.Spread)
	if err != nil {
		return nil, err
	}
	pubs := make([][]byte, len(peers))
	for i, p := range peers {
		pubs[i] = p.proto.(*wgPeer).static.Public
	}
	t, err := newTopo()
	if err != nil {
		return nil, err
	}
	defer t.Close()
	h, err := startWGHub(t, c.WG, c.HubCPUs, hubKey.Private, pubs)
	if err != nil {
		return nil, err
	}
	defer h.stop()
	time.Sleep(2 * time.Second) // let start-up garbage settle, as for yip-router's hub
	if err := netns.Do(t.genNS, func() error { return openSockets(peers) }); err != nil {
		return nil, fmt.Errorf("generator sockets: %w", err)
	}
	defer closeSockets(peers)
	logf("wireguard-go: prebuilding %d initiations", len(peers))
	t0 := time.Now()
	for _, p := range peers {
		if err := p.prebuild(); err != nil {
			return nil, err
		}
	}
	logf("prebuilt in %s", time.Since(t0).Round(time.Millisecond))
	r := handshakes(c, t, h, peers, "wireguard-go: burst (all at once)", 0)
	logf("%s", r.summary())
	r.SettleS, r.SettleCPUSec = settle(t, h)
	logf("wireguard-go busy for %.1f s more (%.2f CPU-s) after the burst ended", r.SettleS, r.SettleCPUSec)
	select {
	case <-h.exited:
		return &r, fmt.Errorf("wireguard-go exited during the burst; log:\n%s", h.log())
	default:
	}
	return &r, nil
}
