// Package router is the control plane: configuration, peers, routes
// (prefix → peer), handshakes, lanes and the shards that own them, timers
// (rekey, keepalive), offload state, status and metrics. It drives shards
// and never sits on the per-packet path (docs/ARCHITECTURE.md).
package router
