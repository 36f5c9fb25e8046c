package udp

// Steering by lane remote: an eBPF SK_REUSEPORT program on the listen group
// looks up each datagram's source address and port in a hash map that the
// shards fill as they install, move and drop lanes, and hands the datagram
// to the socket of the shard that owns the lane. A peer's lane sockets can
// then sit on any ephemeral port (the kernel's choice): nothing about a
// port says which lane it carries. A source the map does not hold (an
// initiation, a port a NAT rewrote, a roaming peer's first datagram, junk)
// goes to a strangers' socket: one per shard in the same group, picked by
// the kernel's flow hash, with a small receive buffer. So a flood from
// sources no lane has fills only the strangers' queues, never a lane
// socket's; the shards read their strangers' socket within a budget,
// after lane traffic (shard/loop_linux.go), and place lanes found there
// by hand-off, adoption and roaming. A source whose address (any port) is
// in the known map (SetKnown: peers' configured endpoints and the
// addresses their handshakes proved) goes to a known socket instead, a
// third set of n with queues and budgets of their own: a peer restarting
// behind a known address is not drowned in a flood from spoofed ones.
//
// The program is assembled here instead of compiled from C so the build
// needs no clang and no generated objects, for a few dozen instructions.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// steerKey is the map's key: the source address as 16 bytes (IPv4 as
// ::ffff:a.b.c.d) and the source port in network byte order, then two
// zero bytes so the program can clear the key with aligned stores.
type steerKey [20]byte

func keyOf(ap netip.AddrPort) steerKey {
	var k steerKey
	a := ap.Addr().Unmap().As16() // IPv4 as ::ffff:a.b.c.d
	copy(k[:16], a[:])
	k[16], k[17] = byte(ap.Port()>>8), byte(ap.Port())
	return k
}

// ErrSteering marks a failure to put the eBPF program or a socket into
// the group (ListenSteered): the caller can fall back to ListenGroup.
var ErrSteering = errors.New("eBPF steering refused")

// Steering is a listen group's lane map and the program that reads it.
type Steering struct {
	prog  *ebpf.Program
	socks *ebpf.Map // REUSEPORT_SOCKARRAY: socket index → socket (lanes 0..n-1, strangers n..2n-1, known 2n..3n-1)
	lanes *ebpf.Map // HASH: steerKey → lane socket index
	known *ebpf.Map // HASH: address (16 bytes, IPv4 mapped) → 1
	n     int       // lane sockets (and strangers' sockets, and known sockets)

	// mu makes each read-modify-write of the lane map (Steer, Unsteer)
	// one step: shards call them from their own goroutines.
	mu      sync.Mutex
	members map[*Conn]uint32 // the group's sockets and their indexes
}

// SteerResult is what Steer did.
type SteerResult int

const (
	Steered   SteerResult = iota // the map sends the remote to the socket
	NotMember                    // the socket is not in the group: nothing to steer
	Taken                        // another socket holds the remote and the claim was unproven
	Full                         // the map has no room
)

// Sockets per shard in a steered group: the lane socket, the strangers'
// socket and the known socket.
const steeredSets = 3

// NewSteering loads the program and its maps for a group of n lane
// sockets, n strangers' sockets and n known sockets, at most maxLanes
// steered remotes and as many known addresses. It fails on a kernel
// without eBPF for reuseport groups (before 4.19) or without the
// privilege to load one (CAP_BPF); the caller then steers by port
// (ListenGroup).
func NewSteering(n, maxLanes int) (*Steering, error) {
	if n < 1 || n > 1<<LaneBits || maxLanes < 1 {
		return nil, fmt.Errorf("udp: steering for %d sockets and %d lanes out of range", n, maxLanes)
	}
	// Before 5.11 the kernel charges maps to RLIMIT_MEMLOCK (often 64
	// KiB); later kernels charge the cgroup and this does nothing.
	// Raising the limit needs CAP_SYS_RESOURCE (or LimitMEMLOCK= in the
	// systemd unit): if it fails, the map creation below says so.
	memlock := rlimit.RemoveMemlock()
	socks, err := ebpf.NewMap(&ebpf.MapSpec{
		Name: "yip_socks", Type: ebpf.ReusePortSockArray,
		KeySize: 4, ValueSize: 8, MaxEntries: uint32(steeredSets * n),
	})
	if err != nil {
		if memlock != nil {
			err = errors.Join(err, memlock)
		}
		return nil, fmt.Errorf("udp: socket map: %w", err)
	}
	lanes, err := hashMap("yip_lanes", len(steerKey{}), 4, maxLanes)
	if err != nil {
		socks.Close()
		return nil, fmt.Errorf("udp: lane map: %w", err)
	}
	known, err := hashMap("yip_known", len(knownKey{}), 1, maxLanes)
	if err != nil {
		socks.Close()
		lanes.Close()
		return nil, fmt.Errorf("udp: known-address map: %w", err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "yip_steer", Type: ebpf.SkReuseport, AttachType: ebpf.AttachSkReuseportSelect,
		Instructions: steerProgram(lanes.FD(), known.FD(), socks.FD(), n), License: "MIT",
	})
	if err != nil {
		socks.Close()
		lanes.Close()
		known.Close()
		return nil, fmt.Errorf("udp: loading the steering program: %w", err)
	}
	return &Steering{prog: prog, socks: socks, lanes: lanes, known: known, n: n, members: map[*Conn]uint32{}}, nil
}

