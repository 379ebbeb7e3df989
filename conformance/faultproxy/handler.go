package faultproxy

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// anyStream describes every method: the proxy cannot know a method's shape,
// and a bidirectional stream carries unary and one-way streams alike.
var anyStream = &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}

// handle serves every call: decide its step, record it, apply it.
func (p *Proxy) handle(_ any, ss grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return status.Error(codes.Internal, "faultproxy: no method name on the stream")
	}
	rec := p.begin(method)
	defer p.update(rec, func(r *CallRecord) { r.Done = true })
	p.mu.Lock()
	step, index := rec.Step, rec.Index
	p.mu.Unlock()

	switch step.Fault {
	case FaultUnavailable:
		return status.Errorf(codes.Unavailable, "faultproxy: injected UNAVAILABLE (%s call %d)", method, index)
	case FaultInvalidArgument:
		return status.Errorf(codes.InvalidArgument, "faultproxy: injected INVALID_ARGUMENT without the before-write trailer (%s call %d)", method, index)
	case FaultDropRequest:
		return p.hold(ss.Context())
	}
	return p.forward(ss, method, rec, step)
}

// hold never answers: it returns once the caller's context ends (deadline or
// cancel) or the proxy closes; the caller never sees what it returns.
func (p *Proxy) hold(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	case <-p.baseCtx.Done():
		return status.Error(codes.Unavailable, "faultproxy: closed")
	}
}

// forward runs the call upstream and applies a reply-side step.
func (p *Proxy) forward(ss grpc.ServerStream, method string, rec *CallRecord, step Step) error {
	clientCtx := ss.Context()
	in, _ := metadata.FromIncomingContext(clientCtx)

	// FaultNone: the caller's cancellation reaches the upstream. Reply-side
	// faults: the upstream keeps the caller's deadline but not its
	// cancellation, so the request runs to completion upstream.
	var ctx context.Context
	var cancel context.CancelFunc
	switch {
	case step.Fault == FaultNone:
		ctx, cancel = context.WithCancel(clientCtx)
		stop := context.AfterFunc(p.baseCtx, cancel)
		defer stop()
	default:
		if dl, ok := clientCtx.Deadline(); ok {
			ctx, cancel = context.WithDeadline(p.baseCtx, dl)
		} else {
			ctx, cancel = context.WithCancel(p.baseCtx)
		}
	}
	defer cancel()
	ctx = metadata.NewOutgoingContext(ctx, forwardable(in))
	ctx = context.WithValue(ctx, recordKey{}, rec)

	cc := p.upstreamConn()
	if cc == nil {
		st := status.New(codes.Unavailable, "faultproxy: no upstream set")
		p.recordUpstream(rec, st, nil)
		return st.Err()
	}
	callOpts := []grpc.CallOption{
		grpc.ForceCodecV2(rawCodec{}),
		grpc.MaxCallRecvMsgSize(p.maxBytes),
		grpc.MaxCallSendMsgSize(p.maxBytes),
	}
	if sub := contentSubtype(in); sub != "" {
		callOpts = append(callOpts, grpc.CallContentSubtype(sub))
	}
	up, err := cc.NewStream(ctx, anyStream, method, callOpts...)
	if err != nil {
		st := status.Convert(err)
		p.recordUpstream(rec, st, nil)
		return st.Err()
	}
	p.update(rec, func(r *CallRecord) { r.Forwarded = true })

	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		pumpRequests(ss, up, cancel)
	}()

	// The reply side. Header returns nil for a trailers-only answer (an
	// error status with no headers), which is then passed on as such.
	deliver := step.Fault == FaultNone || step.Fault == FaultDelay
	header, _ := up.Header()
	var clientErr error
	if step.Fault == FaultDelay {
		if err := p.sleep(clientCtx, step.Delay); err != nil {
			deliver, clientErr = false, err
		}
	}
	if deliver && header != nil {
		if err := ss.SendHeader(forwardable(header)); err != nil {
			deliver, clientErr = false, err
		}
	}
	var st *status.Status
	for {
		f := new(frame)
		err := up.RecvMsg(f)
		if errors.Is(err, io.EOF) {
			st = status.New(codes.OK, "")
			break
		}
		if err != nil {
			st = status.Convert(err)
			break
		}
		if deliver {
			if err := ss.SendMsg(f); err != nil {
				// The caller is gone; stop the upstream only if it was the
				// transparent case (a reply-side fault lets it finish).
				deliver, clientErr = false, err
				if step.Fault == FaultNone {
					cancel()
				}
			}
		}
	}
	trailer := up.Trailer()
	p.recordUpstream(rec, st, trailer)

	switch step.Fault {
	case FaultDropReply:
		return p.hold(clientCtx)
	case FaultCutConnection:
		if pr, ok := peer.FromContext(clientCtx); ok && pr.Addr != nil {
			p.listener.cut(pr.Addr.String())
		}
		return status.Error(codes.Unavailable, "faultproxy: connection cut")
	}
	if clientErr != nil {
		return status.Convert(clientErr).Err()
	}
	ss.SetTrailer(forwardable(trailer))
	return st.Err()
}

// pumpRequests copies the caller's messages upstream until the caller
// half-closes (then half-closes upstream) or fails (then cancels upstream).
// It stops quietly when the upstream stream ends: the status comes from the
// reply side.
func pumpRequests(ss grpc.ServerStream, up grpc.ClientStream, cancel context.CancelFunc) {
	for {
		f := new(frame)
		if err := ss.RecvMsg(f); err != nil {
			if errors.Is(err, io.EOF) {
				up.CloseSend()
			} else {
				cancel()
			}
			return
		}
		if err := up.SendMsg(f); err != nil {
			return
		}
	}
}

// sleep waits d unless the caller's context ends or the proxy closes first
// (then it returns the reason as a status error).
func (p *Proxy) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	case <-p.baseCtx.Done():
		return status.Error(codes.Unavailable, "faultproxy: closed")
	}
}

// recordUpstream stores the upstream's final status and trailers.
func (p *Proxy) recordUpstream(rec *CallRecord, st *status.Status, trailer metadata.MD) {
	p.update(rec, func(r *CallRecord) {
		r.UpstreamDone = true
		r.UpstreamCode = st.Code()
		r.UpstreamMessage = st.Message()
		r.UpstreamTrailer = trailer.Copy()
	})
}
