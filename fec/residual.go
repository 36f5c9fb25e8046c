// The loss model the Adapter predicts with: the inner loss a TCP flow
// tolerates, the residual loss of K:R under independent and bursty
// (Gilbert channel) wire loss, how interleaving changes a burst, and the
// parity a group that closes early needs. Functions of their arguments
// only: the Adapter's state stays in adapt.go.

package fec

import (
	"math"
	"time"
)

// spacedBurst is the mean burst length a Gilbert channel of stationary loss
// p and mean burst burst shows to symbols spaced d apart: the d-step chain
// is again a Gilbert channel, leaving the bad state with probability
// (1−p)(1−λ^d), λ = 1 − enter − leave.
func spacedBurst(p, burst float64, d int) float64 {
	if burst <= 1 || d <= 1 || p <= 0 || p >= 1 {
		return burst
	}
	leave := 1 / burst
	lambda := 1 - p*leave/(1-p) - leave
	return 1 / ((1 - p) * (1 - math.Pow(lambda, float64(d))))
}

// wireBurst inverts spacedBurst: the wire's mean burst from one measured
// on symbols spaced d apart (as runs within groups at depth d are).
func wireBurst(p, measured float64, d int) float64 {
	if measured <= 1 || d <= 1 || p <= 0 || p >= 1 {
		return measured
	}
	ld := 1 - 1/(measured*(1-p)) // λ^d
	if ld <= 0 {
		return 1 / (1 - p) // no memory left at this spacing: independent
	}
	lambda := math.Pow(ld, 1/float64(d))
	return 1 / ((1 - p) * (1 - lambda))
}

// runLength is the mean run of lost symbols r shows within its groups,
// or independent loss's (1/(1−p)) while its runs are within chance of
// it: no more continuations (lost symbols whose successor in the group
// was lost too) than two standard deviations and one above the p·lost
// independent loss has (AboveChance; at 1% loss about one sample in a
// hundred of independent loss reads bursty, and three standard
// deviations missed one sample in eight of bursts of 4 at 5%, 4 deep).
// Interleaved, a few
// continuations are a long wire burst (wireBurst): on a channel losing 1%
// independently, groups 4 deep with 40 lost symbols of which two adjacent
// read as bursts of 1.55, a third of the samples did, and the rule paid
// 192:17 at depth 1 for bursts of 1.36 where 192:10 met its target.
// Bursts so short that the interleave hides them read as independent:
// they are, to groups that deep. A report that lost every symbol is
// taken as counted.
func (r LossReport) runLength() float64 {
	if r.Runs == 0 || r.Received >= r.Expected {
		return 0
	}
	if r.independent() {
		return 1 / (1 - r.Loss())
	}
	return float64(r.Expected-r.Received) / float64(r.Runs)
}

// independent reports whether r's runs are within chance of independent
// loss (runLength).
func (r LossReport) independent() bool {
	lost := float64(r.Expected - r.Received)
	p := r.Loss()
	return r.Runs > 0 && p < 1 && !AboveChance(lost-float64(r.Runs), p*lost, 2, 1)
}

// AboveChance reports whether count exceeds mean, what independent
// events would count on average, by more than chance explains: sigmas
// standard deviations (Poisson), and slack for the count being whole. It
// tells bursts from independent loss (LossReport.runLength), a queue's
// overflows from the channel's loss (the router's loss split).
func AboveChance(count, mean, sigmas, slack float64) bool {
	mean = max(mean, 0)
	return count > mean+sigmas*math.Sqrt(mean)+slack
}

// lossBound is the most loss r's interval is within chance of: two
// standard deviations (Poisson) and one above what it lost; none if it
// lost nothing. A floor for congestion is taken from one interval's loss
// (Adapter.Observe), and a small one reads low as often as high: one of
// 300 symbols lost on a channel losing 1%, as one interval in five does,
// set a floor of 0.33%, below minQueuedLoss, and the queued report after
// it took parity off in a BBR flow's start-up.
func (r LossReport) lossBound() float64 {
	if r.Expected == 0 || r.Received >= r.Expected {
		return 0
	}
	return LossWithinChance(r.Expected-r.Received, r.Expected)
}

