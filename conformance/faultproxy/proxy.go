package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/stats"
)

// ErrInvalidOptions is returned (wrapped) by New for unusable Options (a
// negative MaxMessageBytes) and by New and SetUpstream for an upstream
// target gRPC cannot parse.
var ErrInvalidOptions = errors.New("faultproxy: invalid options")

// DefaultMaxMessageBytes is the largest request or reply message the proxy
// forwards when Options.MaxMessageBytes is 0: 64 MiB, above gRPC's 4 MiB
// default so large decode preparations (<= 2 MiB, CONTRACT L-2) and encoder
// payloads pass.
const DefaultMaxMessageBytes = 64 << 20

// Options configures a Proxy. The zero value listens on an ephemeral
// loopback port with no faults.
type Options struct {
	// ListenAddr is the TCP address the proxy serves on; "" means
	// "127.0.0.1:0" (an ephemeral port, see Proxy.Addr).
	ListenAddr string
	// Plan is the initial fault plan (see Proxy.SetPlan); zero: no faults.
	Plan Plan
	// MaxMessageBytes bounds each forwarded message in both directions, in
	// bytes; 0 means DefaultMaxMessageBytes.
	MaxMessageBytes int
	// UpstreamDialOptions are passed to grpc.NewClient for the upstream;
	// nil means insecure (plaintext) transport credentials. The proxy adds
	// its own stats handler to observe whether the upstream answered.
	UpstreamDialOptions []grpc.DialOption
}

// Proxy is a running fault proxy. It is safe for concurrent use.
type Proxy struct {
	server   *grpc.Server
	listener *trackingListener
	maxBytes int
	dialOpts []grpc.DialOption

	baseCtx    context.Context // cancelled by Close; parent of detached upstream calls
	baseCancel context.CancelFunc
	wg         sync.WaitGroup // request pumps
	closeOnce  sync.Once

	upMu     sync.Mutex
	upstream *grpc.ClientConn // nil: no upstream set yet

	mu      sync.Mutex
	plan    Plan
	epoch   *epoch
	changed chan struct{} // closed and replaced on every record change
}

// New starts a proxy that forwards to upstream (a gRPC target such as
// "127.0.0.1:7001"; "" means none yet: calls answer UNAVAILABLE until
// SetUpstream). It returns an error wrapping ErrInvalidPlan for a bad
// opts.Plan, ErrInvalidOptions for bad options or an unparsable upstream,
// or the listen error.
func New(upstream string, opts Options) (*Proxy, error) {
	if err := opts.Plan.Validate(); err != nil {
		return nil, err
	}
	if opts.MaxMessageBytes < 0 {
		return nil, fmt.Errorf("%w: MaxMessageBytes %d < 0", ErrInvalidOptions, opts.MaxMessageBytes)
	}
	p := &Proxy{
		maxBytes: opts.MaxMessageBytes,
		plan:     opts.Plan.clone(),
		epoch:    newEpoch(),
		changed:  make(chan struct{}),
	}
	if p.maxBytes == 0 {
		p.maxBytes = DefaultMaxMessageBytes
	}
	p.dialOpts = append([]grpc.DialOption(nil), opts.UpstreamDialOptions...)
	if opts.UpstreamDialOptions == nil {
		p.dialOpts = append(p.dialOpts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	p.dialOpts = append(p.dialOpts, grpc.WithStatsHandler(upstreamStats{p}))
	if upstream != "" {
		cc, err := p.dial(upstream)
		if err != nil {
			return nil, err
		}
		p.upstream = cc
	}
	addr := opts.ListenAddr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		if p.upstream != nil {
			p.upstream.Close()
		}
		return nil, fmt.Errorf("faultproxy: listen %s: %w", addr, err)
	}
	p.listener = newTrackingListener(l)
	p.baseCtx, p.baseCancel = context.WithCancel(context.Background())
	p.server = grpc.NewServer(
		grpc.UnknownServiceHandler(p.handle),
		grpc.ForceServerCodecV2(rawCodec{}),
		grpc.MaxRecvMsgSize(p.maxBytes),
		grpc.MaxSendMsgSize(p.maxBytes),
		grpc.WaitForHandlers(true),
		// Callers' keepalive pings are answered, not punished with
		// GOAWAY: a transparent proxy closes no connection its upstream
		// would keep (consumers end quarantines when connections close).
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: time.Second, PermitWithoutStream: true}),
	)
	go p.server.Serve(p.listener) //nolint:errcheck // returns when Close stops the server
	return p, nil
}

