package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/yip-router/yip-router/internal/lab"
	"github.com/yip-router/yip-router/internal/netns"
)

const guidePath = "../../docs/USER_GUIDE.md"

// guideBlock is one fenced sh block of the guide marked for the test.
type guideBlock struct {
	line int    // of the marker
	kind string // "gw-a", "gw-b" or "copy"
	args []string
	body string
}

// guideBlocks extracts the marked blocks (the convention is described at
// the top of docs/USER_GUIDE.md).
func guideBlocks(path string) ([]guideBlock, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		out  []guideBlock
		in   bool
		cur  *guideBlock
		body []string
		n    int
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case !in && strings.HasPrefix(trimmed, "```sh"):
			in, cur, body = true, nil, nil
		case in && trimmed == "```":
			in = false
			if cur != nil {
				cur.body = strings.Join(body, "\n") + "\n"
				out = append(out, *cur)
			}
		case in && cur == nil && len(body) == 0 && strings.HasPrefix(trimmed, "# guide:"):
			f := strings.Fields(strings.TrimPrefix(trimmed, "# guide:"))
			if len(f) == 0 {
				return nil, fmt.Errorf("%s:%d: empty guide marker", path, n)
			}
			cur = &guideBlock{line: n, kind: f[0], args: f[1:]}
			switch {
			case (cur.kind == "gw-a" || cur.kind == "gw-b") && len(cur.args) == 0:
			case cur.kind == "copy" && len(cur.args) == 2:
			default:
				return nil, fmt.Errorf("%s:%d: bad guide marker %q (want gw-a, gw-b or copy GW:FILE GW)", path, n, trimmed)
			}
		case in:
			body = append(body, line)
		}
	}
	if in {
		return nil, fmt.Errorf("%s: unterminated code block", path)
	}
	return out, sc.Err()
}

func TestGuideBlocksParse(t *testing.T) {
	blocks, err := guideBlocks(guidePath)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	ups := 0
	for _, b := range blocks {
		seen[b.kind]++
		if strings.Contains(b.body, "yip-router up ") {
			ups++
		}
	}
	if seen["gw-a"] == 0 || seen["gw-b"] == 0 || seen["copy"] == 0 || ups != 2 {
		t.Fatalf("the guide's test blocks: %v, %d with `yip-router up`; want blocks for both gateways, copies and one `up` each", seen, ups)
	}
}

