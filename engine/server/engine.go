package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/baton-dev/baton/engine/cache"
	"github.com/baton-dev/baton/engine/cache/memory"
	"github.com/baton-dev/baton/engine/cache/shareddir"
	"github.com/baton-dev/baton/engine/consumer"
	"github.com/baton-dev/baton/engine/encoder"
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/kvsession"
	"github.com/baton-dev/baton/engine/lm"
	"github.com/baton-dev/baton/engine/producer"
	"github.com/baton-dev/baton/engine/xfer"
)

// Engine is one reference-engine instance: the lifecycle core (producer table,
// consumer receives, health) behind a mutex held only while the core decides,
// plus the encoder, the language model and the shared directory.
type Engine struct {
	cfg         Config
	instanceID  string
	preset      encoder.Preset
	encoder     encoder.Encoder
	model       *lm.Model
	fsys        shareddir.FS
	store       cache.Store // producer only
	agent       xfer.Agent  // tcp transfer agent (producer with the tcp backend, consumers accepting tcp)
	producers   producerClients
	log         *slog.Logger
	now         func() time.Time
	metrics     *metrics           // Prometheus metrics (metrics.go)
	kv          kvsession.Sessions // E+P+D: P's KV sessions, D's attached sessions (engine/kvsession)
	gpu         gpuState           // the cuda_ipc backend's device (cudaipc.go)
	exec        *execDriver        // the in-engine encoder -> decoder handoff (executor.go)
	sec         *security          // TLS and authorization (security.go; SE-1, SE-2)
	decodes     *decodeBudget      // decode memory and CPU across requests (budget.go; SE-4)
	metricsAddr string             // where ServeMetrics serves, for ServerInfo ("" = not serving)

	// trustedProducers are the producer control endpoints (and, for D, P's
	// control endpoints and transfer agents) this engine may dial;
	// trustedConsumers the consumer transfer agents a tcp producer may
	// WRITE into (CONTRACT SE-3, trust.go).
	trustedProducers, trustedConsumers *peerTrust
	// logLimit bounds the rejection log lines per rule (observe.go).
	logLimit *logLimiter

	healthMu sync.Mutex // serializes healthChanged's updates (SE-5)
	// onHealth is told every change of Health (NewServer: grpc.health.v1, SE-5).
	onHealth func(handoff.HealthState)

	mu sync.Mutex // guards the fields below; never held across I/O
	// table and receives are the lifecycle core, each transition checked
	// under -tags invariants (engine/producer; engine/consumer). receives
	// also keeps the quarantines (memory a write may still touch, until
	// Q-6 ends it: quarantine.go); it has no lock of its own, e.mu guards
	// it.
	table    *producer.Table
	receives *consumer.Receives
	health   *handoff.Health
	requests map[string]context.CancelFunc
	owners   map[string]string // request id -> the caller that started it (SE-2)
	keys     map[string][]byte // consumer: producer instance id -> HMAC key
	// quarantinesEntered counts every quarantine ever entered:
	// one Q-6 may end before anyone looks (nothing was written and the
	// consumer closed its carriers), and this still shows it happened.
	quarantinesEntered int64
	running            sync.WaitGroup // Add only under mu while not draining
	runningN           int
	cleanups           int  // cleanup tasks in flight (encoder.cleanup.pending)
	storageFull        bool // the last entry write failed with ENOSPC (Health note cache_dir)
	// failRemoval marks entries published with the baton.cleanup_fail test
	// hook: their first removal reports a failure.
	failRemoval map[string]bool
	drainOnce   sync.Once
	drainErr    error
	drained     chan struct{}
	shutdown    chan time.Duration // Shutdown ACCEPTED -> the serve loop, with its drain timeout
	forceStop   func()             // closes every stream (set by NewServer); drain's last resort

	// removalEnded (under mu) is closed and cleared when a removal of an
	// entry ends, waking the releases that wait for one (handoff.ReleaseWait).
	removalEnded chan struct{}
	// releaseWaiting, when set (tests, under mu), is called each time a
	// release starts waiting for a removal in flight, without mu held.
	releaseWaiting func(id string)
}

// ErrConfig wraps every error of a Config New refuses (an unknown role,
// preset, backend or mode, a flag out of range): bad usage, not a failure
// of the engine (`baton serve` exits 3 for it).
var ErrConfig = errors.New("server: bad configuration")

