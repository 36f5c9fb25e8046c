package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/yip-router/yip-router/crypto"
)

// MaxShards is the most shards a router runs: Shards = N takes 1..MaxShards
// and auto stops there. A handshake offers one lane per shard, and a lane
// offer holds at most crypto.MaxLanes of them.
const MaxShards = crypto.MaxLanes

// Shards is the [Interface] Shards key and `up --shards`: Auto (one shard
// per physical core of the CPU affinity mask, the default) or N shards on
// the first N CPUs of the mask. Valid values are Shards{Auto: true} and
// Shards{N: 1..MaxShards}; the zero value is not one (it prints as "0").
type Shards struct {
	Auto bool
	N    int // 1..MaxShards; 0 when Auto
}

// ParseShards reads "auto" (any case) or a number of shards 1..MaxShards,
// around spaces. The error names the value; the caller says where it came
// from.
func ParseShards(s string) (Shards, error) {
	t := strings.TrimSpace(s)
	if strings.EqualFold(t, "auto") {
		return Shards{Auto: true}, nil
	}
	n, err := strconv.ParseUint(t, 10, 32)
	if err != nil || n < 1 || n > MaxShards {
		return Shards{}, fmt.Errorf("%q: want auto or a number of shards 1..%d", s, MaxShards)
	}
	return Shards{N: int(n)}, nil
}

// Valid reports whether s is auto or 1..MaxShards shards.
func (s Shards) Valid() bool {
	if s.Auto {
		return s.N == 0
	}
	return s.N >= 1 && s.N <= MaxShards
}

// String is "auto" or the number, as ParseShards reads them.
func (s Shards) String() string {
	if s.Auto {
		return "auto"
	}
	return strconv.Itoa(s.N)
}
