package stage

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// Receiver is the receiving half of any client-streaming or bidirectional server stream.
type Receiver[T any] interface {
	Recv() (*T, error)
}

// RecvAll reads messages until the client half-closes.
func RecvAll[T any](r Receiver[T]) ([]*T, error) {
	var out []*T
	for {
		m, err := r.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
}

// Opener opens a client-streaming RPC of the next stage.
type Opener[T any] func(context.Context, ...grpc.CallOption) (grpc.ClientStreamingClient[T, katastromav1.StageSummary], error)

// Forward streams msgs to the next stage's client-streaming RPC, announcing their count and passing the lease
// on, and returns its summary.
func Forward[T any](ctx context.Context, open Opener[T], msgs []*T) (*katastromav1.StageSummary, error) {
	stream, err := open(pipeline.WithCount(pipeline.ForwardLease(ctx), len(msgs)))
	if err != nil {
		return nil, err
	}
	for _, m := range msgs {
		if err := stream.Send(m); err != nil {
			if errors.Is(err, io.EOF) {
				break // the server ended the call; CloseAndRecv reports why
			}
			return nil, err
		}
	}
	return stream.CloseAndRecv()
}

// Bidi sends msgs over a bidirectional stream while collecting every reply until the server ends the stream.
func Bidi[In, Out any](stream grpc.BidiStreamingClient[In, Out], msgs []*In) ([]*Out, error) {
	errc := make(chan error, 1)
	go func() {
		for _, m := range msgs {
			if err := stream.Send(m); err != nil {
				errc <- err
				return
			}
		}
		errc <- stream.CloseSend()
	}()
	var out []*Out
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
	if err := <-errc; err != nil && !errors.Is(err, io.EOF) {
		return out, err
	}
	return out, nil
}

// Transform is a stage's work on its whole input.
type Transform[In, Out any] func(ctx context.Context, in []*In) ([]*Out, error)

// ServeStream serves a stage's bidirectional RPC that needs its whole input (renderer, orderer): it receives
// until the client half-closes, transforms and streams the output back (inside the stage span of Server.stream).
func ServeStream[In, Out any](stream grpc.BidiStreamingServer[In, Out], f Transform[In, Out]) error {
	ctx := stream.Context()
	in, err := RecvAll(stream)
	if err != nil {
		return err
	}
	out, err := f(ctx, in)
	if err != nil {
		return err
	}
	for _, m := range out {
		if err := stream.Send(m); err != nil {
			return err
		}
	}
	return nil
}

// ServeForward serves a stage's client-streaming RPC: it receives the whole input, transforms it, forwards the
// output to next (nil ends the chain) and answers with a summary nesting next's (inside the stage span of
// Server.stream).
func ServeForward[In, Out any](name string, stream grpc.ClientStreamingServer[In, katastromav1.StageSummary],
	f Transform[In, Out], next Opener[Out]) error {
	ctx := stream.Context()
	in, err := RecvAll(stream)
	if err != nil {
		return err
	}
	out, err := f(ctx, in)
	if err != nil {
		return err
	}
	sum := &katastromav1.StageSummary{Stage: name, Objects: int32(len(out))}
	if next != nil {
		if sum.Downstream, err = Forward(ctx, next, out); err != nil {
			return err
		}
	}
	return stream.SendAndClose(sum)
}
