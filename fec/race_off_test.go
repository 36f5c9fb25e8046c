//go:build !race

package fec

const raceEnabled = false
