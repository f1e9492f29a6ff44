package grpclimit

import (
	"cmp"
	"context"
	"errors"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// httpStatus is the HTTP status of a call that ended with err, for
// Limiter.Finish (what ratelimit.WithCountOnly counts by): the code the
// server sends for err, as grpc-gateway maps codes to statuses.
func httpStatus(err error) int {
	return cmp.Or(httpStatuses[codeOf(err)], http.StatusInternalServerError) // Unknown, Internal, DataLoss
}

var httpStatuses = map[codes.Code]int{
	codes.OK:                 http.StatusOK,
	codes.Canceled:           499, // a client that closed the request, as nginx says
	codes.InvalidArgument:    http.StatusBadRequest,
	codes.FailedPrecondition: http.StatusBadRequest,
	codes.OutOfRange:         http.StatusBadRequest,
	codes.DeadlineExceeded:   http.StatusGatewayTimeout,
	codes.NotFound:           http.StatusNotFound,
	codes.AlreadyExists:      http.StatusConflict,
	codes.Aborted:            http.StatusConflict,
	codes.PermissionDenied:   http.StatusForbidden,
	codes.Unauthenticated:    http.StatusUnauthorized,
	codes.ResourceExhausted:  http.StatusTooManyRequests,
	codes.Unimplemented:      http.StatusNotImplemented,
	codes.Unavailable:        http.StatusServiceUnavailable,
}

// codeOf is the code the server sends for a handler's err: OK for nil,
// the status err carries, or for another error Canceled or
// DeadlineExceeded when it is its context's, Unknown otherwise.
func codeOf(err error) codes.Code {
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	}
	return codes.Unknown
}
