package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// generateMethod is the full gRPC method name of Inference.Generate.
const generateMethod = "/openengine.v1.Inference/Generate"

// callInfo is what the interceptor knows of one RPC; it rides in the RPC's
// context so every log line made with that context names the request.
type callInfo struct {
	method    string
	requestID string // GenerateRequest.request_id / AbortRequest.request_id once read
}

type callKey struct{}

func callFromContext(ctx context.Context) *callInfo {
	ci, _ := ctx.Value(callKey{}).(*callInfo)
	return ci
}

// requestIDer is any request message with a request_id.
type requestIDer interface{ GetRequestId() string }

// beginCall opens the RPC's trace span (W3C traceparent from the incoming
// metadata, else a new trace) and puts it and the call info in ctx.
func beginCall(ctx context.Context, method string) (context.Context, *callInfo) {
	ci := &callInfo{method: method}
	ctx = ContextWithTrace(ctx, incomingTrace(ctx))
	return context.WithValue(ctx, callKey{}, ci), ci
}

// noteDroppedTracestate logs at debug level an incoming tracestate the
// engine dropped (not W3C well-formed, over MaxTracestateBytes or
// MaxTracestateMembers, or without a valid traceparent): it is neither
// kept nor forwarded on the request's behalf (parseTracestate, attack A2).
func (e *Engine) noteDroppedTracestate(ctx context.Context) {
	md, _ := metadata.FromIncomingContext(ctx)
	st := md.Get(TracestateKey)
	if len(st) == 0 {
		return
	}
	if tc, ok := TraceFromContext(ctx); ok && tc.State != "" {
		return
	}
	n := 0
	for _, v := range st {
		n += len(v)
	}
	e.log.DebugContext(ctx, "tracestate dropped: not forwarded (W3C trace-context: well-formed, at most 32 members and 512 bytes, with a valid traceparent)", "headers", len(st), "bytes", n)
}

// unaryInterceptor runs around every unary RPC: trace context in, request
// id noted, outcome logged and counted (endCall).
func (e *Engine) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, ci := beginCall(ctx, info.FullMethod)
	e.noteDroppedTracestate(ctx)
	if r, ok := req.(requestIDer); ok {
		ci.requestID = r.GetRequestId()
	}
	start := time.Now()
	resp, err := handler(ctx, req)
	e.endCall(ctx, ci, start, err)
	return resp, err
}

// streamInterceptor runs around every streaming RPC: the handler sees the
// traced context, and the request id is noted when the request is read.
func (e *Engine) streamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, ci := beginCall(ss.Context(), info.FullMethod)
	e.noteDroppedTracestate(ctx)
	start := time.Now()
	err := handler(srv, &observedStream{ServerStream: ss, ctx: ctx, call: ci})
	e.endCall(ctx, ci, start, err)
	return err
}

// observedStream gives the handler the traced context and notes the first
// request's request_id.
type observedStream struct {
	grpc.ServerStream
	ctx  context.Context
	call *callInfo
}

// Context implements grpc.ServerStream.
func (s *observedStream) Context() context.Context { return s.ctx }

// RecvMsg implements grpc.ServerStream.
func (s *observedStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if err == nil && s.call.requestID == "" {
		if r, ok := m.(requestIDer); ok {
			s.call.requestID = r.GetRequestId()
		}
	}
	return err
}

