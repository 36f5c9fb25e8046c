package e2e

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/yip-router/yip-router/crypto"
)

// The wire statistics of TestDPIGate's capture: every datagram labelled by
// the routers' key log (YIP_KEYLOG: the lanes' tag and header-protection
// keys, which tell a datagram's kind but cannot decrypt it), then what a
// classifier that sees only lengths can do with them.

// wireClass is what a captured datagram is.
type wireClass int

const (
	classData wireClass = iota
	classParity
	classControl
	classHandshake // matches no lane's keys: a handshake message
	nClasses
)

func (c wireClass) String() string {
	return [...]string{"data", "parity", "control", "handshake"}[c]
}

// wireDgram is one captured underlay datagram.
type wireDgram struct {
	n                int // UDP payload length
	class            wireClass
	srcPort, dstPort uint16
	src              [4]byte
	lane             int // the lane index (-1: a handshake message)
}

// laneFramer is one lane direction's framer and the lane's index.
type laneFramer struct {
	crypto.Framer
	lane int
}

// keyLogFramers reads a key log and returns a framer for every lane
// direction it names.
func keyLogFramers(t *testing.T, path string) []laneFramer {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("key log: %v", err)
	}
	defer f.Close()
	seen := map[string]bool{}
	var out []laneFramer
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 8 || fs[0] != "yip-keylog" || fs[1] != "1" {
			t.Fatalf("key log line %q", sc.Text())
		}
		lane, err := strconv.Atoi(fs[3])
		if err != nil {
			t.Fatalf("key log line %q: lane: %v", sc.Text(), err)
		}
		for _, pair := range [][2]string{{fs[4], fs[5]}, {fs[6], fs[7]}} {
			if seen[pair[0]] {
				continue
			}
			seen[pair[0]] = true
			var k crypto.LaneKeys
			tag, err1 := hex.DecodeString(pair[0])
			hp, err2 := hex.DecodeString(pair[1])
			if err1 != nil || err2 != nil || len(tag) != len(k.Tag) || len(hp) != len(k.HP) {
				t.Fatalf("key log line %q: bad keys", sc.Text())
			}
			copy(k.Tag[:], tag)
			copy(k.HP[:], hp)
			out = append(out, laneFramer{crypto.NewFramer(&k), lane})
		}
	}
	return out
}

// labelCapture parses the captured IPv4/UDP packets on port and labels
// each with the framers.
func labelCapture(t *testing.T, pkts []capturedPkt, port uint16, framers []laneFramer) []wireDgram {
	t.Helper()
	var out []wireDgram
	last := 0
	for _, p := range pkts {
		b := p.data
		if len(b) < 28 || b[0]>>4 != 4 || b[9] != 17 {
			continue
		}
		ihl := int(b[0]&0xf) * 4
		if len(b) < ihl+8 {
			continue
		}
		sp, dp := binary.BigEndian.Uint16(b[ihl:]), binary.BigEndian.Uint16(b[ihl+2:])
		if sp != port && dp != port {
			continue // every datagram of ours has a listen port at one end
		}
		payload := b[ihl+8:]
		d := wireDgram{n: len(payload), class: classHandshake, srcPort: sp, dstPort: dp, lane: -1}
		copy(d.src[:], b[12:16])
		for i := range framers {
			j := (last + i) % len(framers)
			h, _, err := framers[j].Deframe(bytes.Clone(payload))
			if err == crypto.ErrTag || err == crypto.ErrShort {
				continue
			}
			if err != nil {
				t.Fatalf("a captured datagram deframes with an error: %v", err)
			}
			d.class = [...]wireClass{classData, classParity, classControl}[h.Kind]
			d.lane = framers[j].lane
			last = j
			break
		}
		out = append(out, d)
	}
	return out
}

// minJudged is the fewest datagrams of a kind whose length shares the test
// judges: with fewer, a 20% share of one length is still chance.
const minJudged = 40

// binomialTail is P(X ≥ c) for X ~ Binomial(n, p).
func binomialTail(n, c int, p float64) float64 {
	if c <= 0 {
		return 1
	}
	lp, lq := math.Log(p), math.Log1p(-p)
	ln, _ := math.Lgamma(float64(n + 1))
	sum := 0.0
	for k := c; k <= n; k++ {
		lk, _ := math.Lgamma(float64(k + 1))
		lnk, _ := math.Lgamma(float64(n - k + 1))
		sum += math.Exp(ln - lk - lnk + float64(k)*lp + float64(n-k)*lq)
	}
	return math.Min(sum, 1)
}

