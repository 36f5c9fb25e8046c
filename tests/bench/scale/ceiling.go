package main

// The crypto ceiling: what a responder's handshake crypto alone costs on
// this machine in this run, against which the hub's handshakes per CPU
// second are judged.

import (
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/yip-router/yip-router/crypto"
)

// Ceiling is the responder's crypto for a handshake (ConsumeInitiation
// and Respond: mac1, the DHs es, ee and se with ss cached, a fresh
// ephemeral, the AEADs and hashes) on one thread, nothing else: no
// socket, cookie, lane install or scheduling. PerCPUSec is the most
// handshakes a core can answer.
type Ceiling struct {
	Handshakes int     `json:"handshakes"`
	CPUSec     float64 `json:"cpu_s"`
	PerCPUSec  float64 `json:"per_cpu_s"`
	Method     string  `json:"method"`
}

// cryptoCeiling answers the prebuilt first initiations of peers (at most
// n) with a fresh responder holding the hub's key and theirs, as the hub
// would, timing the thread's CPU. The hub never sees these answers: its
// own crypto.Local keeps its own replay state.
func cryptoCeiling(hubPriv crypto.PrivateKey, peers []*simPeer, n int) (Ceiling, error) {
	n = min(n, len(peers))
	hub := crypto.NewLocal(hubPriv, true)
	for _, p := range peers[:n] {
		if _, err := hub.AddPeer(p.yip.pub, crypto.PresharedKey{}); err != nil {
			return Ceiling{}, err
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0 := threadCPU()
	for i, p := range peers[:n] {
		inc, err := hub.ConsumeInitiation(p.firstDg)
		if err != nil {
			return Ceiling{}, fmt.Errorf("peer %d's initiation: %w", i, err)
		}
		if _, _, err := inc.Respond(uint32(i), crypto.LaneOffer{Ports: []uint16{hubPort}}); err != nil {
			return Ceiling{}, err
		}
	}
	c := Ceiling{Handshakes: n, CPUSec: (threadCPU() - c0).Seconds(),
		Method: "crypto.Local.ConsumeInitiation + Incoming.Respond of the burst's prebuilt initiations, one thread, thread CPU time (RUSAGE_THREAD)"}
	c.PerCPUSec = div(float64(n), c.CPUSec)
	return c, nil
}

// threadCPU is the calling thread's CPU time (user and system).
func threadCPU() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
