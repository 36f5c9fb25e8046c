// Package router runs one yip-router: it opens the TUN device and the
// sockets, picks the CPUs, starts one shard per CPU, and wires the control
// plane's core (package control) to them through a DataPlane (plane.go).
// It also owns what spans the whole router: reload of the configuration,
// offload state, status, the control socket and metrics. It never sits on
// the per-packet path (docs/ARCHITECTURE.md).
package router
