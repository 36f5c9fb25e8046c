package udp

// The buffers every lane socket asks for (SO_RCVBUF, SO_SNDBUF; the kernel
// doubles each for its bookkeeping). The receive buffer absorbs the time a
// shard does not read: a burst, or its CPU taken by other work. 16 MiB
// holds about 40 ms at 3 Gbit/s, which a 2-CPU gateway's scheduler can
// take from a shard, and which a replay of a peer's own datagrams (from
// its address, so into the lane's socket) otherwise turns into drops of
// the peer's traffic (docs/BENCHMARKS.md). The send buffer only waits for
// the device queue. Memory is taken only while data waits, within the
// kernel's udp_mem; tuning/99-yip-router.conf raises the maxima to these
// sizes for routers that cannot force them, and internal/hostcheck checks
// them.
const (
	RecvBuffer = 16 << 20
	SendBuffer = 4 << 20
)