func (p *Proxy) dial(upstream string) (*grpc.ClientConn, error) {
	cc, err := grpc.NewClient(upstream, p.dialOpts...)
	if err != nil {
		return nil, fmt.Errorf("%w: upstream %q: %v", ErrInvalidOptions, upstream, err)
	}
	return cc, nil
}

// Addr returns the proxy's listening address ("127.0.0.1:PORT"): what the
// producer advertises as its control endpoint.
func (p *Proxy) Addr() string { return p.listener.Addr().String() }

// SetUpstream points the proxy at a new upstream target; calls already in
// flight on the old one fail (their callers see UNAVAILABLE or CANCELLED).
// It lets a harness start the proxy, advertise Addr, then start the producer.
// Replacing an upstream also closes every caller connection, as the
// replaced instance's own connections closed with it: a transparent proxy
// keeps no connection alive that the upstream's end would have ended (a
// consumer waits for those to close before it ends a quarantine, CONTRACT
// Errors wrap ErrInvalidOptions.
func (p *Proxy) SetUpstream(upstream string) error {
	var cc *grpc.ClientConn
	if upstream != "" {
		var err error
		if cc, err = p.dial(upstream); err != nil {
			return err
		}
	}
	p.upMu.Lock()
	old := p.upstream
	p.upstream = cc
	p.upMu.Unlock()
	if old != nil {
		old.Close()
		p.listener.cutAll()
	}
	return nil
}

// Refuse makes the proxy's address refuse connections (the port is
// unbound: connect(2) fails with ECONNREFUSED) and closes every caller
// connection, until Listen: a producer endpoint that refuses connections,
// for the consumer's definite outcome of CONTRACT Q-2.
func (p *Proxy) Refuse() { p.listener.refuse() }

// Listen binds the proxy's address again after Refuse. Errors: the port
// was taken meanwhile, or the proxy is closed.
func (p *Proxy) Listen() error { return p.listener.listen() }

func (p *Proxy) upstreamConn() *grpc.ClientConn {
	p.upMu.Lock()
	defer p.upMu.Unlock()
	return p.upstream
}

// SetPlan replaces the fault plan, effective for calls that arrive after it
// returns; it restarts every method's call Index at 0 and starts a new,
// empty record list (calls in flight finish under their old step and are
// not listed). It returns an error wrapping ErrInvalidPlan and keeps the old
// plan if plan is invalid. The plan is copied.
func (p *Proxy) SetPlan(plan Plan) error {
	if err := plan.Validate(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.plan = plan.clone()
	p.epoch = newEpoch()
	p.notifyLocked()
	return nil
}

// Close stops the proxy: it stops listening, closes every caller connection
// (calls in flight end; their callers see UNAVAILABLE), cancels the upstream
// calls, waits for every goroutine the proxy started, and closes the
// upstream connection. It is idempotent.
func (p *Proxy) Close() {
	p.closeOnce.Do(func() {
		p.baseCancel()
		p.server.Stop()
		p.wg.Wait()
		if cc := p.upstreamConn(); cc != nil {
			cc.Close()
		}
	})
}

// upstreamStats marks a call's record UpstreamReached when the upstream
// server's headers or status arrive.
type upstreamStats struct{ p *Proxy }

type recordKey struct{}

// TagRPC returns ctx unchanged: the call's record is already in ctx
// (recordKey).
func (upstreamStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

// HandleRPC marks the call's record UpstreamReached when the upstream's headers
// or trailer arrive.
func (h upstreamStats) HandleRPC(ctx context.Context, s stats.RPCStats) {
	switch s.(type) {
	case *stats.InHeader, *stats.InTrailer:
		if rec, ok := ctx.Value(recordKey{}).(*CallRecord); ok {
			h.p.update(rec, func(r *CallRecord) { r.UpstreamReached = true })
		}
	}
}

// TagConn returns ctx unchanged.
func (upstreamStats) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

// HandleConn ignores connection events.
func (upstreamStats) HandleConn(context.Context, stats.ConnStats) {}
