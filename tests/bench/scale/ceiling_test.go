package main

import (
	"testing"

	"github.com/yip-router/yip-router/crypto"
)

// TestCeilingJob answers real initiations in passes and takes the median;
// an initiation the responder cannot open fails the measurement instead of
// counting as answered.
func TestCeilingJob(t *testing.T) {
	hubPriv, err := crypto.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	peers, err := newPeers(4, hubPriv.Public(), 1, false)
	if err != nil {
		t.Fatal(err)
	}
	job := ceilingJob{HubPriv: hubPriv, Passes: 3}
	for _, p := range peers {
		if err := p.prebuild(); err != nil {
			t.Fatal(err)
		}
		job.Pubs = append(job.Pubs, p.yip.pub)
		job.Dgs = append(job.Dgs, p.firstDg)
	}
	c, err := job.run()
	if err != nil {
		t.Fatal(err)
	}
	if c.Handshakes != 4 || len(c.Passes) != 3 || c.PerCPUSec <= 0 {
		t.Fatalf("ceiling %+v: want 4 handshakes, 3 passes, a rate", c)
	}
	c.add(Ceiling{Passes: []float64{1, 2, 1e9}})
	if len(c.Passes) != 6 {
		t.Fatalf("add kept %d passes, want 6", len(c.Passes))
	}
	// The median of six is the upper middle one: neither outlier.
	if c.PerCPUSec == 1 || c.PerCPUSec == 1e9 || c.CPUSec != 4/c.PerCPUSec {
		t.Fatalf("median %v (CPU %v) of %v", c.PerCPUSec, c.CPUSec, c.Passes)
	}

	job.Dgs[2] = append([]byte(nil), job.Dgs[2]...)
	job.Dgs[2][40] ^= 1
	if _, err := job.run(); err == nil {
		t.Fatal("a corrupted initiation was counted as answered")
	}
}
