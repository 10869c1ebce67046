package telemetry

import (
	"context"
	"fmt"
	"strconv"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// NewLogger returns a JSON logger at the given level: debug, info, error, or a number (higher is more verbose,
// as in logr's V levels).
func NewLogger(level string, development bool) (logr.Logger, error) {
	var lvl zapcore.Level
	switch level {
	case "debug":
		lvl = zapcore.DebugLevel
	case "info", "":
		lvl = zapcore.InfoLevel
	case "error":
		lvl = zapcore.ErrorLevel
	default:
		v, err := strconv.Atoi(level)
		if err != nil || v < 0 {
			return logr.Logger{}, fmt.Errorf("--log-level %q: want debug, info, error or a verbosity number >= 0", level)
		}
		lvl = zapcore.Level(-v)
	}
	return zap.New(zap.UseDevMode(development), zap.JSONEncoder(), zap.Level(lvl)), nil
}

// WithSpanLogger returns ctx whose logger carries trace_id and span_id of the span active in ctx, so every line
// logged under that span can be joined with the trace.
func WithSpanLogger(ctx context.Context) context.Context {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ctx
	}
	logger := log.FromContext(ctx).WithValues("trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String())
	return log.IntoContext(ctx, logger)
}

// StartSpan starts a span from the named tracer and returns a context whose logger carries the span's IDs.
func StartSpan(ctx context.Context, tracer, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	ctx, span := Tracer(tracer).Start(ctx, name, trace.WithAttributes(attrs...))
	return WithSpanLogger(ctx), span
}

// EndSpan records err on the span, marking it failed, and ends it.
func EndSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
