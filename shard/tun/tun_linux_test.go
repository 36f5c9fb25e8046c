package tun

import (
	"os"
	"strings"
	"testing"

	"github.com/yip-router/yip-router/internal/netns"
)

func TestOpenErrors(t *testing.T) {
	if _, err := Open("yip0", 0, Offloads{}); err == nil {
		t.Fatal("0 queues accepted")
	}
	if _, err := Open(strings.Repeat("x", 16), 1, Offloads{}); err == nil || !strings.Contains(err.Error(), "longer") {
		t.Fatalf("long name: %v", err)
	}
}

// Multiqueue open inside a scratch namespace: the pattern resolves to one
// name shared by every queue, and closing removes the device.
func TestOpenMultiqueue(t *testing.T) {
	if err := netns.Available(); err != nil {
		t.Skip("TUN test skipped: ", err)
	}
	ns := "yiptun" + strings.ReplaceAll(t.Name(), "/", "")[len("TestOpen"):]
	if err := netns.Add(ns); err != nil {
		t.Fatal(err)
	}
	defer netns.Del(ns)
	err := netns.Do(ns, func() error {
		d, err := Open("yiptest%d", 3, Offloads{})
		if err != nil {
			return err
		}
		if !strings.HasPrefix(d.Name, "yiptest") || len(d.Queues) != 3 {
			t.Errorf("device %q with %d queues", d.Name, len(d.Queues))
		}
		if _, err := os.Stat("/sys/class/net/" + d.Name); err != nil {
			// sysfs shows the namespace of whoever mounted it; check
			// with ip instead.
			if e := netns.IP("-n", ns, "link", "show", d.Name); e != nil {
				t.Errorf("device not visible: %v", e)
			}
		}
		if n, err := d.Queues[0].Read(make([]byte, 100)); n != 0 || err != nil {
			t.Errorf("read from an idle down queue: %d %v", n, err)
		}
		if err := d.Close(); err != nil {
			return err
		}
		if e := netns.IP("-n", ns, "link", "show", d.Name); e == nil {
			t.Errorf("device %s still exists after Close", d.Name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Offloads asked for are granted here (kernel 6.2+ has USO) and every
// queue then carries the virtio-net header.
func TestOpenOffloads(t *testing.T) {
	if err := netns.Available(); err != nil {
		t.Skip("TUN test skipped: ", err)
	}
	ns := "yiptunoff"
	if err := netns.Add(ns); err != nil {
		t.Fatal(err)
	}
	defer netns.Del(ns)
	err := netns.Do(ns, func() error {
		d, err := Open("yipoff%d", 2, Offloads{VnetHdr: true, TSO: true, USO: true})
		if err != nil {
			return err
		}
		defer d.Close()
		if !d.Offloads.VnetHdr || !d.Offloads.TSO {
			t.Errorf("offloads granted: %+v", d.Offloads)
		}
		for i, q := range d.Queues {
			if !q.VnetHdr() {
				t.Errorf("queue %d without the virtio-net header", i)
			}
		}
		// A second Open of a live device's name is refused, whatever
		// the queue count: it must not attach to another router's device.
		if _, err := Open(d.Name, 2, Offloads{}); err == nil || !strings.Contains(err.Error(), "already exists") {
			t.Errorf("second open of %s: %v", d.Name, err)
		}
		p, err := Open("yipplain%d", 1, Offloads{TSO: true})
		if err != nil {
			return err
		}
		defer p.Close()
		if p.Offloads != (Offloads{}) || p.Queues[0].VnetHdr() {
			t.Errorf("TSO without the header was granted: %+v", p.Offloads)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
