// Package control is the control plane's core: peers, handshakes,
// sessions, cookies, timers and reload of the peer set. It holds no socket,
// device or goroutine of its own: it reaches the shards and sockets through
// the narrow DataPlane interface, reads time from a clock and draws from a
// Random source, so every decision it makes (the tie-break of crossing
// initiations, retries and their backoff, rekeys, expiry, cookies under
// load, roaming, reload) runs in memory in unit tests with a fake clock.
// Package router wires it to the real TUN device, sockets and shards.
package control