// lengthShares checks, per class, that no single length carries more than
// 5% of its datagrams: a class fails when its most common length is too
// frequent for any distribution whose largest share is 5% (one-sided
// binomial test at 0.001, Bonferroni over the class's lengths), so a fixed
// length fails on a handful of datagrams and an even spread passes at any
// count. It returns a line per class for the log.
func lengthShares(t *testing.T, ds []wireDgram) []string {
	t.Helper()
	var lines []string
	for c := range nClasses {
		hist := map[int]int{}
		n := 0
		for _, d := range ds {
			if d.class == c {
				hist[d.n]++
				n++
			}
		}
		if n == 0 {
			lines = append(lines, fmt.Sprintf("%-9s      0", c))
			continue
		}
		top, topN := 0, 0
		for l, k := range hist {
			if k > topN || k == topN && l < top {
				top, topN = l, k
			}
		}
		lo, hi := math.MaxInt, 0
		for l := range hist {
			lo, hi = min(lo, l), max(hi, l)
		}
		pv := binomialTail(n, topN, 0.05)
		lines = append(lines, fmt.Sprintf("%-9s %6d datagrams, %4d lengths (%d..%d), most common %d bytes: %.1f%% (p=%.2g under a 5%% share)",
			c, n, len(hist), lo, hi, top, 100*float64(topN)/float64(n), pv))
		if n < minJudged {
			lines[len(lines)-1] += ": too few to judge"
			continue
		}
		if pv < 0.001/float64(len(hist)) {
			t.Errorf("%s: %d of %d datagrams are %d bytes long (%.1f%%): more than a 5%% share allows (p=%.2g)",
				c, topN, n, top, 100*float64(topN)/float64(n), pv)
		}
	}
	return lines
}

// bestLengthClassifier is the balanced accuracy (the mean of the two
// classes' recalls) that the best rule on the datagram length alone
// reaches at telling control and handshake datagrams from data and
// parity, judged as a classifier trained on traffic would be: the
// datagrams are split in two halves (at random, each class evenly); on one
// half each rule is fitted and the rule to use is chosen (by a two-fold split of
// that half), then refitted on the whole half and judged on the other
// half; and the same the other way round. Fitted and judged on the same
// few dozen control datagrams, or picked as the best of many rules by
// how they did on the judging half, a rule finds chance patterns. The
// rules: a length threshold (either way round), and histograms of bin
// width 1..256 bytes labelled by likelihood ratio. It returns the mean
// over both halves of splitRounds splits, and how often each rule was
// chosen.
func bestLengthClassifier(ds []wireDgram) (float64, string) {
	// Over splitRounds random splits (each class dealt evenly into the
	// halves), so that one split's luck does not decide.
	var ba float64
	chosen := map[string]int{}
	for round := range splitRounds {
		rng := rand.New(rand.NewPCG(uint64(round), 1))
		shuffled := slices.Clone(ds)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		halves := split(shuffled)
		for _, h := range halves {
			if p, n := classCounts(h); p == 0 || n == 0 {
				return 0.5, "one class is empty"
			}
		}
		for f := range 2 {
			train, test := halves[1-f], halves[f]
			inner := split(train)
			best, bestRule := -1.0, lengthRules[0]
			for _, r := range lengthRules {
				cv := (balancedAccuracy(inner[1], r.fit(inner[0])) + balancedAccuracy(inner[0], r.fit(inner[1]))) / 2
				if cv > best {
					best, bestRule = cv, r
				}
			}
			ba += balancedAccuracy(test, bestRule.fit(train))
			chosen[bestRule.name]++
		}
	}
	var names []string
	for n, k := range chosen {
		names = append(names, fmt.Sprintf("%s ×%d", n, k))
	}
	slices.Sort(names)
	return ba / (2 * splitRounds), strings.Join(names, ", ")
}

// splitRounds is how many random splits bestLengthClassifier averages.
const splitRounds = 8

// split deals ds into two halves, each class alternately, so both halves
// hold as many control datagrams as each other.
func split(ds []wireDgram) [2][]wireDgram {
	var h [2][]wireDgram
	var k [2]int
	for _, d := range ds {
		c := 0
		if isControl(d) {
			c = 1
		}
		h[k[c]%2] = append(h[k[c]%2], d)
		k[c]++
	}
	return h
}

// lengthRule is a family of length-only classifiers: fit returns the one
// that best separates the classes of its training datagrams.
type lengthRule struct {
	name string
	fit  func(train []wireDgram) func(n int) bool
}

