package crypto

import (
	"math/rand/v2"
	"testing"
)

func TestReplayBasics(t *testing.T) {
	var r Replay
	if ReplayWindow < 8192 {
		t.Fatalf("window %d < 8192", ReplayWindow)
	}
	mustCommit := func(c uint64, want bool) {
		t.Helper()
		if got := r.Commit(c); got != want {
			t.Fatalf("Commit(%d) = %v, want %v", c, got, want)
		}
	}
	mustCommit(0, true)
	mustCommit(0, false) // duplicate
	mustCommit(5, true)
	mustCommit(3, true) // reordered inside the window
	mustCommit(3, false)
	mustCommit(5, false)
	mustCommit(5+ReplayWindow, true) // highest is now 5+W
	mustCommit(7, true)              // W-2 behind, never seen: accepted
	mustCommit(6, true)              // W-1 behind: the oldest acceptable
	mustCommit(5, false)             // W behind: too old
	mustCommit(1<<40, true)          // a big jump slides the whole ring
	mustCommit(1<<40-ReplayWindow+1, true)
	mustCommit(1<<40-ReplayWindow, false)
	mustCommit(1<<40-ReplayWindow/2, true) // stale bits from before the jump are gone
	mustCommit(RejectAfterMessages, false)
	if r.Check(1<<40) || !r.Check(1<<40+1) {
		t.Fatal("Check disagrees with Commit")
	}
}

// TestReplayModel checks the bitmap against a plain map model over random
// streams with jitter, duplicates and jumps, around block boundaries.
func TestReplayModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 20 {
		var r Replay
		seen := map[uint64]bool{}
		var top uint64 // highest accepted + 1
		next := uint64(0)
		for range 20000 {
			var c uint64
			switch x := rng.IntN(100); {
			case x < 60:
				c = next
				next++
			case x < 85: // reorder/duplicate near the top
				back := uint64(rng.IntN(3 * ReplayWindow / 2))
				if back > next {
					back = next
				}
				c = next - back
			case x < 97:
				c = next + uint64(rng.IntN(200))
			default:
				c = next + uint64(rng.IntN(4*replayRingBits))
				next = c + 1
			}
			want := !seen[c] && (c+1 > top || top-c <= ReplayWindow)
			if got := r.Check(c); got != want {
				t.Fatalf("trial %d: Check(%d) = %v, model %v (top %d)", trial, c, got, want, top)
			}
			if got := r.Commit(c); got != want {
				t.Fatalf("trial %d: Commit(%d) = %v, model %v", trial, c, got, want)
			}
			if want {
				seen[c] = true
				if c+1 > top {
					top = c + 1
				}
			}
		}
	}
}
