// Tests of yip-tune irq: its dry-run plan (IRQ affinity, RPS and XPS) for
// fake /proc/interrupts and queue trees, and its errors.

package tuning

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// interrupts builds a /proc/interrupts with ncpu CPU columns and the named IRQs.
func interrupts(ncpu int, irqs map[int]string) string {
	var b strings.Builder
	b.WriteString("     ")
	for c := 0; c < ncpu; c++ {
		b.WriteString("       CPU" + strconv.Itoa(c))
	}
	b.WriteString("\n  0:")
	for c := 0; c < ncpu; c++ {
		b.WriteString("         12")
	}
	b.WriteString("   IO-APIC   2-edge      timer\n")
	for n := 0; n < 1000; n++ {
		name, ok := irqs[n]
		if !ok {
			continue
		}
		b.WriteString(" " + strconv.Itoa(n) + ":")
		for c := 0; c < ncpu; c++ {
			b.WriteString("       1000")
		}
		b.WriteString("   PCI-MSI 52428" + strconv.Itoa(n%10) + "-edge      " + name + "\n")
	}
	b.WriteString("NMI:")
	for c := 0; c < ncpu; c++ {
		b.WriteString("          0")
	}
	b.WriteString("   Non-maskable interrupts\n")
	return b.String()
}

func irqTree(ncpu int, irqs map[int]string, dev string, nrx, ntx int) map[string]string {
	m := map[string]string{filepath.Join("proc", "interrupts"): interrupts(ncpu, irqs)}
	all := "0-" + strconv.Itoa(ncpu-1)
	for n := range irqs {
		m[filepath.Join("proc", "irq", strconv.Itoa(n), "smp_affinity_list")] = all + "\n"
	}
	q := filepath.Join("sys", "class", "net", dev, "queues")
	for i := 0; i < nrx; i++ {
		m[filepath.Join(q, "rx-"+strconv.Itoa(i), "rps_cpus")] = "0\n"
	}
	for i := 0; i < ntx; i++ {
		m[filepath.Join(q, "tx-"+strconv.Itoa(i), "xps_cpus")] = "0\n"
	}
	return m
}