// New starts an engine instance: a fresh random instance id, the encoder
// weights, the model and, for the encoder role, its directory and HMAC key in
// the shared directory.
func New(cfg Config, log *slog.Logger) (*Engine, error) {
	if err := cfg.fill(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sec, err := loadSecurity(cfg.Security, cfg.Hooks)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if sec.authorization && sec.server == nil {
		log.Warn("SE-2 authorization is on over plaintext: bearer tokens cross the network in the clear (add --tls-cert/--tls-key)")
	}
	preset, _ := encoder.PresetByName(cfg.Preset)
	arch, _ := lm.ArchitectureByName(cfg.ModelArchitecture) // checked by fill
	id, err := newInstanceID()
	if err != nil {
		return nil, err
	}
	trustedProducers, err := parseTrustList(cfg.TrustedProducers)
	if err != nil {
		return nil, fmt.Errorf("%w: --trusted-producers: %w", ErrConfig, err)
	}
	trustedConsumers, err := parseTrustList(cfg.TrustedConsumers)
	if err != nil {
		return nil, fmt.Errorf("%w: --trusted-consumers: %w", ErrConfig, err)
	}
	e := &Engine{
		cfg:        cfg,
		instanceID: id,
		preset:     preset,
		encoder:    encoder.NewCPU(preset, cfg.EncoderSeed),
		model:      lm.New(lm.Config{Seed: cfg.ModelSeed, Mutants: cfg.Hooks.Model, Architecture: arch}),
		fsys:       cfg.FS,
		log:        log.With("instance", id, "role", string(cfg.Role)),
		now:        time.Now,
		table: producer.New(handoff.ProducerConfig{
			QuotaBytes: cfg.ProducerQuotaBytes, DefaultTTLMs: cfg.DefaultTTL.Milliseconds(), MaxTTLMs: cfg.MaxTTL.Milliseconds(),
		}),
		receives: consumer.New(handoff.ConsumerConfig{InflightQuotaBytes: cfg.ConsumerQuotaBytes}),
		health:   handoff.NewHealth(),
		requests: map[string]context.CancelFunc{},
		owners:   map[string]string{},
		sec:      sec,
		decodes:  newDecodeBudget(cfg.DecodeBudget),
		keys:     map[string][]byte{},

		trustedProducers: trustedProducers,
		trustedConsumers: trustedConsumers,
		logLimit:         newLogLimiter(),
		failRemoval:      map[string]bool{},
		drained:          make(chan struct{}),
		shutdown:         make(chan time.Duration, 1),
	}
	if e.fsys == nil {
		e.fsys = shareddir.OSFS{}
	}
	e.exec = newExecDriver(e)
	e.metrics = newMetrics(e)
	e.producers.creds = sec.peerCredentials()
	if cfg.needsTransferAgent() {
		opts := xfer.TCPOptions{Options: xfer.Options{Name: id}, ListenAddress: cfg.TransferListen, WriteTimeout: cfg.TransferTimeout}
		if sec.server != nil || sec.peer != nil {
			// SE-1: the agent's data connections are TLS both ways.
			opts.Network = xfer.TLSNetwork{Server: sec.server, Client: sec.peer}
		}
		agent, err := xfer.NewTCP(opts)
		if err != nil {
			return nil, fmt.Errorf("server: start the tcp transfer agent: %w", err)
		}
		if cfg.wrapAgent != nil {
			agent = cfg.wrapAgent(agent)
		}
		e.agent = agent
	}
	if err := e.startGPU(); err != nil {
		if e.agent != nil {
			_ = e.agent.Close()
		}
		return nil, err
	}
	if cfg.Role == RoleEncoder && cfg.Backend == BackendTCP {
		store, err := memory.New(e.agent)
		if err != nil {
			return nil, err
		}
		e.store = store
	} else if cfg.Role == RoleEncoder && e.store == nil { // cuda_ipc: startGPU made the store
		// Crashed producers' directories go now (and later every
		// shareddir.SweepIntervalMs from the collector).
		dir, swept, err := shareddir.StartProducer(e.fsys, cfg.CacheDir, id, rand.Reader, e.now().UnixMilli(), cfg.Hooks.SkipDeadInstanceSweep)
		if err != nil {
			return nil, fmt.Errorf("server: open shared directory: %w", err)
		}
		if cfg.Hooks.ChmodCacheDir {
			if err := e.fsys.Chmod(cfg.CacheDir, 0o700); err != nil {
				return nil, fmt.Errorf("server: chmod the shared directory (hook ChmodCacheDir): %w", err)
			}
		}
		store := shareddir.Store{Dir: dir, Log: e.log, SkipSweep: cfg.Hooks.SkipDeadInstanceSweep}
		store.LogSweep(swept)
		e.store = store
	}
	e.health.Started()
	return e, nil
}

// InstanceID is this instance's random id (a lowercase UUID), new at every start.
func (e *Engine) InstanceID() string { return e.instanceID }

// Role is the engine's role.
func (e *Engine) Role() Role { return e.cfg.Role }

func newInstanceID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("server: instance id: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

// begin admits one Generate: it fails with ErrDraining once shutdown started
// (S-2) and with ErrCleanupFailed after a cleanup failure; otherwise it
// registers the request, started by owner (SE-2), for Abort(request_id) and
// the drain.
func (e *Engine) begin(requestID, owner string, cancel context.CancelFunc) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.health.Draining() {
		return fmt.Errorf("%w: S-2 shutting down", handoff.ErrDraining)
	}
	if err := e.health.Admit(); err != nil && !errors.Is(err, handoff.ErrQuarantined) {
		return err
	}
	if _, dup := e.requests[requestID]; dup {
		return errDuplicateRequest
	}
	e.requests[requestID] = cancel
	e.owners[requestID] = owner
	e.running.Add(1)
	e.runningN++
	return nil
}

func (e *Engine) end(requestID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.requests, requestID)
	delete(e.owners, requestID)
	e.runningN--
	e.running.Done()
}

// admitHandoff applies to a request that starts a handoff.
func (e *Engine) admitHandoff() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.health.Admit()
}

// failCleanup records a cleanup failure: sticky NOT_READY.
func (e *Engine) failCleanup(what string, err error) {
	e.mu.Lock()
	recorded := e.health.CleanupFailed(fmt.Sprintf("%s: %v", what, err), e.decisions()) // handoff decides
	e.mu.Unlock()
	if !recorded {
		e.log.Error("cleanup failed", "what", what, "err", err) // the X-1 mutant: logged and forgotten
		return
	}
	e.healthChanged()
	e.metrics.observeCleanupFailure()
	e.log.Error("X-1 cleanup failed; health NOT_READY until restart", "what", what, "err", err)
}
