package control

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
)

// The key log has one line per installed lane with exactly that lane's
// framing keys, both directions, and never its AEAD keys.
func TestKeyLogFramingKeysOnly(t *testing.T) {
	ini, resp := memPairShards(t, "198.51.100.7:40000", 2, 2)
	var buf bytes.Buffer
	ini.keyLog = &buf
	handshake(t, ini, resp)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	p := ini.peerOf(t)
	if len(lines) != p.lanes || p.lanes != 2 {
		t.Fatalf("%d key log lines for %d lanes:\n%s", len(lines), p.lanes, buf.String())
	}
	for i, line := range lines {
		lc := ini.plane.lanes[laneAt{p.id, i}]
		want := fmt.Sprintf("yip-keylog 1 %s %d %s %s %s %s", p.cfg.PublicKey, i,
			hex.EncodeToString(lc.Send.Tag[:]), hex.EncodeToString(lc.Send.HP[:]),
			hex.EncodeToString(lc.Recv.Tag[:]), hex.EncodeToString(lc.Recv.HP[:]))
		if line != want {
			t.Fatalf("line %d:\n got %s\nwant %s", i, line, want)
		}
		for _, k := range [][]byte{lc.Send.AEAD[:], lc.Recv.AEAD[:]} {
			if strings.Contains(buf.String(), hex.EncodeToString(k)) {
				t.Fatal("the key log holds an AEAD key")
			}
		}
	}
}
