package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// answering is an endpoint that answers every request with body.
func answering(t *testing.T, body string) *httpTransport {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return &httpTransport{base: srv.URL, hc: srv.Client()}
}

// TestHTTPAnswersChecked: a 200 answer that does not match its request
// (another key, no IDs, more than asked, a range whose ends disagree with
// its count or wrap past the largest int64, a batch of the wrong size or
// without a strategy, a number among text IDs) is a malformed answer,
// retryable, and none of its IDs reaches a caller.
func TestHTTPAnswersChecked(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ name, body string }{
		{"another key", `{"key":"other","first":"1","last":"10","count":10}`},
		{"no IDs", `{"key":"order","first":"1","last":"0","count":0}`},
		{"no IDs, ends wrapped", `{"key":"order","first":"-9223372036854775808","last":"9223372036854775807","count":0}`},
		{"more than asked", `{"key":"order","first":"1","last":"11","count":11}`},
		{"count disagrees", `{"key":"order","first":"1","last":"5","count":10}`},
		{"wraps past int64", `{"key":"order","first":"9223372036854775800","last":"-9223372036854775807","count":10}`},
	} {
		first, count, _, err := answering(t, tc.body).rangeOf(ctx, "order", "", 10)
		var ce *Error
		if !errors.Is(err, errMalformed) || !errors.As(err, &ce) || !ce.Retryable {
			t.Errorf("range answer with %s: [%d, +%d), %v; want a retryable malformed answer", tc.name, first, count, err)
		}
	}
	if first, count, _, err := answering(t, `{"key":"order","first":"1","last":"10","count":10}`).rangeOf(ctx, "order", "", 10); err != nil || first != 1 || count != 10 {
		t.Fatalf("a good range answer: [%d, +%d), %v", first, count, err)
	}
	for _, tc := range []struct{ name, body string }{
		{"another key", `{"key":"other","strategy":"snowflake","ids":["1","2","3"]}`},
		{"no strategy", `{"key":"order","ids":["1","2","3"]}`},
		{"too few", `{"key":"order","strategy":"snowflake","ids":["1","2"]}`},
		{"too many", `{"key":"order","strategy":"snowflake","ids":["1","2","3","4"]}`},
		{"text among numbers", `{"key":"order","strategy":"snowflake","ids":["1","x","3"]}`},
	} {
		ids, text, _, err := answering(t, tc.body).ids(ctx, "order", "", 3)
		var ce *Error
		if !errors.Is(err, errMalformed) || !errors.As(err, &ce) || !ce.Retryable {
			t.Errorf("ids answer with %s: %v (text %v), %v; want a retryable malformed answer", tc.name, ids, text, err)
		}
	}
	if ids, text, _, err := answering(t, `{"key":"order","strategy":"ulid","ids":["01J","01K","01M"]}`).ids(ctx, "order", "", 3); err != nil || !text || ids != nil {
		t.Fatalf("a text key's answer: %v, text %v, %v; want text and no IDs", ids, text, err)
	}
}