// hashMap makes one of the program's hash maps. Not preallocated: a hub
// sized for many peers pays kernel memory only for the entries it has.
func hashMap(name string, keySize, valueSize, max int) (*ebpf.Map, error) {
	return ebpf.NewMap(&ebpf.MapSpec{
		Name: name, Type: ebpf.Hash,
		KeySize: uint32(keySize), ValueSize: uint32(valueSize), MaxEntries: uint32(max),
		Flags: unix.BPF_F_NO_PREALLOC,
	})
}

// knownKey is the known map's key: the address part of a steerKey.
type knownKey [16]byte

func knownKeyOf(a netip.Addr) knownKey { return a.Unmap().As16() }

// BPF_HDR_START_NET: skb_load_bytes_relative offsets from the IP header.
const hdrStartNet = 1

// mdHash is the offset of struct sk_reuseport_md's hash: the kernel's flow
// hash of the datagram (the same for every datagram of one source).
const mdHash = 32

// steerProgram: copy the IP header's first 24 bytes (version, and the
// source address of IPv4 at 12 or of IPv6 at 8) in one helper call; build
// the key (IPv4 in the mapped form); read the UDP source port directly from
// the packet (in an SK_REUSEPORT program the data begins at the UDP header,
// past IPv4 options and IPv6 extension headers); look the pair up; select
// the socket it names. A source the map does not hold goes to strangers'
// socket n + hash mod n, or, if its address is in the known map, to known
// socket 2n + hash mod n. Every failure returns SK_PASS without a
// selection, which makes the kernel fall back to its hash: no datagram is
// dropped here. One helper call for the header, not one per field: each costs, on
// every datagram the group receives (docs/BENCHMARKS.md).
func steerProgram(lanesFD, knownFD, socksFD, n int) asm.Instructions {
	const (
		buf      = -56 // the IP header's first 24 bytes, fp-56 .. fp-33
		tmp      = -32 // the socket index
		key      = -24 // 20-byte steerKey at fp-24 .. fp-5
		pass     = "pass"
		stranger = "stranger"
		sel      = "select"
	)
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1), // ctx
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, 0),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, buf),
		asm.Mov.Imm(asm.R4, 24),
		asm.Mov.Imm(asm.R5, hdrStartNet),
		asm.FnSkbLoadBytesRelative.Call(),
		asm.JNE.Imm(asm.R0, 0, pass),
		asm.LoadMem(asm.R7, asm.RFP, buf, asm.Byte),
		asm.RSh.Imm(asm.R7, 4),
		asm.JEq.Imm(asm.R7, 4, "v4"),
		asm.JNE.Imm(asm.R7, 6, pass),
		// IPv6: the source address is bytes 8..24.
		asm.LoadMem(asm.R1, asm.RFP, buf+8, asm.DWord),
		asm.StoreMem(asm.RFP, key, asm.R1, asm.DWord),
		asm.LoadMem(asm.R1, asm.RFP, buf+16, asm.DWord),
		asm.StoreMem(asm.RFP, key+8, asm.R1, asm.DWord),
		asm.Ja.Label("port"),
		// IPv4: ::ffff:a.b.c.d, the address at bytes 12..16.
		asm.Mov.Imm(asm.R1, 0).WithSymbol("v4"),
		asm.StoreMem(asm.RFP, key, asm.R1, asm.DWord),
		asm.StoreImm(asm.RFP, key+8, int64(int32(binary.NativeEndian.Uint32([]byte{0, 0, 0xff, 0xff}))), asm.Word),
		asm.LoadMem(asm.R1, asm.RFP, buf+12, asm.Word),
		asm.StoreMem(asm.RFP, key+12, asm.R1, asm.Word),
		// The port, as the packet has it (network order), then two zeros.
		asm.LoadMem(asm.R2, asm.R6, 0, asm.DWord).WithSymbol("port"), // data
		asm.LoadMem(asm.R3, asm.R6, 8, asm.DWord),                    // data_end
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, 2),
		asm.JGT.Reg(asm.R4, asm.R3, pass),
		asm.LoadMem(asm.R1, asm.R2, 0, asm.Half),
		asm.StoreMem(asm.RFP, key+16, asm.R1, asm.Half),
		asm.StoreImm(asm.RFP, key+18, 0, asm.Half),
		asm.LoadMapPtr(asm.R1, lanesFD),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, key),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, stranger),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.Word),
		asm.StoreMem(asm.RFP, tmp, asm.R1, asm.Word),
		asm.Ja.Label(sel),
		// Not a lane's: a known address's known socket 2n + hash mod n,
		// anyone else's strangers' socket n + hash mod n. The known map's
		// key is the steerKey's first 16 bytes, the address.
		asm.LoadMapPtr(asm.R1, knownFD).WithSymbol(stranger),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, key),
		asm.FnMapLookupElem.Call(),
		asm.Mov.Imm(asm.R7, int32(n)),
		asm.JEq.Imm(asm.R0, 0, "hash"),
		asm.Mov.Imm(asm.R7, int32(2*n)),
		asm.LoadMem(asm.R1, asm.R6, mdHash, asm.Word).WithSymbol("hash"),
		asm.Mod.Imm(asm.R1, int32(n)),
		asm.Add.Reg(asm.R1, asm.R7),
		asm.StoreMem(asm.RFP, tmp, asm.R1, asm.Word),
		asm.Mov.Reg(asm.R1, asm.R6).WithSymbol(sel),
		asm.LoadMapPtr(asm.R2, socksFD),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, tmp),
		asm.Mov.Imm(asm.R4, 0),
		asm.FnSkSelectReuseport.Call(),
		asm.Mov.Imm(asm.R0, 1).WithSymbol(pass), // SK_PASS
		asm.Return(),
	}
}

