package crypto

import (
	"fmt"
	"testing"
	"time"

	"github.com/dchest/siphash"
	"golang.org/x/crypto/chacha20poly1305"
)

var benchSizes = []int{64, 512, 1400}

func sizeName(name string, n int) string { return fmt.Sprintf("%s/%d", name, n) }

// benchPass runs op over a pass of npass prepared items, calling reset
// (untimed) before every pass: receive-side operations consume their input
// (in-place unmask and decrypt, replay window), so each pass starts fresh.
func benchPass(b *testing.B, npass int, reset func(), op func(i int)) {
	b.StopTimer()
	reset()
	b.StartTimer()
	i := 0
	for b.Loop() {
		if i == npass {
			b.StopTimer()
			reset()
			b.StartTimer()
			i = 0
		}
		op(i)
		i++
	}
}

const benchPassLen = 1024

// receiveSet returns benchPassLen framed data datagrams of an n-byte packet
// with distinct counters, and the lane's receive side.
func receiveSet(b *testing.B, n int) ([][]byte, *Opener, Framer) {
	s, fs, o, fr := lanePair(8)
	set := make([][]byte, benchPassLen)
	for i := range set {
		set[i] = sealFrame(b, s, &fs, make([]byte, n+DataOverhead), make([]byte, n), Header{K: 8, R: 1})
	}
	return set, o, fr
}

