package client

import (
	"errors"
	"net/http"

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
