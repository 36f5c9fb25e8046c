package cpuplan

import (
	"slices"
	"testing"
)

func TestAffinityCPUs(t *testing.T) {
	mask, err := AffinityCPUs()
	if err != nil || len(mask) == 0 || !slices.IsSorted(mask) {
		t.Fatalf("affinity of this process: %v %v", mask, err)
	}
}
