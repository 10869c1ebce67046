package client

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
)

// codeStatus maps each Connect code to the HTTP status Fleet Management's errors are documented with.
var codeStatus = map[connect.Code]int{
	connect.CodeInvalidArgument:    http.StatusBadRequest,
	connect.CodeOutOfRange:         http.StatusBadRequest,
	connect.CodeNotFound:           http.StatusNotFound,
	connect.CodeAlreadyExists:      http.StatusConflict,
	connect.CodeAborted:            http.StatusConflict,
	connect.CodeFailedPrecondition: http.StatusPreconditionFailed,
	connect.CodePermissionDenied:   http.StatusForbidden,
	connect.CodeUnauthenticated:    http.StatusUnauthorized,
	connect.CodeResourceExhausted:  http.StatusTooManyRequests,
	connect.CodeCanceled:           http.StatusRequestTimeout,
	connect.CodeDeadlineExceeded:   http.StatusRequestTimeout,
	connect.CodeUnimplemented:      http.StatusNotImplemented,
	connect.CodeUnavailable:        http.StatusServiceUnavailable,
	connect.CodeInternal:           http.StatusInternalServerError,
	connect.CodeUnknown:            http.StatusInternalServerError,
	connect.CodeDataLoss:           http.StatusInternalServerError,
}

// HTTPStatus returns the HTTP status an error stands for: 200 for nil, the mapped status of a Connect error, and
// 500 for any other error.
func HTTPStatus(err error) int {
	if err == nil {
		return http.StatusOK
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return http.StatusInternalServerError
	}
	if s, ok := codeStatus[ce.Code()]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// IsTransient reports whether retrying later may succeed: 429, 408 and every 5xx.
func IsTransient(err error) bool {
	s := HTTPStatus(err)
	return err != nil && (s == http.StatusTooManyRequests || s == http.StatusRequestTimeout || s >= 500)
}

// IsNotFound reports a 404.
func IsNotFound(err error) bool { return err != nil && HTTPStatus(err) == http.StatusNotFound }

// IsRateLimited reports a 429.
func IsRateLimited(err error) bool {
	return err != nil && HTTPStatus(err) == http.StatusTooManyRequests
}

// IsInvalid reports a 400: the request will never succeed as it is.
func IsInvalid(err error) bool { return err != nil && HTTPStatus(err) == http.StatusBadRequest }

// IsUnauthenticated reports a 401.
func IsUnauthenticated(err error) bool {
	return err != nil && HTTPStatus(err) == http.StatusUnauthorized
}

// IsAlreadyExists reports a 409: a create found the name taken.
func IsAlreadyExists(err error) bool { return err != nil && HTTPStatus(err) == http.StatusConflict }

// RetryAfter is the delay a 429 asked for with a Retry-After header in whole seconds (0 when there is none or it
// cannot be read; an HTTP date is not used by Fleet Management). It is capped at maxRetryAfter so a bad header
// cannot park a reconcile for days.
func RetryAfter(err error) time.Duration {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return 0
	}
	return ParseRetryAfter(ce.Meta().Get("Retry-After"))
}

const maxRetryAfter = 10 * time.Minute

// ParseRetryAfter reads a Retry-After value in whole seconds; anything else is 0.
func ParseRetryAfter(v string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n <= 0 {
		return 0
	}
	// Compared in seconds: a huge value multiplied into a Duration would overflow to a negative one.
	if n >= int(maxRetryAfter/time.Second) {
		return maxRetryAfter
	}
	return time.Duration(n) * time.Second
}