// LossWithinChance is the highest loss rate that losing lost of n is
// within chance of: two standard deviations (Poisson) and one above what
// was lost, over n (1 for n = 0).
func LossWithinChance(lost, n uint32) float64 {
	if n == 0 {
		return 1
	}
	l := float64(lost)
	return min(1, (l+2*math.Sqrt(l)+1)/float64(n))
}

// respaced is r, whose runs were counted within groups interleaved from
// deep, with its runs as groups interleaved to deep would have counted
// them on the same channel: a sample gathered across a change of depth
// goes on at the new one instead of starting anew.
func (r LossReport) respaced(from, to int) LossReport {
	lost := r.Expected - r.Received
	if r.Runs == 0 || from == to {
		return r
	}
	p := r.Loss()
	// The runs as counted: a part of a sample is not tested against
	// chance (runLength), the whole is when it is taken.
	within := spacedBurst(p, wireBurst(p, float64(lost)/float64(r.Runs), from), to)
	r.Runs = uint32(min(max(math.Round(float64(lost)/within), 1), float64(lost)))
	return r
}

// Path assumptions of TCPResidual: one inner flow of full-size segments
// (MSS 1360 bytes, what a 1410-byte inner MTU carries over IPv6) should
// still reach tcpGoal bits per second.
const (
	tcpMSSBits = 1360 * 8
	tcpGoal    = 1e9
)

// TCPResidual is the inner loss rate at which one loss-based TCP flow over
// a path of round-trip time rtt can still reach 1 Gbit/s: the larger of the
// rates CUBIC's response function (RFC 9438: C = 0.4, β = 0.7, average
// window 1.054·(RTT/p)^¾ segments) and the Reno-friendly one (Mathis:
// 1.22/√p segments per RTT) allow. On a LAN that is ~1e-4; at 50 ms,
// ~7e-7: a long path needs far less residual loss than a short one.
func TCPResidual(rtt time.Duration) float64 {
	t := rtt.Seconds()
	if t <= 0 {
		return 1
	}
	cubic := math.Pow(1.054*tcpMSSBits*math.Pow(t, -0.25)/tcpGoal, 4.0/3)
	reno := math.Pow(1.22*tcpMSSBits/(t*tcpGoal), 2)
	return math.Max(cubic, reno)
}

// ResidualLoss predicts the fraction of inner packets still lost after FEC
// with K:R under independent wire loss p: a group fails when more than R of
// its n=K+R symbols are lost, and then loses on average x·K/n of its K data
// symbols for x symbols lost, i.e. Σ_{x>R} Binom(n,x,p)·x/n.
func ResidualLoss(k, r int, p float64) float64 {
	if p <= 0 {
		return 0
	}
	if p >= 1 {
		return 1
	}
	n := k + r
	sum := 0.0
	for x := r + 1; x <= n; x++ {
		lc, _ := math.Lgamma(float64(n + 1))
		l1, _ := math.Lgamma(float64(x + 1))
		l2, _ := math.Lgamma(float64(n - x + 1))
		sum += math.Exp(lc-l1-l2+float64(x)*math.Log(p)+float64(n-x)*math.Log1p(-p)) * float64(x) / float64(n)
	}
	return sum
}

// ResidualLossBurst predicts the post-FEC inner loss of K:R under bursty
// wire loss: a Gilbert channel whose bad state loses every symbol and
// lasts burst symbols on average, with stationary loss p. The number of
// symbols of a group lost is counted exactly over the two-state chain
// (O((K+R)²)); a group fails when more than R are lost, losing x/n of its
// data as in ResidualLoss. burst ≤ 1 is independent loss (ResidualLoss),
// and so is a k:r the codec does not take (the chain's arrays are sized
// for MaxK+MaxR symbols).
func ResidualLossBurst(k, r int, p, burst float64) float64 {
	if !validRatio(k, r) {
		return ResidualLoss(k, r, p)
	}
	if burst <= 1 {
		return ResidualLoss(k, r, p)
	}
	var out [MaxR + 1]float64
	residuals(k, p, burst, out[:r+1])
	return out[r]
}

