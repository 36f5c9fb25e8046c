package control

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
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

// failingWriter refuses every write and counts them.
type failingWriter struct{ writes int }

func (w *failingWriter) Write([]byte) (int, error) {
	w.writes++
	return 0, errors.New("disk full")
}

// A key log that refuses a write is warned about once and written no
// more: not the session's other lanes, not later sessions. The handshakes
// go on.
func TestKeyLogWriteFailureStopsLogging(t *testing.T) {
	ini, resp := memPairShards(t, "198.51.100.7:40000", 2, 2)
	core, logs := observer.New(zap.WarnLevel)
	ini.Core.log = zap.New(core)
	w := &failingWriter{}
	ini.keyLog = w
	handshake(t, ini, resp)
	ini.clock.Advance(DefaultRekeyAfter + DefaultRekeyAfter/rekeyJitterDiv + time.Second)
	ini.Tick(ini.clock.Now())
	resp.deliver(ini.take(), ini.addr, ConnGroup)
	ini.deliver(resp.take(), resp.addr, ConnLane)
	if n := ini.Counts().Completed; n != 2 {
		t.Fatalf("%d handshakes completed, want 2", n)
	}
	if w.writes != 1 || logs.FilterMessageSnippet("key log").Len() != 1 {
		t.Fatalf("%d writes, %d warnings; want 1 and 1", w.writes, logs.FilterMessageSnippet("key log").Len())
	}
}