// attach makes the program the group's (on its first socket) and enters
// c as socket i: a lane socket below n (a member: lanes are steered to
// it), a strangers' socket from n on, a known socket from 2n on.
func (s *Steering) attach(c *Conn, i int) error {
	if i == 0 {
		if err := unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_EBPF, s.prog.FD()); err != nil {
			return fmt.Errorf("%w: SO_ATTACH_REUSEPORT_EBPF: %w", ErrSteering, err)
		}
	}
	if err := s.socks.Update(uint32(i), uint64(c.fd), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("%w: socket map: %w", ErrSteering, err)
	}
	if i < s.n {
		s.mu.Lock()
		s.members[c] = uint32(i)
		s.mu.Unlock()
	}
	return nil
}

// Steer sends remote's datagrams to c, if c is one of the group's sockets
// (a lane on a lane socket needs no steering). An unproven claim (a
// handshake's source address, which anyone can send from) never takes an
// entry another socket holds: one shard cannot see another's lanes, and a
// handshake from a peer's address must not divert that peer's datagrams.
// A proven one (a datagram that opened under the lane's keys) does.
func (s *Steering) Steer(remote netip.AddrPort, c *Conn, proven bool) SteerResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.members[c]
	if !ok || !remote.IsValid() {
		return NotMember
	}
	k := keyOf(remote)
	flag := ebpf.UpdateAny
	if !proven {
		var cur uint32
		if err := s.lanes.Lookup(k, &cur); err == nil {
			if cur == i {
				return Steered
			}
			return Taken
		}
		flag = ebpf.UpdateNoExist
	}
	if err := s.lanes.Update(k, i, flag); err != nil {
		if errors.Is(err, ebpf.ErrKeyExist) {
			return Taken
		}
		return Full // E2BIG: the map is full (or the kernel refused: same cure)
	}
	return Steered
}

// Unsteer forgets remote if it still leads to c: another shard may have
// steered it to its own socket since (the lane moved), and that entry
// stays.
func (s *Steering) Unsteer(remote netip.AddrPort, c *Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.members[c]
	if !ok || !remote.IsValid() {
		return
	}
	k := keyOf(remote)
	var cur uint32
	if err := s.lanes.Lookup(k, &cur); err != nil || cur != i {
		return
	}
	_ = s.lanes.Delete(k) // only a missing key can fail here, and it is gone
}

// SetKnown adds a to the known addresses (known) or removes it: datagrams
// from a known address that no lane is steered for go to the known
// sockets, not the strangers'. It fails only when the map is full (as
// many addresses as the group has room for lanes) or the kernel refuses;
// such an address's datagrams then queue with the strangers'.
func (s *Steering) SetKnown(a netip.Addr, known bool) error {
	if !a.IsValid() {
		return nil
	}
	k := knownKeyOf(a)
	if !known {
		if err := s.known.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
		return nil
	}
	return s.known.Update(k, uint8(1), ebpf.UpdateAny)
}

// Lookup says which socket index remote is steered to, if any.
func (s *Steering) Lookup(remote netip.AddrPort) (int, bool) {
	var cur uint32
	if err := s.lanes.Lookup(keyOf(remote), &cur); err != nil {
		return 0, false
	}
	return int(cur), true
}

// Close releases the program and the maps; the group's sockets keep the
// program until they close.
func (s *Steering) Close() error {
	return errors.Join(s.prog.Close(), s.socks.Close(), s.lanes.Close(), s.known.Close())
}
