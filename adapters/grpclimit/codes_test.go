package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestHTTPStatus: the status Limiter.Finish is told for each code, as
// grpc-gateway maps it, and for errors that carry no status, the code
// the server sends for them.
func TestHTTPStatus(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want int
	}{
		{nil, 200},
		{status.Error(codes.OK, ""), 200},
		{status.Error(codes.Canceled, ""), 499},
		{status.Error(codes.Unknown, ""), 500},
		{status.Error(codes.InvalidArgument, ""), 400},
		{status.Error(codes.DeadlineExceeded, ""), 504},
		{status.Error(codes.NotFound, ""), 404},
		{status.Error(codes.AlreadyExists, ""), 409},
		{status.Error(codes.PermissionDenied, ""), 403},
		{status.Error(codes.ResourceExhausted, ""), 429},
		{status.Error(codes.FailedPrecondition, ""), 400},
		{status.Error(codes.Aborted, ""), 409},
		{status.Error(codes.OutOfRange, ""), 400},
		{status.Error(codes.Unimplemented, ""), 501},
		{status.Error(codes.Internal, ""), 500},
		{status.Error(codes.Unavailable, ""), 503},
		{status.Error(codes.DataLoss, ""), 500},
		{status.Error(codes.Unauthenticated, ""), 401},
		{fmt.Errorf("wrapped: %w", status.Error(codes.NotFound, "")), 404},
		{context.Canceled, 499},
		{fmt.Errorf("reading: %w", context.DeadlineExceeded), 504},
		{errors.New("a plain error"), 500},
	} {
		if got := httpStatus(tt.err); got != tt.want {
			t.Errorf("httpStatus(%v): got %d, want %d", tt.err, got, tt.want)
		}
	}
}
