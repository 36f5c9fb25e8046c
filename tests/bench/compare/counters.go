package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// clockTick is USER_HZ, the unit of /proc/PID/stat times (100 on Linux
// for every architecture's user-space ABI).
const clockTick = 100

// cpuSeconds is utime+stime of process pid and all its threads.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStat(string(b))
}

// parseStat reads utime+stime (fields 14 and 15) from a /proc/PID/stat
// line; the command name (field 2) may contain spaces and parentheses.
func parseStat(s string) (float64, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("/proc stat: no ')'")
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3
	if len(f) < 13 {
		return 0, errors.New("/proc stat: short line")
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("/proc stat: bad utime/stime")
	}
	return float64(ut+st) / clockTick, nil
}

// snmp reads /proc/net/snmp inside namespace ns.
func snmp(ns string) (map[string]uint64, error) {
	out, err := exec.Command("ip", "netns", "exec", ns, "cat", "/proc/net/snmp").Output()
	if err != nil {
		return nil, fmt.Errorf("/proc/net/snmp in %s: %w", ns, err)
	}
	return parseSnmp(string(out)), nil
}

// parseSnmp turns /proc/net/snmp's header/value line pairs into
// "Proto.Name" → value (negative values, e.g. Tcp.MaxConn, are skipped).
func parseSnmp(s string) map[string]uint64 {
	m := map[string]uint64{}
	lines := strings.Split(s, "\n")
	for i := 0; i+1 < len(lines); i++ {
		h, v := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(h) < 2 || len(h) != len(v) || h[0] != v[0] {
			continue
		}
		if _, err := strconv.ParseInt(v[1], 10, 64); err != nil {
			continue // a header line followed by another header line
		}
		proto := strings.TrimSuffix(h[0], ":")
		for j := 1; j < len(h); j++ {
			if n, err := strconv.ParseUint(v[j], 10, 64); err == nil {
				m[proto+"."+h[j]] = n
			}
		}
		i++
	}
	return m
}

// linkStats is what the comparison reads from `ip -j -s link show`.
type linkStats struct {
	TxQLen  int `json:"txqlen"`
	Stats64 struct {
		TX struct {
			Dropped uint64 `json:"dropped"`
		} `json:"tx"`
	} `json:"stats64"`
}

// tunStats reads device dev's statistics in namespace ns.
func tunStats(ns, dev string) (linkStats, error) {
	out, err := exec.Command("ip", "-j", "-s", "-n", ns, "link", "show", "dev", dev).Output()
	if err != nil {
		return linkStats{}, fmt.Errorf("ip -s link show %s in %s: %w", dev, ns, err)
	}
	return parseLinkStats(out)
}

func parseLinkStats(b []byte) (linkStats, error) {
	var ls []linkStats
	if err := json.Unmarshal(b, &ls); err != nil || len(ls) != 1 {
		return linkStats{}, fmt.Errorf("ip -j link: unexpected output %.200q", b)
	}
	return ls[0], nil
}

// pingResult is what ping printed.
type pingResult struct {
	RTTms          []float64
	Sent, Received int
}

// parsePing reads iputils ping's per-reply "time=X ms" and its summary.
func parsePing(s string) pingResult {
	var r pingResult
	for _, ln := range strings.Split(s, "\n") {
		if i := strings.Index(ln, " time="); i >= 0 {
			f := strings.Fields(ln[i+len(" time="):])
			if len(f) > 0 {
				if v, err := strconv.ParseFloat(f[0], 64); err == nil {
					r.RTTms = append(r.RTTms, v)
				}
			}
		}
		if strings.Contains(ln, "packets transmitted") {
			_, _ = fmt.Sscanf(ln, "%d packets transmitted, %d received", &r.Sent, &r.Received)
		}
	}
	return r
}