// residuals sets out[r] to the predicted residual loss of k:r for every r
// below len(out), independent or bursty, in one pass of the chain up to
// k+len(out)-1 symbols (the Adapter's candidates for one K cost one pass;
// ResidualLoss's closed form would cost O(r·k) log-gammas per K:R).
func residuals(k int, p, burst float64, out []float64) {
	if p <= 0 || p >= 1 {
		for r := range out {
			out[r] = ResidualLoss(k, r, p)
		}
		return
	}
	var g gilbert
	g.start(p, burst)
	for i := 1; ; i++ {
		if r := i - k; r >= 0 {
			out[r] = g.tail[r+1] / float64(i)
		}
		if i == k+len(out)-1 {
			return
		}
		g.step()
	}
}

// gilbert walks a Gilbert channel of stationary loss p and mean burst length
// burst (≤ 1: independent loss) one symbol at a time. After i symbols
// (start counts the first), tail[x] is Σ_{y≥x} P(y of the i lost)·y, so a
// group of i symbols that fails when more than r are lost loses
// tail[r+1]/i of them on average. It is a value type with methods, not a
// callback, so a walk stays on the caller's stack.
type gilbert struct {
	enter, leave float64
	i            int // symbols counted
	cur          int
	// st[buf][state][x]: probability of being in state (0 good, 1 bad)
	// after i symbols with x of them lost.
	st   [2][2][MaxK + MaxR + 2]float64
	tail [MaxK + MaxR + 3]float64
}

// start counts the first symbol, drawn from the stationary distribution.
func (g *gilbert) start(p, burst float64) {
	// Independent loss is the chain that enters and stays in the bad
	// state with the same probability p.
	g.leave = 1 - p
	if burst > 1 {
		g.leave = 1 / burst
	}
	g.enter = min(1, p*g.leave/(1-p)) // so that the bad state's share is p
	g.i, g.cur = 1, 0
	g.st[0][0][0], g.st[0][1][1] = 1-p, p
	g.sum()
}

// step counts one more symbol; at most MaxK+MaxR+1 may be counted. Locals
// and slices cut to length keep the loop free of loads through g and of
// bounds checks: this walk is most of what a loss report costs.
func (g *gilbert) step() {
	n := g.i + 1
	a0, a1 := g.st[g.cur][0][:n], g.st[g.cur][1][:n]
	b0, b1 := g.st[1-g.cur][0][:n+1], g.st[1-g.cur][1][:n+1]
	clear(b0)
	clear(b1)
	stay, enter, leave, keep := 1-g.enter, g.enter, g.leave, 1-g.leave
	for x := range a0 {
		gd, bd := a0[x], a1[x]
		b0[x] += gd*stay + bd*leave
		b1[x+1] += gd*enter + bd*keep
	}
	g.cur = 1 - g.cur
	g.i = n
	g.sum()
}

func (g *gilbert) sum() {
	n := g.i + 1
	s0, s1, t := g.st[g.cur][0][:n], g.st[g.cur][1][:n], g.tail[:n+1]
	acc := 0.0
	t[n] = 0
	for x := n - 1; x >= 0; x-- {
		acc += (s0[x] + s1[x]) * float64(x)
		t[x] = acc
	}
}

// partialParity sets out[n], for 1 ≤ n < len(out), to the least r in
// [minR, maxR] whose group of n data symbols is predicted to lose at most
// goal of its inner packets at wire loss p in bursts of mean length burst,
// or maxR if none is. With sparse (the lane's groups close early with a
// packet or two: a ping, a lone ACK) never more than n unless minR asks
// for more: at most one parity per data symbol, never more protection
// bytes than data. A busy lane's early groups (the end of a burst) keep
// what their loss needs. One walk of the chain serves every n and r.
func partialParity(p, burst, goal float64, minR, maxR int, out []uint8, sparse bool) {
	fill := maxR
	if p <= 0 {
		fill = minR
	}
	for n := range out {
		out[n] = uint8(fill)
		if sparse {
			out[n] = uint8(min(fill, max(n, minR)))
		}
	}
	if len(out) < 2 || p <= 0 || p >= 1 || minR >= maxR {
		return
	}
	var found [MaxK]bool
	var g gilbert
	g.start(p, burst)
	for i := 1; ; i++ {
		for r := minR; r <= maxR; r++ {
			// For one n, r grows with i: the first r found is the least.
			if n := i - r; n >= 1 && n < len(out) && !found[n] && (sparse && r >= n || g.tail[r+1]/float64(i) <= goal) {
				out[n], found[n] = uint8(r), true
			}
		}
		if i == len(out)-1+maxR {
			return
		}
		g.step()
	}
}
