package numfmt

import (
	"math"
	"testing"
)

func TestGroup(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0", 7: "7", 999: "999", 1000: "1,000", -1000: "-1,000", 12345: "12,345", -1234567: "-1,234,567",
		math.MaxInt64: "9,223,372,036,854,775,807", math.MinInt64: "-9,223,372,036,854,775,808",
	} {
		if got := Group(n); got != want {
			t.Errorf("Group(%d) = %q, want %q", n, got, want)
		}
	}
	if got := GroupDecimal("100000000000000000000"); got != "100,000,000,000,000,000,000" {
		t.Errorf("GroupDecimal of 1e20 = %q", got)
	}
}
