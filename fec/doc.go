// Package fec adds cross-packet forward error correction to a lane.
//
// Coding every packet as its own object, with each symbol padded to a fixed
// size, would make a 60-byte ACK cost two full-size datagrams. Here
// sealed packets are the data symbols of a systematic Reed–Solomon code that
// spans several packets: a data symbol goes out the moment it exists (a clean
// path adds no latency and small packets stay small), and only after every
// group of K data symbols, or when a flush timeout closes a partial group, does
// the sender add R parity symbols. A clean path therefore pays exactly the
// configured R/K in symbols, and a lossy one recovers any K of K+R. Groups are
// formed per size class of symbol (see encoder.go), so parity, which is as
// long as its group's longest symbol, costs about R/K in bytes too.
//
// The package never sees keys or sockets. The framing layer authenticates each
// symbol's header, length and ends before it reaches the Decoder (nothing
// forged off the path enters reassembly), carries the Meta fields in its
// masked header, and carries LossReport in an encrypted control frame. A
// symbol's payload is authenticated by the AEAD only when it is opened, so
// one changed on the path reaches the Decoder: the Deliver callback reports
// whether a symbol opened, a refused data symbol is forgotten as an erasure,
// and a reconstruction that yields refused symbols makes the group forget
// its parity and wait for more (at most R times), so a changed symbol costs
// what a lost one does. Because a peer that passed the tag can still be
// broken, the Decoder treats every Meta and every byte as hostile: its memory
// is capped up front and nothing a peer sends can make it allocate beyond
// that cap.
//
// Everything in the per-symbol path (Encoder.Add, Decoder.Push on data and
// parity) runs without heap allocation once warm; see the AllocsPerRun tests.
package fec
