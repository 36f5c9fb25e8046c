//go:build race

package control

// raceEnabled: under the race detector sync.Pool drops a random quarter of
// the values put back, so the allocation tests of pooled states skip.
const raceEnabled = true
