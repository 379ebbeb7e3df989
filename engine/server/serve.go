package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/baton-dev/baton/engine/handoff"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
)

// forceStopAfter is how long a drain waits for cancelled requests before it
// closes every stream.
const forceStopAfter = 2 * time.Second

// drainOverrunGrace is how long after forceStopAfter the in-flight
// requests may still take to return before the drain counts as having
// missed its deadline (S-4: the process exits 0 only after a clean drain
// within its drain deadline): their handlers' own unwinding once their
// streams closed.
const drainOverrunGrace = 3 * time.Second

// MaxMessageBytes bounds a received gRPC message (64 MiB): above the media
// limits, so oversize media get the engine's own L-6 answer.
const MaxMessageBytes = 64 << 20

// Server is a running engine with its gRPC server.
type Server struct {
	// Engine is the engine every RPC of this server is answered by.
	Engine *Engine
	grpc   *grpc.Server
	health *health.Server
	lis    net.Listener
}

// NewServer builds the engine and registers openengine.v1 Inference and
// Control, grpc.health.v1 and reflection on one gRPC server. Every RPC goes
// through the engine's interceptors (observe.go): W3C traceparent in, JSON
// log line with rule, request_id and trace_id for every rejection, metrics.
// grpc.health.v1 (service "") mirrors Health on every change (CONTRACT
// SE-5): SERVING only while READY, NOT_SERVING while STARTING, NOT_READY
// or DRAINING.
func NewServer(cfg Config, lis net.Listener, log *slog.Logger) (*Server, error) {
	if cfg.AdvertiseControl == "" {
		cfg.AdvertiseControl = lis.Addr().String()
	}
	e, err := New(cfg, withRequestLogging(log))
	if err != nil {
		return nil, err
	}
	opts := append(e.serverOptions(), grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.KeepaliveEnforcementPolicy(peerKeepaliveEnforcement),
		grpc.ConnectionTimeout(e.cfg.HandshakeTimeout))
	if e.sec.server != nil {
		// SE-1: TLS (and, with a client CA, mTLS: a peer without a valid
		// certificate fails the handshake before any handler runs).
		opts = append(opts, grpc.Creds(credentials.NewTLS(e.sec.server)))
	}
	opts = append(opts, newDecodeGuard().serverOptions(e)...)
	gs := grpc.NewServer(opts...)
	pb.RegisterInferenceServer(gs, &inference{e: e})
	pb.RegisterControlServer(gs, &control{e: e})
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)
	e.forceStop = gs.Stop
	if !cfg.Hooks.StaticGRPCHealth {
		e.mu.Lock()
		e.onHealth = func(st handoff.HealthState) { hs.SetServingStatus("", servingStatus(st)) }
		e.mu.Unlock()
	}
	e.healthChanged()
	return &Server{Engine: e, grpc: gs, health: hs, lis: lis}, nil
}

// servingStatus is grpc.health.v1's answer for a Health state (SE-5).
func servingStatus(st handoff.HealthState) healthpb.HealthCheckResponse_ServingStatus {
	if st == handoff.HealthReady {
		return healthpb.HealthCheckResponse_SERVING
	}
	return healthpb.HealthCheckResponse_NOT_SERVING
}

// Run serves until ctx ends (SIGTERM: the same path as an accepted
// Shutdown, S-1) or Shutdown is accepted, then drains: Health DRAINING, new
// Generate UNAVAILABLE, in-flight requests finish or are cancelled at the
// drain deadline, unconsumed outputs are released, cleanup completes, the
// instance directory is removed (S-2, S-4). It returns nil only after a clean
// drain; the process should then exit 0.
func (s *Server) Run(ctx context.Context) error {
	e := s.Engine
	if e.cfg.Hooks.StaticGRPCHealth {
		s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING) // the SE-5 mutant: set once
	}
	e.healthChanged()
	serveErr := make(chan error, 1)
	go func() { serveErr <- s.grpc.Serve(s.lis) }()
	collect := time.NewTicker(e.cfg.CollectInterval)
	defer collect.Stop()
	e.log.Info("serving", "address", s.lis.Addr().String(), "preset", e.preset.Name)
	if tcp, ok := s.lis.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() && !e.cfg.Security.authorizationOn() {
		// Attack O1 (stop 22): without SE-2's authorization anyone who can
		// reach the port is an operator.
		e.log.Warn("SE-2 authorization is off on a non-loopback address: any client that reaches it may call Shutdown and Abort(all_requests); set --operator-token-file or --operator-identity", "address", s.lis.Addr().String())
	}
	var timeout time.Duration
