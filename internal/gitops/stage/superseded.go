package stage

import (
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Superseded marks work a newer event took over: the source target's lease moved on, so this event stopped
// before its next write. It is final, not a failure: nothing is retried or replayed for it.
const (
	// ReasonSuperseded is the google.rpc.ErrorInfo reason on a superseded status.
	ReasonSuperseded = "SUPERSEDED"
	// ErrorDomain is the google.rpc.ErrorInfo domain of the pipeline's own reasons.
	ErrorDomain = "katastroma.org"
	// AttrSuperseded is set (true) on the span of a stage or event that ended superseded.
	AttrSuperseded = "katastroma.superseded"
)

// Superseded returns the status of superseded work: Aborted with an ErrorInfo saying so, which survives wrapping
// and every hop between the stages.
func Superseded(msg string) error {
	st, err := status.New(codes.Aborted, msg).WithDetails(&errdetails.ErrorInfo{Reason: ReasonSuperseded,
		Domain: ErrorDomain})
	if err != nil {
		return status.Error(codes.Aborted, msg)
	}
	return st.Err()
}

// IsSuperseded reports whether err (or an error it wraps) is a superseded status, whatever its code.
func IsSuperseded(err error) bool {
	if err == nil {
		return false
	}
	var gs interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &gs) {
		return false
	}
	for _, d := range gs.GRPCStatus().Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == ReasonSuperseded &&
			info.GetDomain() == ErrorDomain {
			return true
		}
	}
	return false
}

func supersededAttr() attribute.KeyValue { return attribute.Bool(AttrSuperseded, true) }
