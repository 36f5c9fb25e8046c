package fec

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ModeKind is the shape of the `fec =` setting.
type ModeKind uint8

const (
	ModeOff   ModeKind = iota // no parity; symbols are still numbered
	ModeAuto                  // fixed K, R adapted to reported loss
	ModeFixed                 // fixed K:R
)

// Mode is a parsed `fec = off | auto | K:R` setting.
type Mode struct {
	Kind ModeKind
	K, R int // ModeFixed only
}

// ParseMode parses the config value. Errors say what was expected, since this
// is what an operator sees on a typo.
func ParseMode(s string) (Mode, error) {
	t := strings.TrimSpace(s)
	switch strings.ToLower(t) {
	case "off":
		return Mode{Kind: ModeOff}, nil
	case "auto":
		return Mode{Kind: ModeAuto}, nil
	}
	ks, rs, ok := strings.Cut(t, ":")
	if !ok {
		return Mode{}, fmt.Errorf("fec: %q: want off, auto or K:R (e.g. 16:4)", s)
	}
	k, errK := strconv.Atoi(ks)
	r, errR := strconv.Atoi(rs)
	if errK != nil || errR != nil {
		return Mode{}, fmt.Errorf("fec: %q: K and R must be decimal integers", s)
	}
	if k < 1 || k > MaxK {
		return Mode{}, fmt.Errorf("fec: %q: K must be 1..%d", s, MaxK)
	}
	if r < 0 || r > MaxR {
		return Mode{}, fmt.Errorf("fec: %q: R must be 0..%d", s, MaxR)
	}
	return Mode{Kind: ModeFixed, K: k, R: r}, nil
}

func (m Mode) String() string {
	switch m.Kind {
	case ModeOff:
		return "off"
	case ModeAuto:
		return "auto"
	}
	return strconv.Itoa(m.K) + ":" + strconv.Itoa(m.R)
}

// AdaptConfig tunes ModeAuto. Zero fields take the defaults.
type AdaptConfig struct {
	// K is the group size in auto mode (default 16). Larger K buys the
	// same protection for less overhead but delays recovery and flushes
	// more often at low rates; 16 meets the 5%-loss target at 25%.
	K int
	// MinR and MaxR are the floor and ceiling for R (default 1 and 8). The
	// floor stays ≥1 so loss remains measurable on a clean path.
	MinR, MaxR int
	// Target is the post-FEC inner loss the rule aims for (default 0.001).
	Target float64
	// MinExpected: reports smaller than this are merged with the next one
	// instead of acted on, so an idle lane's 1-of-3 blip does not max R
	// (default 200 symbols).
	MinExpected uint32
}

// DefaultAdaptConfig is what a zero AdaptConfig means.
var DefaultAdaptConfig = AdaptConfig{K: 16, MinR: 1, MaxR: 8, Target: 0.001, MinExpected: 200}

var errAdaptConfig = errors.New("fec: adapt config out of range")

// Adapter picks K:R for a lane's encoder from its peer's loss reports.
//
// Rule (ModeAuto): keep p, an exponentially weighted average (weight ½) of
// the reported wire loss, and choose the smallest R in [MinR, MaxR] whose
// predicted post-FEC loss ResidualLoss(K, R, max(p, latest)) is ≤ Target.
// Taking the max with the latest report raises R on the first bad report;
// lowering R goes one step per report and only when the lower R would still
// predict ≤ Target/2, so R does not flap on noise. If no R reaches Target,
// MaxR is used. ModeFixed and ModeOff ignore reports.
type Adapter struct {
	mode    Mode
	cfg     AdaptConfig
	k, r    int
	p       float64
	primed  bool
	pending LossReport
}

// NewAdapter returns an adapter starting at the mode's ratio (for auto, K:MinR
// plus one step of margin until the first report).
func NewAdapter(m Mode, cfg AdaptConfig) (*Adapter, error) {
	def := DefaultAdaptConfig
	if cfg.K == 0 {
		cfg.K = def.K
	}
	if cfg.MinR == 0 {
		cfg.MinR = def.MinR
	}
	if cfg.MaxR == 0 {
		cfg.MaxR = max(def.MaxR, cfg.MinR)
	}
	if cfg.Target == 0 {
		cfg.Target = def.Target
	}
	if cfg.MinExpected == 0 {
		cfg.MinExpected = def.MinExpected
	}
	if !validRatio(cfg.K, cfg.MaxR) || cfg.MinR < 1 || cfg.MinR > cfg.MaxR ||
		!(cfg.Target > 0 && cfg.Target < 1) {
		return nil, errAdaptConfig
	}
	a := &Adapter{mode: m, cfg: cfg}
	switch m.Kind {
	case ModeOff:
		a.k, a.r = cfg.K, 0
	case ModeFixed:
		if !validRatio(m.K, m.R) {
			return nil, ErrRatio
		}
		a.k, a.r = m.K, m.R
	default:
		a.k, a.r = cfg.K, min(cfg.MinR+1, cfg.MaxR)
	}
	return a, nil
}

// Ratio is the K:R the encoder should use for its next group.
func (a *Adapter) Ratio() (k, r int) { return a.k, a.r }

// Observe feeds one peer report and returns the (possibly new) ratio.
func (a *Adapter) Observe(rep LossReport) (k, r int) {
	if a.mode.Kind != ModeAuto {
		return a.k, a.r
	}
	a.pending = a.pending.Add(rep)
	if a.pending.Expected < a.cfg.MinExpected {
		return a.k, a.r
	}
	latest := a.pending.Loss()
	a.pending = LossReport{}
	if a.primed {
		a.p = (a.p + latest) / 2
	} else {
		a.p, a.primed = latest, true
	}
	p := math.Max(a.p, latest)
	want := a.cfg.MaxR
	for r := a.cfg.MinR; r <= a.cfg.MaxR; r++ {
		if ResidualLoss(a.k, r, p) <= a.cfg.Target {
			want = r
			break
		}
	}
	switch {
	case want > a.r:
		a.r = want
	case want < a.r && ResidualLoss(a.k, a.r-1, p) <= a.cfg.Target/2:
		a.r--
	}
	return a.k, a.r
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