func TestIRQDryRun(t *testing.T) {
	tests := []struct {
		name string
		ncpu int
		irqs map[int]string
		nrx  int
		ntx  int
		args []string
		want []string
	}{
		{
			name: "shards on 4-7",
			ncpu: 8,
			irqs: map[int]string{
				45: "eth0", 46: "eth0-TxRx-0", 47: "eth0-TxRx-1", 48: "eth0-TxRx-2", 49: "eth0-TxRx-3",
				50: "eth10-TxRx-0", // another device whose name starts the same way
			},
			nrx: 4, ntx: 4,
			args: []string{"--shards-cpus", "4-7"},
			want: []string{
				"Plan for eth0: 5 IRQs, 4 rx queues, 4 tx queues, online CPUs 0-7",
				"Shard CPUs: 4-7 (start the router with: taskset -c 4-7 yip-router up ..., or CPUAffinity=4-7)",
				"IRQ CPUs: 0-3",
				"irq 45 eth0 -> cpu 0",
				"irq 46 eth0-TxRx-0 -> cpu 1",
				"irq 47 eth0-TxRx-1 -> cpu 2",
				"irq 48 eth0-TxRx-2 -> cpu 3",
				"irq 49 eth0-TxRx-3 -> cpu 0",
				"RPS off: 4 rx queues >= 4 IRQ CPUs, so each queue's IRQ CPU does its own processing",
				"rx-0 rps_cpus 0",
				"rx-1 rps_cpus 0",
				"rx-2 rps_cpus 0",
				"rx-3 rps_cpus 0",
				"XPS: every CPU sends on one tx queue (CPU index modulo 4)",
				"tx-0 xps_cpus 11",
				"tx-1 xps_cpus 22",
				"tx-2 xps_cpus 44",
				"tx-3 xps_cpus 88",
				"Note: irqbalance moves IRQs back; stop it (systemctl disable --now irqbalance) or ban these IRQs.",
				"Dry run: nothing changed.",
			},
		},
		{
			name: "explicit IRQ CPUs, RPS on",
			ncpu: 8,
			irqs: map[int]string{30: "eth0-rx-0", 31: "eth0-tx-0"},
			nrx:  1, ntx: 1,
			args: []string{"--shards-cpus", "2-7", "--irq-cpus", "0,1"},
			want: []string{
				"Plan for eth0: 2 IRQs, 1 rx queues, 1 tx queues, online CPUs 0-7",
				"Shard CPUs: 2-7 (start the router with: taskset -c 2-7 yip-router up ..., or CPUAffinity=2-7)",
				"IRQ CPUs: 0-1",
				"irq 30 eth0-rx-0 -> cpu 0",
				"irq 31 eth0-tx-0 -> cpu 1",
				"RPS on: 1 rx queues < 2 IRQ CPUs, so receive processing is spread over the IRQ CPUs",
				"rx-0 rps_cpus 3",
				"XPS: every CPU sends on one tx queue (CPU index modulo 1)",
				"tx-0 xps_cpus ff",
				"Note: irqbalance moves IRQs back; stop it (systemctl disable --now irqbalance) or ban these IRQs.",
				"Dry run: nothing changed.",
			},
		},
		{
			name: "no shard CPUs, 40 CPUs",
			ncpu: 40,
			irqs: map[int]string{60: "eth0-TxRx-0", 61: "eth0-TxRx-1"},
			nrx:  2, ntx: 2,
			want: []string{
				"Plan for eth0: 2 IRQs, 2 rx queues, 2 tx queues, online CPUs 0-39",
				"Shard CPUs: not given (--shards-cpus); IRQs go to all CPUs",
				"IRQ CPUs: 0-39",
				"irq 60 eth0-TxRx-0 -> cpu 0",
				"irq 61 eth0-TxRx-1 -> cpu 1",
				"RPS on: 2 rx queues < 40 IRQ CPUs, so receive processing is spread over the IRQ CPUs",
				"rx-0 rps_cpus ff,ffffffff",
				"rx-1 rps_cpus ff,ffffffff",
				"XPS: every CPU sends on one tx queue (CPU index modulo 2)",
				"tx-0 xps_cpus 55,55555555",
				"tx-1 xps_cpus aa,aaaaaaaa",
				"Note: irqbalance moves IRQs back; stop it (systemctl disable --now irqbalance) or ban these IRQs.",
				"Dry run: nothing changed.",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, irqTree(tc.ncpu, tc.irqs, "eth0", tc.nrx, tc.ntx))
			before := snapshot(t, dir)
			args := append([]string{"irq", "eth0"}, tc.args...)
			args = append(args, "--dry-run")
			out, errOut, code := run(t, dir, nil, args...)
			if code != 0 {
				t.Fatalf("exit code %d; stderr: %s", code, errOut)
			}
			got := lines(out)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("output:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			sameTree(t, before, snapshot(t, dir))
		})
	}
}

func TestIRQErrors(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, irqTree(4, map[int]string{40: "eth0-TxRx-0"}, "eth0", 1, 1))
	writeTree(t, dir, map[string]string{filepath.Join("sys", "class", "net", "virt0", "queues", "rx-0", "rps_cpus"): "0\n"})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"irq", "--dry-run"}, "irq: which device?"},
		{[]string{"irq", "nosuch0", "--dry-run"}, "no network device 'nosuch0'"},
		{[]string{"irq", "virt0", "--dry-run"}, "no IRQs named after virt0"},
		{[]string{"irq", "eth0", "--shards-cpus", "2-9", "--dry-run"}, "--shards-cpus: CPU 4 is not online (online: 0-3)"},
		{[]string{"irq", "eth0", "--irq-cpus", "3-1", "--dry-run"}, "bad CPU range '3-1'"},
		{[]string{"irq", "eth0", "--bogus", "--dry-run"}, "unknown option '--bogus'"},
		{[]string{"frobnicate"}, "unknown command 'frobnicate'"},
	} {
		_, errOut, code := run(t, dir, nil, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}
