package main

// The crypto ceiling: what a responder's handshake crypto alone costs on
// this machine in this run, against which the hub's handshakes per CPU
// second are judged.

import (
	"bytes"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"

	"github.com/yip-router/yip-router/crypto"
)

// Ceiling is the responder's crypto for a handshake (ConsumeInitiation
// and Respond: mac1, the DHs es, ee and se with ss cached, a fresh
// ephemeral, the AEADs and hashes) and the collection of its garbage,
// nothing else: no socket, cookie, lane install or scheduling. It is
// measured in a child process of its own (ceilingChild) on the hub's
// CPUs, so neither this generator's heap (whose collector would charge
// its assists to the loop) nor another CPU's speed enters it. PerCPUSec
// is the most handshakes a core can answer: the median of Passes, each
// a fresh responder answering Handshakes initiations.
type Ceiling struct {
	Handshakes int       `json:"handshakes"`
	CPUSec     float64   `json:"cpu_s"` // of the median pass
	PerCPUSec  float64   `json:"per_cpu_s"`
	Passes     []float64 `json:"passes_per_cpu_s"`
	CPUs       string    `json:"cpus"`
	Method     string    `json:"method"`
}

// ceilingJob is what the child reads on stdin.
type ceilingJob struct {
	HubPriv crypto.PrivateKey
	Pubs    []crypto.PublicKey
	Dgs     [][]byte
	Passes  int
}

// The ceiling answers ceilingHandshakes initiations ceilingPasses times,
// before the burst and again after it.
const (
	ceilingHandshakes = 2000
	ceilingPasses     = 3
)

// ceilingFlag runs this binary as the ceiling's child.
const ceilingFlag = "-ceiling-child"

// cryptoCeiling measures the ceiling with the prebuilt first initiations
// of peers (at most n), in passes passes, in a child of this binary pinned
// to cpus (taskset list; "" unpinned). The hub never sees these answers:
// the child's crypto.Local keeps its own replay state.
func cryptoCeiling(hubPriv crypto.PrivateKey, peers []*simPeer, n, passes int, cpus string) (Ceiling, error) {
	n = min(n, len(peers))
	job := ceilingJob{HubPriv: hubPriv, Passes: passes}
	for _, p := range peers[:n] {
		job.Pubs = append(job.Pubs, p.yip.pub)
		job.Dgs = append(job.Dgs, p.firstDg)
	}
	var in bytes.Buffer
	if err := gob.NewEncoder(&in).Encode(&job); err != nil {
		return Ceiling{}, err
	}
	self, err := os.Executable()
	if err != nil {
		return Ceiling{}, err
	}
	args := []string{self, ceilingFlag}
	if cpus != "" {
		args = append([]string{"taskset", "-c", cpus}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stderr = &in, os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return Ceiling{}, fmt.Errorf("%s: %w", cmd, err)
	}
	var c Ceiling
	if err := json.Unmarshal(out, &c); err != nil {
		return Ceiling{}, fmt.Errorf("%s's answer: %w", cmd, err)
	}
	c.CPUs = cpus
	return c, nil
}

// ceilingChild is the child's main: it reads a ceilingJob on stdin and
// writes the Ceiling as JSON on stdout.
func ceilingChild() int {
	var job ceilingJob
	if err := gob.NewDecoder(os.Stdin).Decode(&job); err != nil {
		fmt.Fprintln(os.Stderr, "ceiling child:", err)
		return 1
	}
	c, err := job.run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ceiling child:", err)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(&c); err != nil {
		return 1
	}
	return 0
}

// run answers the job's initiations Passes times, each with a fresh
// responder, timing the process's CPU (its collector's included) per pass.
func (job *ceilingJob) run() (Ceiling, error) {
	c := Ceiling{Handshakes: len(job.Dgs),
		Method: "crypto.Local.ConsumeInitiation + Incoming.Respond of the burst's prebuilt initiations in a child process on the hub's CPUs, its CPU time (RUSAGE_SELF: the collection of its garbage included), median of passes"}
	if c.Handshakes == 0 || job.Passes < 1 {
		return c, fmt.Errorf("nothing to measure")
	}
	for range job.Passes {
		hub := crypto.NewLocal(job.HubPriv, true)
		for _, pub := range job.Pubs {
			if _, err := hub.AddPeer(pub, crypto.PresharedKey{}); err != nil {
				return c, err
			}
		}
		c0 := selfCPU()
		for i, dg := range job.Dgs {
			inc, err := hub.ConsumeInitiation(dg)
			if err != nil {
				return c, fmt.Errorf("initiation %d: %w", i, err)
			}
			if _, _, err := inc.Respond(uint32(i), crypto.LaneOffer{Ports: []uint16{hubPort}}); err != nil {
				return c, err
			}
		}
		c.Passes = append(c.Passes, div(float64(c.Handshakes), selfCPU()-c0))
	}
	c.settle()
	return c, nil
}

// add takes in the passes of a later measurement of the same job (the
// ceiling is measured before and after the burst, so that the machine's
// speed drifting between them shows and is averaged out).
func (c *Ceiling) add(later Ceiling) {
	c.Passes = append(c.Passes, later.Passes...)
	c.settle()
}

// settle sets PerCPUSec and CPUSec from the median pass.
func (c *Ceiling) settle() {
	p := slices.Clone(c.Passes)
	slices.Sort(p)
	c.PerCPUSec = p[len(p)/2]
	c.CPUSec = div(float64(c.Handshakes), c.PerCPUSec)
}
