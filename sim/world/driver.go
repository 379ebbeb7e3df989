package world

import (
	"fmt"

	"github.com/baton-dev/baton/engine/handoff"
)

// Driver runs a fault-free world one client call at a time, for adapters
// that answer synchronous requests (conformance/target/simtarget): each
// call starts one client's RPC and steps the world until that RPC is
// answered, with every checker after every step. The world is the same one
// a seeded run uses (the real engine/handoff core behind the simulated
// network, disk and processes), with no client drawn and no fault enabled.
type Driver struct {
	w *World
	// maxSteps bounds the steps one call may take (a liveness backstop).
	maxSteps int
}

// DriverConfig configures NewDriver; zero fields take the defaults noted.
type DriverConfig struct {
	// Backend is BackendTransfer (default) or BackendSharedDir.
	Backend string
	// Consumers is the number of PD consumers (default 1).
	Consumers int
	// BuffersPerConsumer is each consumer's registered receive buffers (default 4).
	BuffersPerConsumer int
	// ProducerQuotaBytes is the producer's L-5 bound (default 16 MiB).
	ProducerQuotaBytes int64
	// DefaultTTLMs is a publish's TTL when it asks for none (default 600,000).
	DefaultTTLMs int64
	// Mutant injects one broken driver decision.
	Mutant Mutant
	// Unchecked turns the world's checkers off, so that whatever calls
	// the driver (a property suite) must find a mutant by itself.
	Unchecked bool
}

// NewDriver returns a driver over a fresh world seeded with seed.
func NewDriver(seed uint64, cfg DriverConfig) (*Driver, error) {
	s := QuietSettings()
	if cfg.Backend != "" {
		s.Backend = cfg.Backend
	}
	if cfg.Consumers > 0 {
		s.Consumers = cfg.Consumers
	}
	s.BuffersPerConsumer = 4
	if cfg.BuffersPerConsumer > 0 {
		s.BuffersPerConsumer = cfg.BuffersPerConsumer
	}
	s.ProducerQuotaBytes = 16 << 20
	if cfg.ProducerQuotaBytes > 0 {
		s.ProducerQuotaBytes = cfg.ProducerQuotaBytes
	}
	s.DefaultTTLMs = 600000
	if cfg.DefaultTTLMs > 0 {
		s.DefaultTTLMs = cfg.DefaultTTLMs
	}
	s.MaxTTLMs = max(s.MaxTTLMs, s.DefaultTTLMs)
	s.PayloadBytesMax = 1 << 20
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &Driver{w: NewQuietWorld(seed, s, Options{Mutant: cfg.Mutant, HistoryOnly: cfg.Unchecked}), maxSteps: 1 << 20}, nil
}

// QuietSettings are a world with no fault and fixed short delays (ms).
func QuietSettings() Settings {
	return Settings{
		Backend: BackendTransfer, Consumers: 1, PayloadBytesMax: 1024, ProducerQuotaBytes: 1 << 20,
		ConsumerQuotaBytes: 1 << 20, BuffersPerConsumer: 2, DefaultTTLMs: 60000, MaxTTLMs: 600000,
		SafetyTicks: 1 << 40, LivenessBudgetTicks: 1, NetDelayMinMs: 5, NetDelayMaxMs: 5, LongDelayMaxMs: 0,
		EncodeMsMax: 1, WriteMsMax: 1, ConsumerTimeoutMs: 500, ProducerTimeoutMs: 500, ClientTimeoutMs: 10000,
		CollectPeriodMs: 1000, FireProbability: 0,
	}
}

// NewQuietWorld builds the nodes of s with no client drawn and only the
// periodic collector scheduled (Scenario and Driver).
func NewQuietWorld(seed uint64, s Settings, opts Options) *World {
	w := NewWorld(seed, s, opts)
	w.Sd.interleave = false // a script or a caller orders every step itself
	w.Prod = NewProducerNode(w)
	for i := 0; i < s.Consumers; i++ {
		w.Cons = append(w.Cons, newConsumerNode(w, i))
	}
	w.Schedule(s.CollectPeriodMs, Event{Kind: EvCollect})
	return w
}

// Answer is a call's outcome: a core code (handoff.CodeOK, ...) and, for a
// release, whether it was ABORTED (false: ALREADY_FINISHED).
type Answer struct {
	Code    handoff.Code
	Aborted bool
}

var AnswerCodes = map[int64]handoff.Code{
	ResOK: handoff.CodeOK, ResSpent: handoff.CodeInvalidArgument, ResUnavailable: handoff.CodeUnavailable,
	ResExhausted: handoff.CodeResourceExhausted, ResInternal: handoff.CodeInternal, ResAborted: handoff.CodeOK,
	ResAlreadyFinished: handoff.CodeOK, ResBeforeWrite: handoff.CodeInvalidArgument, ResCancelled: handoff.CodeCancelled,
	resTooLarge: handoff.CodeInvalidArgument, resMalformed: handoff.CodeInvalidArgument, resForeign: handoff.CodeInvalidArgument,
	resBackend: handoff.CodeFailedPrecondition, resWrongRole: handoff.CodeFailedPrecondition, ResPlainInvalid: handoff.CodeInvalidArgument,
	ResUnimplemented: handoff.CodeUnimplemented, ResUnavailableBeforeWrite: handoff.CodeUnavailable,
}

// ErrDriver wraps a checker's failure or a call that was never answered:
// the simulated engine broke a rule, or the simulator itself did.
var ErrDriver = fmt.Errorf("sim: driver")

