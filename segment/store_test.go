package segment_test

import (
	"errors"
	"math"
	"testing"
	"unicode/utf8"

	"github.com/idmint/idmint/segment"
)

func FuzzValidateKey(f *testing.F) {
	for _, s := range []string{"order", "", "a\x00", "\xff", string(make([]byte, 129)), "订单"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := segment.ValidateKey(key)
		if err != nil && !errors.Is(err, segment.ErrBadKey) {
			t.Fatalf("ValidateKey(%q) = %v, not ErrBadKey", key, err)
		}
		if err == nil && (key == "" || len(key) > segment.MaxKeyLen || !utf8.ValidString(key)) {
			t.Fatalf("ValidateKey accepted %q", key)
		}
	})
}

func TestValidateKeyInfo(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   segment.KeyInfo
		want error
	}{
		{segment.KeyInfo{Key: "a", Step: 1}, nil},
		{segment.KeyInfo{Key: "a", Step: segment.MaxStep, MaxID: math.MaxInt64}, nil},
		{segment.KeyInfo{Key: "", Step: 1}, segment.ErrBadKey},
		{segment.KeyInfo{Key: "a", Step: 0}, segment.ErrBadStep},
		{segment.KeyInfo{Key: "a", Step: segment.MaxStep + 1}, segment.ErrBadStep},
		{segment.KeyInfo{Key: "a", Step: 1, MaxID: -1}, segment.ErrBadMaxID},
	}
	for _, tt := range tests {
		got, err := segment.ValidateKeyInfo(tt.in)
		if !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
			t.Errorf("ValidateKeyInfo(%+v) = %v, want %v", tt.in, err, tt.want)
		}
		if err == nil && tt.in.MaxID == 0 && got.MaxID != segment.DefaultMaxID {
			t.Errorf("MaxID 0 became %d, want %d", got.MaxID, segment.DefaultMaxID)
		}
	}
	if segment.CanAdvance(math.MaxInt64-5, 6) || !segment.CanAdvance(math.MaxInt64-5, 5) || segment.CanAdvance(0, -1) {
		t.Error("CanAdvance is wrong at the edge of int64")
	}
}
