package packaging

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

func debVersion(t *testing.T, describe string) (string, error) {
	t.Helper()
	out, err := exec.Command("./deb-version", describe).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// deb-version maps what git describe says to a Debian version: the tag,
// commits since it and the commit after a "+", a pre-release after a "~".
func TestDebVersion(t *testing.T) {
	valid := regexp.MustCompile(`^[0-9][A-Za-z0-9.+~]*$`) // upstream version, no revision
	for _, c := range []struct{ describe, want string }{
		{"v0.3.0", "0.3.0"},
		{"v0.3.0-5-gabc1234", "0.3.0+5.gabc1234"},
		{"v0.3.0-dirty", "0.3.0+0.dirty"},
		{"v0.3.0-5-gabc1234-dirty", "0.3.0+5.gabc1234.dirty"},
		{"v0.3.0-rc.1", "0.3.0~rc.1"},
		{"v0.3.0-rc.1-2-gabc1234", "0.3.0~rc.1+2.gabc1234"},
		{"v1.12.0-130-g0123456789ab", "1.12.0+130.g0123456789ab"},
		{"abc1234", "0.0.0+gabc1234"},
		{"abc1234-dirty", "0.0.0+gabc1234.dirty"},
		{"dev", "0.0.0+dev"},
	} {
		got, err := debVersion(t, c.describe)
		if err != nil || got != c.want {
			t.Errorf("%s: %q (%v), want %q", c.describe, got, err, c.want)
		}
		if !valid.MatchString(got) {
			t.Errorf("%s: %q is not a Debian version without revision", c.describe, got)
		}
	}
	for _, bad := range []string{"v1.2", "release-3", "v0.3.0_beta"} {
		if got, err := debVersion(t, bad); err == nil {
			t.Errorf("%s: %q, want a refusal", bad, got)
		}
	}
}

// The versions of a history sort in its order under dpkg's rules: a
// pre-release before its release, a release before the commits after it,
// those by their count, an untagged build before every tagged one.
func TestDebVersionOrder(t *testing.T) {
	dpkg, err := exec.LookPath("dpkg")
	if err != nil {
		t.Skip("dpkg missing: it compares the versions")
	}
	history := []string{"abc1234", "v0.1.0-rc.1", "v0.1.0-rc.1-3-gabc1234", "v0.1.0", "v0.1.0-dirty",
		"v0.1.0-2-gabc1234", "v0.1.0-10-gdef5678", "v0.2.0"}
	var prev string
	for _, d := range history {
		v, err := debVersion(t, d)
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		if prev != "" {
			if err := exec.Command(dpkg, "--compare-versions", prev, "lt", v).Run(); err != nil {
				t.Errorf("%s does not sort before %s (%s)", prev, v, d)
			}
		}
		prev = v
	}
}
