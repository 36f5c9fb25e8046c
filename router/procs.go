package router

import (
	"os"
	"runtime"
)

// reserveProcs makes sure the Go scheduler has a P to spare beside the
// shards' (GOMAXPROCS at least shards+1), unless the operator set
// GOMAXPROCS.
//
// Each shard's goroutine holds a P and sleeps in poll(2) when it has no
// work (its other system calls are raw: udp.Conn.Recv). While every P is
// taken, the runtime's monitor thread (sysmon) takes back a P from any
// system call longer than 20 µs and wakes every 20 µs to look again; with
// a spare P it leaves them alone and backs off. On a router pinned
// to as many CPUs as shards (taskset, or one shard on one core) GOMAXPROCS
// defaults to the shard count, and the monitor then cost 12-14% of the
// receiving core in a pinned TCP benchmark (perf: runtime.usleep, and the
// P hand-offs it causes).
func reserveProcs(shards int) {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	if want := shards + 1; runtime.GOMAXPROCS(0) < want {
		runtime.GOMAXPROCS(want)
	}
}
