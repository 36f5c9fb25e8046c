package fec

import (
	"encoding/binary"
	"errors"
)

// LossReport is what a receiver tells its peer about one interval, so the
// peer's encoder can size R. Counts are in wire symbols (data and parity) of
// groups the decoder finished with during the interval: only finished groups
// have a known size, so the estimate lags by the window but never mistakes
// "not yet arrived" for "lost".
type LossReport struct {
	Expected    uint32 // symbols the finished groups consisted of
	Received    uint32 // distinct symbols of them that arrived
	Unrecovered uint32 // data symbols still missing after FEC
	// Runs counts the runs of consecutive symbols lost within those
	// groups (in sending order): lost symbols / Runs is the mean burst
	// length, which tells bursty loss from independent loss. Zero with
	// symbols lost: a peer that does not count them.
	Runs uint32
}

// Encoded sizes of a LossReport: LossReportLen with Runs, LossReportLenV1
// without (what peers that do not count runs send and read).
const (
	LossReportLen   = 16
	LossReportLenV1 = 12
)

// ErrLossReport is returned for a malformed encoded report.
var ErrLossReport = errors.New("fec: malformed loss report")

// Loss is the wire loss fraction in [0,1]; zero when nothing was expected.
func (r LossReport) Loss() float64 {
	if r.Expected == 0 || r.Received >= r.Expected {
		return 0
	}
	return float64(r.Expected-r.Received) / float64(r.Expected)
}

// Burst is the mean length of a run of lost symbols; 0 when unknown (no
// loss, or a peer that does not count runs).
func (r LossReport) Burst() float64 {
	if r.Runs == 0 || r.Received >= r.Expected {
		return 0
	}
	return float64(r.Expected-r.Received) / float64(r.Runs)
}

// Add merges two intervals.
func (r LossReport) Add(o LossReport) LossReport {
	return LossReport{
		Expected:    satAdd(r.Expected, o.Expected),
		Received:    satAdd(r.Received, o.Received),
		Unrecovered: satAdd(r.Unrecovered, o.Unrecovered),
		Runs:        satAdd(r.Runs, o.Runs),
	}
}

func satAdd(a, b uint32) uint32 {
	if s := a + b; s >= a {
		return s
	}
	return ^uint32(0)
}

// AppendBinary appends the fixed 16-byte big-endian encoding the router
// puts in its control frame: Expected, Received, Unrecovered, Runs. Its
// first LossReportLenV1 bytes are the encoding without Runs.
func (r LossReport) AppendBinary(b []byte) ([]byte, error) {
	b = binary.BigEndian.AppendUint32(b, r.Expected)
	b = binary.BigEndian.AppendUint32(b, r.Received)
	b = binary.BigEndian.AppendUint32(b, r.Unrecovered)
	b = binary.BigEndian.AppendUint32(b, r.Runs)
	return b, nil
}

// ParseLossReport decodes a report from the peer, with Runs
// (LossReportLen bytes) or without (LossReportLenV1). The frame is
// authenticated but the peer may be broken, so impossible combinations are
// rejected rather than fed to the adaptive rule.
func ParseLossReport(b []byte) (LossReport, error) {
	if len(b) != LossReportLen && len(b) != LossReportLenV1 {
		return LossReport{}, ErrLossReport
	}
	r := LossReport{
		Expected:    binary.BigEndian.Uint32(b[0:]),
		Received:    binary.BigEndian.Uint32(b[4:]),
		Unrecovered: binary.BigEndian.Uint32(b[8:]),
	}
	if len(b) == LossReportLen {
		r.Runs = binary.BigEndian.Uint32(b[12:])
	}
	if r.Received > r.Expected || r.Unrecovered > r.Expected-r.Received || r.Runs > r.Expected-r.Received {
		return LossReport{}, ErrLossReport
	}
	return r, nil
}

// Counted is how many symbols the next loss report counts so far.
func (d *Decoder) Counted() uint32 { return d.loss.Expected }

// TakeLossReport returns the counts since the previous call and starts a new
// interval.
func (d *Decoder) TakeLossReport() LossReport {
	r := d.loss
	d.loss = LossReport{}
	return r
}

// AtMost is r with its loss cut to at most p: the symbols lost beyond
// it count as received (and with them their unrecovered data), and its
// runs shrink in proportion, so the cut keeps the mean burst length. (Runs
// cut only to the symbols kept made every cut of more than 1 − 1/burst
// read as independent loss: runs within groups interleaved 4 deep are
// 1.5 symbols long on a channel losing in bursts of 4, and a cut by a
// third or more had the rule choose large groups at depth 1.)
func (r LossReport) AtMost(p float64) LossReport {
	lost := r.Expected - r.Received
	keep := uint32(p * float64(r.Expected))
	if lost <= keep {
		return r
	}
	r.Received = r.Expected - keep
	r.Unrecovered = min(r.Unrecovered, keep)
	r.Runs = uint32((uint64(r.Runs)*uint64(keep) + uint64(lost) - 1) / uint64(lost))
	return r
}
