//go:build race

package crypto

const raceEnabled = true