// run starts c's call with start and steps until it is answered.
func (d *Driver) run(c *Client, start func()) (int64, string, error) {
	c.manual, c.answered = true, false
	start()
	if err := d.stepWhile(func() bool { return !c.answered }); err != nil {
		return 0, "", fmt.Errorf("call of client %d: %w", c.Idx, err)
	}
	return c.lastRes, c.lastEntry, nil
}

// newClient makes the client of one call.
func (d *Driver) newClient(payloadBytes, ttlMs int64, entry string) *Client {
	c := &Client{Idx: len(d.w.Clients), Plan: plan{PayloadBytes: payloadBytes, TTLMs: ttlMs}, entry: entry}
	d.w.Clients = append(d.w.Clients, c)
	return c
}

// Publish publishes one entry of payloadBytes with ttlMs (0: the default
// TTL) and returns its id and expiry (virtual ms). Errors: ErrDriver.
func (d *Driver) Publish(payloadBytes, ttlMs int64) (entry string, expiresMs int64, a Answer, err error) {
	c := d.newClient(payloadBytes, ttlMs, "")
	res, entry, err := d.run(c, func() { d.w.Call(c, StagePublishing, MsgRequest, Event{Kind: EvPublishArrive}) })
	if err != nil {
		return "", 0, Answer{}, err
	}
	if res == ResOK {
		expiresMs = d.w.Ledger.Get(entry).ExpiresMs
	}
	return entry, expiresMs, Answer{Code: AnswerCodes[res]}, nil
}

// Consume consumes entry on consumer pd (0-based). INVALID_ARGUMENT is a
// spent or expired entry (SU-2); UNAVAILABLE a consumer that refuses
// (Q-4, S-2) or an uncertain transfer. Errors: ErrDriver.
func (d *Driver) Consume(entry string, pd int) (Answer, error) {
	if _, ok := d.w.Ledger.Entries[entry]; !ok {
		return Answer{Code: handoff.CodeInvalidArgument}, nil // never published here (SU-5 is the adapter's)
	}
	c := d.newClient(0, 0, entry)
	res, _, err := d.run(c, func() { d.w.consume(c, pd, StageConsuming) })
	return Answer{Code: AnswerCodes[res]}, err
}

// Release releases entry on the producer (Abort(encoder_cache), SU-3).
// Errors: ErrDriver.
func (d *Driver) Release(entry string) (Answer, error) {
	if _, ok := d.w.Ledger.Entries[entry]; !ok {
		return Answer{Code: handoff.CodeOK}, nil // ALREADY_FINISHED: nothing of ours to release
	}
	c := d.newClient(0, 0, entry)
	res, _, err := d.run(c, func() { d.w.Call(c, stageReleasing, MsgRelease, releaseRequest{Entry: entry}.event()) })
	return Answer{Code: AnswerCodes[res], Aborted: res == ResAborted}, err
}

// ProducerInstanceID is E's instance id (a UUID).
func (d *Driver) ProducerInstanceID() string { return d.w.Prod.InstanceID }

// Load is a node's CONTRACT section 4 observables, and the quarantines a
// consumer incarnation entered (QuarantinesEntered, the reference
// engine's optional encoder.quarantine.entered: a quarantine that Q-6
// ended before anyone looked still shows).
type Load struct {
	ExportsEntries, ExportsBytes, ReceivesInflight, QuarantineBuffers, QuarantineBytes, CleanupPending int64
	QuarantinesEntered                                                                                 int64
}

// ProducerLoad returns E's observables.
func (d *Driver) ProducerLoad() Load {
	p := d.w.Prod
	var q int64
	for _, st := range d.w.Sources {
		if st == SourceQuarantined {
			q++
		}
	}
	return Load{ExportsEntries: int64(p.Table.Entries()), ExportsBytes: p.Table.HeldBytes(), QuarantineBuffers: q, CleanupPending: int64(p.Cleanups)}
}

// ConsumerLoad returns consumer pd's observables.
func (d *Driver) ConsumerLoad(pd int) Load {
	c := d.w.Cons[pd]
	n, b := c.Receives.Quarantine()
	return Load{ReceivesInflight: int64(c.Receives.Inflight()), QuarantineBuffers: int64(n), QuarantineBytes: b, QuarantinesEntered: c.Entered}
}

// ProducerHealth is E's core Health; ConsumerHealth a consumer's.
func (d *Driver) ProducerHealth() *handoff.Health { return d.w.Prod.Health }

// ConsumerHealth is consumer pd's core Health.
func (d *Driver) ConsumerHealth(pd int) *handoff.Health { return d.w.Cons[pd].Health }

// ShutdownProducer decides Shutdown(expected) on E (S-1) and, when it is
// accepted, runs the drain until E stops (S-2, S-4). Errors: the core's
// S-1 rejection; ErrDriver when the drain breaks a rule or never ends.
func (d *Driver) ShutdownProducer(expected string) (handoff.ShutdownStatus, error) {
	w := d.w
	st, err := w.DecideShutdown(expected)
	if err != nil || st != handoff.ShutdownAccepted {
		return st, err
	}
	w.Hist.DrainMs = w.Now
	w.After(0, Event{Kind: EvDrainTick})
	if err := d.stepWhile(func() bool { return !w.Prod.Stopped }); err != nil {
		return st, fmt.Errorf("the producer's drain: %w", err)
	}
	return st, nil
}

// Failure is the first checker failure of the world ("" when none).
func (d *Driver) Failure() string {
	if d.w.Fail == nil {
		return ""
	}
	return d.w.Fail.Msg
}

// Steps is the number of events the world has stepped.
func (d *Driver) Steps() int64 { return d.w.Steps }

// CheckHistory checks the world's client-visible history so far (porcupine, history.go).
func (d *Driver) CheckHistory() string { return CheckHistory(d.w.History()) }
