package router

import (
	"crypto/rand"
	"encoding/base64"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkScrape10k is one metrics scrape of a router with 10,000 peers
// of two lanes each, from a ready Status: the exposition's own cost
// (Router.Status's, querying shards and the core, is not in it).
func BenchmarkScrape10k(b *testing.B) {
	src := &fakeStatus{Status{Interface: "yip0", PublicKey: peerKey, Shards: []ShardStatus{{ID: 0}, {ID: 1}}}}
	for range 10000 {
		var k [32]byte
		rand.Read(k[:])
		src.st.Peers = append(src.st.Peers, PeerStatus{
			PublicKey: base64.StdEncoding.EncodeToString(k[:]), LastHandshake: time.Now(), Handshakes: 3,
			RxBytes: 1 << 30, TxBytes: 1 << 31, RxPackets: 1 << 20, TxPackets: 1 << 21,
			Lanes: []LaneStatus{{Index: 0}, {Index: 1}},
		})
	}
	// Router.Status sorts its peers by key.
	slices.SortFunc(src.st.Peers, func(a, b PeerStatus) int { return strings.Compare(a.PublicKey, b.PublicKey) })
	h := metricsHandler(src, false)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
		_, _ = io.Copy(io.Discard, w.Body)
	}
}