func BenchmarkSeal(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(sizeName("seal", n), func(b *testing.B) {
			s, _, _, _ := lanePair(8)
			buf := make([]byte, n+DataOverhead)
			b.SetBytes(int64(n))
			for b.Loop() {
				if _, err := s.SealSymbol(buf[HeaderLen:], nil, buf[HeaderLen+CounterLen:HeaderLen+CounterLen+n]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkFrame(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(sizeName("tag+frame", n), func(b *testing.B) {
			_, fs, _, _ := lanePair(8)
			buf := make([]byte, n+DataOverhead)
			b.SetBytes(int64(n))
			for b.Loop() {
				fs.Frame(buf, Header{K: 8, R: 1}, n+SymbolOverhead)
			}
		})
	}
}

func BenchmarkDeframe(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(sizeName("verify+deframe", n), func(b *testing.B) {
			set, _, fr := receiveSet(b, n)
			work := make([][]byte, len(set))
			b.SetBytes(int64(n))
			benchPass(b, len(set), func() {
				for i := range set {
					work[i] = append(work[i][:0], set[i]...)
				}
			}, func(i int) {
				if _, _, err := fr.Deframe(work[i]); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkDeframeJunk is what a datagram that fails the tag costs a lane
// (a stray, a flood, another lane's datagram tried against this one), by
// length up to the largest UDP payload, beside what the previous framing
// (wire version 1: the tag over every byte) cost for the same datagram in
// the same run. Deframe restores a rejected datagram, so one buffer serves.
func BenchmarkDeframeJunk(b *testing.B) {
	_, _, _, fr := lanePair(8)
	for _, n := range []int{64, 1400, 9000, 65507} {
		d := make([]byte, n)
		for i := range d {
			d[i] = byte(i*131 + 7)
		}
		b.Run(sizeName("v2", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := fr.Deframe(d); err != ErrTag {
					b.Fatal(err)
				}
			}
		})
		b.Run(sizeName("v1-tag-every-byte", n), func(b *testing.B) {
			var sink uint64
			for b.Loop() {
				// Version 1: unmask, hash all but the tag, restore.
				tag := uint64(d[n-1])
				fr.mask(d, tag)
				sink ^= siphash.Hash(fr.t0, fr.t1, d[:n-TagLen])
				fr.mask(d, tag)
			}
			_ = sink
		})
	}
}

func BenchmarkOpen(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(sizeName("open", n), func(b *testing.B) {
			set, o, fr := receiveSet(b, n)
			syms := make([][]byte, len(set))
			for i := range set {
				_, syms[i], _ = fr.Deframe(set[i])
			}
			work := make([][]byte, len(set))
			b.SetBytes(int64(n))
			benchPass(b, len(set), func() {
				o.replay.Reset()
				for i := range syms {
					work[i] = append(work[i][:0], syms[i]...)
				}
			}, func(i int) {
				if _, err := o.OpenSymbol(nil, work[i]); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkReceive is the whole per-datagram crypto of ingress, and
// BenchmarkReceivePrimitives the sum of its two primitives on the same
// bytes (SipHash-2-4 over the tagged part, ChaCha20-Poly1305 open of the
// ciphertext): the target is Receive ≤ 1.1 × Primitives.
func BenchmarkReceive(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(sizeName("verify+deframe+open", n), func(b *testing.B) {
			set, o, fr := receiveSet(b, n)
			work := make([][]byte, len(set))
			b.SetBytes(int64(n))
			benchPass(b, len(set), func() {
				o.replay.Reset()
				for i := range set {
					work[i] = append(work[i][:0], set[i]...)
				}
			}, func(i int) {
				_, sym, err := fr.Deframe(work[i])
				if err != nil {
					b.Fatal(err)
				}
				if _, err := o.OpenSymbol(nil, sym); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

func BenchmarkReceivePrimitives(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(sizeName("siphash24+chacha-open", n), func(b *testing.B) {
			var key [32]byte
			a, _ := chacha20poly1305.New(key[:])
			nonce := make([]byte, 12)
			ct := a.Seal(nil, nonce, make([]byte, n), nil)
			dgram := make([]byte, n+DataOverhead)
			out := make([]byte, 0, n)
			var sink uint64
			b.SetBytes(int64(n))
			for b.Loop() {
				sink ^= siphash.Hash(1, 2, dgram[:len(dgram)-TagLen])
				if _, err := a.Open(out, nonce, ct, nil); err != nil {
					b.Fatal(err)
				}
			}
			_ = sink
		})
	}
}

func BenchmarkConsumeInitiation(b *testing.B) {
	for _, cache := range []bool{true, false} {
		name := "ss-cached"
		if !cache {
			name = "uncached"
		}
		b.Run(name, func(b *testing.B) {
			p := newParties(b, PresharedKey{}, cache)
			_, d1, _ := p.a.Initiate(p.pa, 1, offer(4, 1), t0)
			for b.Loop() {
				// Replaying the same initiation exercises all of its
				// crypto; forget the timestamp so it is
				// accepted every time.
				p.pb.lastTS = Timestamp{}
				if _, err := p.b.ConsumeInitiation(d1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkFullHandshake(b *testing.B) {
	p := newParties(b, PresharedKey{}, true)
	now := t0
	for b.Loop() {
		now = now.Add(time.Microsecond)
		in, d1, err := p.a.Initiate(p.pa, 1, offer(4, 1), now)
		if err != nil {
			b.Fatal(err)
		}
		inc, err := p.b.ConsumeInitiation(d1)
		if err != nil {
			b.Fatal(err)
		}
		d2, _, err := inc.Respond(2, offer(4, 1))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := in.ConsumeResponse(d2); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkX25519(b *testing.B) {
	k, _ := GeneratePrivateKey()
	for b.Loop() {
		k.Public()
	}
}

// BenchmarkClassifyGarbage is what a stray datagram of handshake length
// costs the shard that receives it: a keyed BLAKE2s per handshake key (the
// distinct PSKs of the peers, plus the public-key-only form), up to
// MaxHandshakeKeys.
func BenchmarkClassifyGarbage(b *testing.B) {
	for _, keys := range []int{1, 4, MaxHandshakeKeys} {
		l := NewLocal(mustKeyB(b), true)
		for i := range keys {
			if _, err := l.AddPeer(mustKeyB(b).Public(), PresharedKey{byte(i)}); err != nil {
				b.Fatal(err)
			}
		}
		for _, n := range []int{128, 1024} {
			junk := make([]byte, n)
			b.Run(fmt.Sprintf("keys=%d/%d", keys, n), func(b *testing.B) {
				b.ReportAllocs()
				for range b.N {
					l.Classify(junk)
				}
			})
		}
	}
}

func mustKeyB(b *testing.B) PrivateKey {
	k, err := GeneratePrivateKey()
	if err != nil {
		b.Fatal(err)
	}
	return k
}