var lengthRules = func() []lengthRule {
	rules := []lengthRule{{"a length threshold", func(train []wireDgram) func(int) bool {
		cut, below := fitThreshold(train)
		return func(n int) bool { return (n <= cut) == below }
	}}}
	for w := 1; w <= 256; w *= 2 {
		rules = append(rules, lengthRule{fmt.Sprintf("a histogram of %d-byte bins", w), func(train []wireDgram) func(int) bool {
			cp, cn := map[int]float64{}, map[int]float64{}
			trPos, trNeg := classCounts(train)
			for _, d := range train {
				if isControl(d) {
					cp[d.n/w]++
				} else {
					cn[d.n/w]++
				}
			}
			return func(n int) bool {
				b := n / w
				return (cp[b]+0.5)/float64(trPos+1) > (cn[b]+0.5)/float64(trNeg+1)
			}
		}})
	}
	return rules
}()

// bestPerDirection is bestLengthClassifier on each sender's datagrams
// alone (an observer knows which way a datagram goes): the worse of the
// two, and a line per direction.
func bestPerDirection(ds []wireDgram) (float64, string) {
	by := map[[4]byte][]wireDgram{}
	for _, d := range ds {
		by[d.src] = append(by[d.src], d)
	}
	worst, lines := 0.0, []string{}
	for src, sub := range by {
		ba, rule := bestLengthClassifier(sub)
		pos, neg := classCounts(sub)
		lines = append(lines, fmt.Sprintf("from %d.%d.%d.%d (%d control and handshake, %d data): %s, %.1f%%",
			src[0], src[1], src[2], src[3], pos, neg, rule, 100*ba))
		worst = max(worst, ba)
	}
	slices.Sort(lines)
	return worst, strings.Join(lines, "; ")
}

// isControl: the positive class, control frames and handshakes.
func isControl(d wireDgram) bool { return d.class == classControl || d.class == classHandshake }

func classCounts(ds []wireDgram) (pos, neg int) {
	for _, d := range ds {
		if isControl(d) {
			pos++
		} else {
			neg++
		}
	}
	return pos, neg
}

// balancedAccuracy of say (true: control) on ds.
func balancedAccuracy(ds []wireDgram, say func(n int) bool) float64 {
	var tp, fn, tn, fp float64
	for _, d := range ds {
		switch s := say(d.n); {
		case s && isControl(d):
			tp++
		case s:
			fp++
		case isControl(d):
			fn++
		default:
			tn++
		}
	}
	if tp+fn == 0 || tn+fp == 0 {
		return 0.5
	}
	return (tp/(tp+fn) + tn/(tn+fp)) / 2
}

// fitThreshold is the cut (and side: below means "length ≤ cut is
// control") with the best balanced accuracy on ds.
func fitThreshold(ds []wireDgram) (cut int, below bool) {
	nPos, nNeg := classCounts(ds)
	sorted := slices.Clone(ds)
	slices.SortFunc(sorted, func(a, b wireDgram) int { return a.n - b.n })
	best := -1.0
	tp, fp := 0, 0
	for i, d := range sorted {
		if isControl(d) {
			tp++
		} else {
			fp++
		}
		if i+1 < len(sorted) && sorted[i+1].n == d.n {
			continue
		}
		ba := (float64(tp)/float64(nPos) + float64(nNeg-fp)/float64(nNeg)) / 2
		if ba > best {
			best, cut, below = ba, d.n, true
		}
		if 1-ba > best {
			best, cut, below = 1-ba, d.n, false
		}
	}
	return cut, below
}

// lanePorts is, per sender address and lane, the source ports of its
// data and control datagrams from ports other than the listen port (the
// initiator's lane sockets), each with its residue mod 64.
func lanePorts(ds []wireDgram, listen uint16) map[[4]byte]map[int][]uint16 {
	ports := map[[4]byte]map[int][]uint16{}
	for _, d := range ds {
		if d.lane < 0 || d.srcPort == listen {
			continue
		}
		if ports[d.src] == nil {
			ports[d.src] = map[int][]uint16{}
		}
		if !slices.Contains(ports[d.src][d.lane], d.srcPort) {
			ports[d.src][d.lane] = append(ports[d.src][d.lane], d.srcPort)
		}
	}
	return ports
}

// portsMod64 says whether every lane's port is congruent to its index mod
// 64 (the old port steering's rule: a port that names its lane), and
// renders the ports.
func portsMod64(ports map[[4]byte]map[int][]uint16) (congruent bool, text string) {
	var parts []string
	lanes, named := 0, 0
	for src, byLane := range ports {
		var s []string
		for lane, ps := range byLane {
			for _, p := range ps {
				lanes++
				if int(p%64) == lane {
					named++
				}
				s = append(s, fmt.Sprintf("lane %d: %d (≡%d)", lane, p, p%64))
			}
		}
		slices.Sort(s)
		parts = append(parts, fmt.Sprintf("%d.%d.%d.%d: %s", src[0], src[1], src[2], src[3], strings.Join(s, ", ")))
	}
	slices.Sort(parts)
	return lanes > 0 && named == lanes, strings.Join(parts, "; ")
}
