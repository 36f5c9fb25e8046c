// Package router is the control plane: configuration, peers, routes
// (prefix → peer), handshakes, lanes and the shards that own them, timers
// (rekey, keepalive), status and metrics. It drives shards and never sits on
// the per-packet path. Built in a later issue (see docs/ARCHITECTURE.md).
package router