// TestUserGuide follows docs/USER_GUIDE.md literally on two fresh
// namespaces: the marked blocks run in order, then a ping must cross the
// tunnel. If the guide rots, this fails.
func TestUserGuide(t *testing.T) {
	if err := netns.Available(); err != nil {
		t.Skip("user guide test skipped: ", err)
	}
	for _, tool := range []string{"nsenter", "unshare", "ping"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("user guide test skipped: needs %s (util-linux, iputils-ping)", tool)
		}
	}
	blocks, err := guideBlocks(guidePath)
	if err != nil {
		t.Fatal(err)
	}
	var idb [3]byte
	_, _ = rand.Read(idb[:])
	id := hex.EncodeToString(idb[:])
	gws := []string{"gw-a", "gw-b"}
	ns := map[string]string{"gw-a": "yipguideA-" + id, "gw-b": "yipguideB-" + id}
	dir := map[string]string{"gw-a": t.TempDir(), "gw-b": t.TempDir()}
	holder := map[string]*exec.Cmd{}
	var pgids []int
	var logs []string
	t.Cleanup(func() {
		for _, pg := range pgids {
			_ = syscall.Kill(-pg, syscall.SIGTERM)
		}
		time.Sleep(300 * time.Millisecond)
		for _, pg := range pgids {
			_ = syscall.Kill(-pg, syscall.SIGKILL)
		}
		for _, h := range holder {
			_ = h.Process.Kill()
			_ = h.Wait()
		}
		if t.Failed() {
			t.Logf("--- guide blocks run ---\n%s", strings.Join(logs, "\n"))
			for _, g := range gws {
				files, _ := filepath.Glob(filepath.Join(dir[g], "*.log"))
				for _, f := range files {
					b, _ := os.ReadFile(f)
					t.Logf("--- %s: %s ---\n%s", g, filepath.Base(f), tail(string(b), 40))
				}
			}
		}
		for _, g := range gws {
			_ = netns.Del(ns[g])
		}
	})
	for _, g := range gws {
		if err := netns.Add(ns[g]); err != nil {
			t.Fatal(err)
		}
	}
	// The underlay the guide assumes: A at 192.0.2.1, B at 192.0.2.2.
	if err := netns.Veth(ns["gw-a"], "ga"+id, "192.0.2.1/24", ns["gw-b"], "gb"+id, "192.0.2.2/24"); err != nil {
		t.Fatal(err)
	}
	// Each gateway gets its own mount namespace with a private
	// /run/yip-router, as separate machines have: both routers are yip0
	// and would otherwise share one control socket path. A holder process
	// keeps the namespaces; every block enters them with nsenter.
	for _, g := range gws {
		h := exec.Command("ip", "netns", "exec", ns[g], "unshare", "--mount", "--propagation", "private", "sh", "-ec",
			"mkdir -p /run/yip-router && mount -t tmpfs yip-guide /run/yip-router && echo ready && exec sleep 600")
		out, err := h.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		h.Stderr = os.Stderr
		if err := h.Start(); err != nil {
			t.Fatal(err)
		}
		holder[g] = h
		line, _ := bufio.NewReader(out).ReadString('\n')
		if line != "ready\n" {
			t.Fatalf("%s: could not set up its mount namespace (%q)", g, line)
		}
	}
	path := filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH")
	for _, b := range blocks {
		where := fmt.Sprintf("%s:%d", filepath.Base(guidePath), b.line)
		if b.kind == "copy" {
			from, file, ok := strings.Cut(b.args[0], ":")
			to := b.args[1]
			if !ok || dir[from] == "" || dir[to] == "" || from == to {
				t.Fatalf("%s: bad copy marker %v", where, b.args)
			}
			data, err := os.ReadFile(filepath.Join(dir[from], file))
			if err == nil {
				err = os.WriteFile(filepath.Join(dir[to], file), data, 0o600)
			}
			if err != nil {
				t.Fatalf("%s: copying %s from %s to %s: %v", where, file, from, to, err)
			}
			logs = append(logs, fmt.Sprintf("== %s: copied %s from %s to %s", where, file, from, to))
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, "nsenter", "-t", strconv.Itoa(holder[b.kind].Process.Pid), "-m", "-n",
			"sh", "-ec", "cd '"+dir[b.kind]+"'\n"+b.body)
		cmd.Env = append(os.Environ(), "PATH="+path)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.WaitDelay = 5 * time.Second // a background command that kept stdout open
		var outb strings.Builder
		cmd.Stdout, cmd.Stderr = &outb, &outb
		cmd.Stdin = nil
		err := cmd.Start()
		if err == nil {
			pgids = append(pgids, cmd.Process.Pid)
			err = cmd.Wait()
		}
		cancel()
		logs = append(logs, fmt.Sprintf("== %s on %s:\n%s-- output:\n%s", where, b.kind, b.body, outb.String()))
		if err != nil {
			t.Fatalf("%s: the block for %s failed: %v\n%s\noutput:\n%s", where, b.kind, err, b.body, outb.String())
		}
		if testing.Verbose() {
			t.Logf("%s on %s:\n%s-- output:\n%s", where, b.kind, b.body, outb.String())
		}
	}
	// The guide's result: a tunnel, both ways.
	l := &lab.Lab{NS: [2]string{ns["gw-a"], ns["gw-b"]}}
	for _, c := range []struct {
		from lab.Side
		to   string
	}{{lab.A, "10.77.0.2"}, {lab.B, "10.77.0.1"}} {
		if err := l.WaitTunnel(c.from, netip.MustParseAddr(c.to), 10*time.Second); err != nil {
			t.Fatalf("after following the guide: %v", err)
		}
	}
}
