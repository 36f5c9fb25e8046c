//go:build race

package fec

// raceEnabled: the simulations run fewer packets under the race detector,
// which slows their single goroutine tenfold and checks nothing there.
const raceEnabled = true