loop:
	for {
		select {
		case <-collect.C:
			e.collect()
		case timeout = <-e.shutdown:
			break loop
		case <-ctx.Done():
			e.mu.Lock()
			e.health.StartDrain()
			e.mu.Unlock()
			e.healthChanged()
			timeout = e.cfg.DrainTimeout
			e.log.Info("S-1 signal: draining as for an accepted Shutdown")
			break loop
		case err := <-serveErr:
			return fmt.Errorf("server: serve: %w", err)
		}
	}
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	err := e.Drain(timeout)
	// Keep answering Control briefly so a repeated Shutdown sees
	// ALREADY_SHUTTING_DOWN and Health DRAINING, then stop.
	linger := time.NewTimer(e.cfg.ShutdownLinger)
	select {
	case <-linger.C:
	case <-serveErr:
		// The listener stopped already: the drain closed every stream to
		// free requests blocked on clients that never read. The drain's
		// own result still decides (S-4).
	}
	stopped := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		s.grpc.Stop()
	}
	if err != nil {
		e.log.Error("S-4 drain failed", "err", err)
		return err
	}
	e.log.Info("S-4 drained cleanly")
	return nil
}

// Drain waits for in-flight requests (cancelling them at timeout), releases
// unconsumed entries and removes the instance directory (S-2, S-4). It runs
// once; later calls return the first result.
func (e *Engine) Drain(timeout time.Duration) error {
	e.drainOnce.Do(func() {
		e.mu.Lock()
		e.health.StartDrain()
		e.mu.Unlock()
		e.healthChanged()
		done := make(chan struct{})
		go func() { e.running.Wait(); close(done) }()
		start := time.Now()
		var overrun error
		select {
		case <-done:
		case <-time.After(timeout):
			e.log.Warn("S-2 drain deadline passed; cancelling in-flight requests")
			e.mu.Lock()
			for _, cancel := range e.requests {
				cancel()
			}
			e.mu.Unlock()
			select {
			case <-done:
			case <-time.After(forceStopAfter):
				// A request blocked in a send to a client that never reads
				// ignores its cancellation; closing every stream frees it (S-2).
				e.log.Warn("S-2 requests still blocked after cancellation; closing all streams")
				if e.forceStop != nil {
					e.forceStop()
				}
				<-done
				if late := time.Since(start) - timeout - forceStopAfter; late > drainOverrunGrace {
					// Something no cancellation reaches (a decode, attack F2 of
					// stop 22) kept a request: the drain missed its deadline.
					overrun = fmt.Errorf("server: S-4 in-flight requests ended %v after the drain deadline (%v) and the streams' closing", late.Round(time.Millisecond), timeout)
				}
			}
		}
		execErr := e.exec.drain()
		e.drainErr = e.drainProducer()
		if e.drainErr == nil {
			e.drainErr = execErr
		}
		if e.drainErr == nil {
			e.drainErr = overrun
		}
		e.kvDriver().Drain() // E+P+D: P's KV sessions nobody fetched
		e.producers.close()
		if e.agent != nil {
			if err := e.agent.Close(); err != nil && e.drainErr == nil {
				e.drainErr = err
			}
		}
		e.mu.Lock()
		if e.receives.Inflight() != 0 && e.drainErr == nil {
			e.drainErr = errors.New("server: S-4 receives still in flight after drain")
		}
		e.mu.Unlock()
		e.drainErr = e.collectGPU(e.drainErr) // S-3, last: never hides an earlier failure
		close(e.drained)
	})
	<-e.drained
	return e.drainErr
}

// ServeMetrics serves the engine's Prometheus metrics at GET /metrics on lis
// (other paths answer 404) until the returned stop function runs; call it
// after Run, so a scrape during the drain still answers. With TLS on the
// listener serves TLS with the engine's configuration, client
// authentication included (CONTRACT SE-1: every listener). ServerInfo
// then names the address (extra "baton.listeners.metrics").
func (s *Server) ServeMetrics(lis net.Listener) (stop func()) {
	e := s.Engine
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", e.MetricsHandler())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(e.log.Handler(), slog.LevelDebug)}
	addr := lis.Addr().String()
	if e.sec.server != nil && !e.cfg.Hooks.PlaintextMetrics {
		lis = tls.NewListener(lis, e.sec.server)
	}
	e.mu.Lock()
	e.metricsAddr = addr
	e.mu.Unlock()
	go func() {
		if err := hs.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			e.log.Error("metrics server stopped", "err", err)
		}
	}()
	e.log.Info("serving metrics", "address", addr, "path", "/metrics", "tls", e.sec.server != nil && !e.cfg.Hooks.PlaintextMetrics)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	}
}