// endCall logs and counts how an RPC ended. EVERY rejection passes here, so
// every one is counted in baton_rejections_total{rule,code} and logged
// ("request rejected") with its rule (`rule`, "none" when no contract rule
// decided), code, request_id and trace_id, at most at the rate logLimiter
// allows per rule (dropped lines are reported as "suppressed" on the next
// one). INTERNAL, UNKNOWN and DATA_LOSS are logged at error level as
// "request failed"; a call the client cancelled is logged as "request
// cancelled" and not counted.
func (e *Engine) endCall(ctx context.Context, ci *callInfo, start time.Time, err error) {
	elapsed := time.Since(start)
	st := status.Convert(err)
	if ci.method == generateMethod {
		e.metrics.observeGenerate(elapsed, st.Code().String())
	}
	if err == nil {
		e.log.DebugContext(ctx, "request done", "method", ci.method, "duration_ms", elapsed.Milliseconds())
		return
	}
	rule := ruleNone
	var rej *rejection
	if errors.As(err, &rej) && rej.rule != "" {
		rule = rej.rule
	}
	if st.Code() != codes.Canceled {
		e.metrics.observeRejection(rule, st.Code().String())
	}
	ok, suppressed := true, uint64(0)
	if !e.cfg.Hooks.UnlimitedRejectionLog {
		ok, suppressed = e.logLimit.allow(rule)
	}
	if !ok {
		return // counted in the metrics; its line is one of the next line's "suppressed"
	}
	attrs := []any{"method", ci.method, "rule", rule, "code", st.Code().String(), "err", st.Message(), "duration_ms", elapsed.Milliseconds()}
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	switch st.Code() {
	case codes.Canceled:
		e.log.InfoContext(ctx, "request cancelled", attrs...)
	case codes.Internal, codes.Unknown, codes.DataLoss:
		e.log.ErrorContext(ctx, "request failed", attrs...)
	default:
		e.log.InfoContext(ctx, "request rejected", attrs...)
	}
}

// serverOptions are the interceptors NewServer installs.
func (e *Engine) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(e.unaryInterceptor),
		grpc.ChainStreamInterceptor(e.streamInterceptor),
	}
}

// contextHandler adds trace_id, span_id and request_id from the record's
// context to every log record made with one (slog's *Context methods).
type contextHandler struct{ inner slog.Handler }

// withRequestLogging wraps log's handler with contextHandler (nil stays nil).
func withRequestLogging(log *slog.Logger) *slog.Logger {
	if log == nil {
		return nil
	}
	if _, done := log.Handler().(contextHandler); done {
		return log
	}
	return slog.New(contextHandler{log.Handler()})
}

// Enabled implements slog.Handler.
func (h contextHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

// Handle implements slog.Handler.
func (h contextHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx != nil {
		if ci := callFromContext(ctx); ci != nil && ci.requestID != "" {
			r.AddAttrs(slog.String("request_id", ci.requestID))
		}
		if tc, ok := TraceFromContext(ctx); ok {
			r.AddAttrs(slog.String("trace_id", tc.TraceIDString()), slog.String("span_id", tc.SpanIDString()))
		}
	}
	return h.inner.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h contextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return contextHandler{h.inner.WithAttrs(attrs)}
}

// WithGroup implements slog.Handler.
func (h contextHandler) WithGroup(name string) slog.Handler {
	return contextHandler{h.inner.WithGroup(name)}
}

// Rejection logs are rate-limited per rule, so a flood of bad requests
// cannot fill the disk (6,000 bad references a second once wrote 47 MiB in
// 20 s): each rule may log logBurst lines at once and logPerSecond more
// every second; the lines it drops are counted and the next line of that
// rule carries the count as "suppressed". Metrics count every rejection.
const (
	logBurst     = 50
	logPerSecond = 10
)

// logLimiter is a token bucket per rule label.
type logLimiter struct {
	mu    sync.Mutex
	now   func() time.Time // the clock (tests set it with setClock)
	rules map[string]*logBucket
}

type logBucket struct {
	tokens     float64
	last       time.Time
	suppressed uint64
}

func newLogLimiter() *logLimiter { return &logLimiter{now: time.Now, rules: map[string]*logBucket{}} }

// setClock replaces the limiter's clock (tests).
func (l *logLimiter) setClock(now func() time.Time) {
	l.mu.Lock()
	l.now = now
	l.mu.Unlock()
}

// allow reports whether a line of rule may be logged now and, if so, how
// many lines of that rule were dropped since the last one.
func (l *logLimiter) allow(rule string) (bool, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b, ok := l.rules[rule]
	if !ok {
		b = &logBucket{tokens: logBurst, last: now}
		l.rules[rule] = b
	}
	if dt := now.Sub(b.last).Seconds(); dt > 0 {
		b.tokens = min(logBurst, b.tokens+dt*logPerSecond)
		b.last = now
	}
	if b.tokens < 1 {
		b.suppressed++
		return false, 0
	}
	b.tokens--
	n := b.suppressed
	b.suppressed = 0
	return true, n
}
