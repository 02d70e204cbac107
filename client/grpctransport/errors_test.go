package grpctransport

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Each gRPC code is classified as the HTTP status it stands for, and a
// retry-after trailer becomes RetryAfter.
func TestErrorClassification(t *testing.T) {
	cc, err := grpc.NewClient("127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	g := &transport{cc: cc}
	for _, tc := range []struct {
		err       error
		trailer   metadata.MD
		status    int
		code      string
		field     string
		retryable bool
		after     time.Duration
	}{
		{status.Error(codes.InvalidArgument, "count: 0 is out of range"), nil, http.StatusBadRequest, "invalid_argument", "count", false, 0},
		{status.Error(codes.InvalidArgument, "the request is bad"), nil, http.StatusBadRequest, "invalid_argument", "", false, 0},
		{status.Error(codes.NotFound, "key: no key called \"x\""), nil, http.StatusNotFound, "unknown_key", "", false, 0},
		{status.Error(codes.Unauthenticated, "no token"), nil, http.StatusUnauthorized, "unauthorized", "", false, 0},
		{status.Error(codes.PermissionDenied, "not yours"), nil, http.StatusForbidden, "forbidden", "", false, 0},
		{status.Error(codes.ResourceExhausted, "busy"), metadata.Pairs("retry-after", "7"), http.StatusTooManyRequests, "ResourceExhausted", "", true, 7 * time.Second},
		{status.Error(codes.Unavailable, "down"), metadata.Pairs("retry-after", "soon"), http.StatusServiceUnavailable, "Unavailable", "", true, 0},
		{errors.New("not a status"), nil, http.StatusServiceUnavailable, "Unknown", "", true, 0},
	} {
		e := g.err(tc.err, tc.trailer)
		if e.Status != tc.status || e.Code != tc.code || e.Field != tc.field || e.Retryable != tc.retryable || e.RetryAfter != tc.after || !errors.Is(e, tc.err) {
			t.Errorf("err(%v, %v) = %+v; want status %d, code %q, field %q, retryable %v, retry after %v, wrapping it", tc.err, tc.trailer, e, tc.status, tc.code, tc.field, tc.retryable, tc.after)
		}
	}
}
