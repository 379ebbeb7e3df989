package suite

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/fixtures"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// The Faults-level cases of the definite refusal, the end of a
// quarantine and the security rules SE-3..SE-5: what an outsider's
// requests and a peer's disappearance may and may not do to an engine.

// quarantineEndBound is how long Q-6 gives a consumer to end its
// quarantine after the producer that may have written into its buffers is
// gone (its process and connections ended): a liveness bound, not a wait
// the engine may use (it must end a quarantine on proof, never on time).
const quarantineEndBound = 15 * time.Second

// refusedRetryBound is how long the Q-2 case retries a consume that the
// consumer answers UNAVAILABLE (retryable) once the producer's endpoint
// listens again: a client's reconnect backoff, not part of the rule.
const refusedRetryBound = 15 * time.Second

// contractCodes are the codes the contract answers rejections with (SE-4:
// an attack ends in them, never in INTERNAL or UNKNOWN).
var contractCodes = []codes.Code{codes.InvalidArgument, codes.FailedPrecondition, codes.Unavailable, codes.ResourceExhausted, codes.Unimplemented}

// Labels of the security cases.
const (
	// LabelNeedsTransfer marks a case about a transfer backend (the
	// consumer dials the producer): not applicable to a target that
	// declares only shared_dir.
	LabelNeedsTransfer = "needs:transfer-backend"
)

// needTransferBackend ends the case not applicable when the target
// declares only the shared directory (nothing is dialled then).
func needTransferBackend(t TB, h *harness) {
	t.Helper()
	if bs := h.profile.Backends; len(bs) > 0 && !slices.ContainsFunc(bs, func(b string) bool { return b != sharedDirBackend }) {
		NotApplicable(t, fmt.Sprintf("the target declares backends %v: a shared-directory consumer claims by rename and dials no producer", bs))
	}
}

// probeListener listens on a free port of the profile's untrusted host and
// counts the connections it accepts; hang keeps them open, unanswered.
type probeListener struct {
	net.Listener
	accepted atomic.Int64
	wg       sync.WaitGroup
}

// listenUntrusted starts a probe listener on Profile.UntrustedHost, or ends
// the case not verifiable when the profile names none.
func listenUntrusted(t TB, h *harness, hang bool) *probeListener {
	t.Helper()
	if h.profile.UntrustedHost == "" {
		NotVerifiable(t, "needs untrusted_host in the profile: a host where the harness may listen on ports the target does not trust")
	}
	l, err := net.Listen("tcp", net.JoinHostPort(h.profile.UntrustedHost, "0"))
	if err != nil {
		HarnessError(t, "listen on the untrusted host %s: %v", h.profile.UntrustedHost, err)
	}
	p := &probeListener{Listener: l}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.accepted.Add(1)
			if hang {
				held = append(held, c)
			} else {
				c.Close()
			}
		}
	}()
	return p
}

func (p *probeListener) close() { p.Listener.Close(); p.wg.Wait() }

func (p *probeListener) endpoint() *pb.KvEndpoint {
	a := p.Addr().(*net.TCPAddr)
	return &pb.KvEndpoint{Host: a.IP.String(), Port: uint32(a.Port), Protocol: "grpc"}
}

// expectCalm reports (Errorf) unless e is READY with nothing quarantined
// and no receive in flight (counters when the profile declares them).
func (h *harness) expectCalm(who string, e target.Engine, after string) {
	h.t.Helper()
	resp, err := e.Health(h.ctx)
	switch {
	case err != nil:
		h.t.Errorf("Health(%s) after %s = %s; want READY", who, after, statusString(err))
	case resp.GetState() != pb.HealthState_HEALTH_STATE_READY:
		h.t.Errorf("Health(%s) after %s = %s%s; want READY", who, after, resp.GetState(), healthChecks(resp))
	}
	if c, ok := h.optionalCounters(who, e); ok && (c[ObservableQuarantineBuffers] != 0 || c[ObservableReceivesInflight] != 0) {
		h.t.Errorf("GetLoad(%s) after %s: %s = %g, %s = %g; want 0 and 0", who, after, ObservableQuarantineBuffers, c[ObservableQuarantineBuffers], ObservableReceivesInflight, c[ObservableReceivesInflight])
	}
}

// Q2RefusedConnectionIsDefinite: a reference whose producer endpoint, one
// the consumer trusts, refuses connections is a definite outcome (nothing
// was sent): the consumer answers UNAVAILABLE, stays READY with nothing
// quarantined, and the reference, never sent, is consumed once the
// endpoint listens again.
func Q2RefusedConnectionIsDefinite(ctx context.Context, t TB, tg target.Target) {
	f := needFaults(ctx, t, tg)
	refuser, ok := target.Capability[target.ConnectionRefuser](tg)
	if !ok {
		NotVerifiable(t, "needs a harness that can make the producer endpoint the consumer trusts refuse connections (target.ConnectionRefuser)")
	}
	defer f.poisoned(target.RoleConsumer)()
	ready := f.publish(fixture(t, faultImage))
	restore, err := refuser.RefuseProducerConnections(ctx)
	if err != nil {
		HarnessError(t, "refuse the producer's connections: %v", err)
	}
	res := f.consume(promptText(t, promptMarker), ready.GetRef())
	if err := restore(); err != nil {
		HarnessError(t, "let the producer's endpoint listen again: %v", err)
	}
	expectRejected(t, consumeCall(ready.GetRef(), "producer endpoint refuses connections"), res, codes.Unavailable)
	f.expectCalm("consumer", f.cons, "a refused connection (Q-2: nothing was sent, nothing is quarantined)")
	if t.Failed() {
		return // a consumer that quarantined would refuse the retry too
	}
	deadline := time.Now().Add(refusedRetryBound)
	for {
		res = f.consume(promptText(t, promptMarker), ready.GetRef())
		if res.Code() != codes.Unavailable || time.Now().After(deadline) {
			break
		}
		f.waitMs(200, "retrying a consume answered UNAVAILABLE (retryable)")
	}
	expectTokens(t, consumeCall(ready.GetRef(), "the same reference once the endpoint listens again (it was never sent)"), res)
}

// Q6QuarantineEndsWhenProducerIsGone: after an uncertain transfer (its
// reply lost), once the producer that may have written into the consumer's
// buffers is gone (killed with SIGKILL where the target can, target.Crasher;
// else replaced by a restart: either way its process and connections
// ended), the consumer's quarantine ends: READY with nothing quarantined
// within quarantineEndBound, and its next handoff, with the new producer,
// succeeds. (That nothing is freed while a write could land is Q-1's.)
func Q6QuarantineEndsWhenProducerIsGone(ctx context.Context, t TB, tg target.Target) {
	f := needFaults(ctx, t, tg)
	defer f.poisoned(target.RoleConsumer)()
	ready := f.publish(fixture(t, faultImage))
	f.inject(0, target.FaultDropReply)
	if res := f.consume(promptText(t, promptMarker), ready.GetRef()); res.Code() == codes.OK {
		HarnessError(t, "%s with its reply dropped answered OK: the fault proxy did not drop it", consumeCall(ready.GetRef(), "reply dropped"))
	}
	f.killProducer()
	prod, ok := tg.Engine(target.RoleProducer)
	if !ok {
		HarnessError(t, "no producer after its restart")
	}
	f.prod = prod
	start := time.Now()
	for {
		resp, err := f.cons.Health(ctx)
		calm := err == nil && resp.GetState() == pb.HealthState_HEALTH_STATE_READY
		if c, ok := f.optionalCounters("consumer", f.cons); ok && c[ObservableQuarantineBuffers] != 0 {
			calm = false
		}
		if calm {
			break
		}
		if time.Since(start) > quarantineEndBound {
			t.Errorf("Health(consumer) %v after the producer that may have written into its buffers was replaced = %s%s; want READY with nothing quarantined (Q-6: the quarantine ends once nothing can land)", quarantineEndBound, resp.GetState(), healthChecks(resp))
			return
		}
		f.waitMs(100, "polling the consumer's health")
	}
	f.handoff(fixture(t, faultImage), promptText(t, promptMarker))
}

// Q6QuarantineEndsWhileProducerLives: after a transfer whose producer
// hung (the fault proxy holds the TransferEncoderCache request and never
// forwards it, so the consumer's deadline passes with the outcome
// uncertain), the producer recovers and keeps living (the same instance,
// nothing restarted, its control connections healthy), and still the
// consumer's quarantine ends: within quarantineEndBound its
// encoder.quarantine.buffers is back to its value before the case and it
// is READY, and its next handoff, with the same producer, succeeds.
// CONTRACT Q-6's consumer proof (the registration revoked, every
// connection that carried the transfer closed) is the consumer's to bring
// about: it can close the connections that carried the request itself; a
// consumer that waits for an idle healthy connection to a live producer to
// close by itself stays quarantined for as long as the producer lives.
// (That nothing is freed while a write could land is Q-1's; a producer
// that died is the case above.)
func Q6QuarantineEndsWhileProducerLives(ctx context.Context, t TB, tg target.Target) {
	f := needFaults(ctx, t, tg)
	defer f.poisoned(target.RoleConsumer)()
	before := f.counters("consumer", f.cons)[ObservableQuarantineBuffers]
	entered, counted := f.quarantinesEntered(f.cons)
	producerID := f.instanceID("producer", f.prod)
	ready := f.publish(fixture(t, faultImage))
	f.inject(0, target.FaultDropRequest)
	if res := f.consume(promptText(t, promptMarker), ready.GetRef()); res.Code() == codes.OK || len(res.TokenIDs()) > 0 {
		HarnessError(t, "%s with its request held by the fault proxy = %s: the proxy did not hold it", consumeCall(ready.GetRef(), "request dropped"), describe(res))
	}
	calls, err := f.faults.TransferCalls(ctx, target.MethodTransferEncoderCache, 1)
	if err != nil || len(calls) == 0 {
		HarnessError(t, "the fault proxy saw no TransferEncoderCache call: %v", err)
	}
	if calls[0].UpstreamReached {
		HarnessError(t, "the fault proxy forwarded the request it was told to hold")
	}
	if now, ok := f.quarantinesEntered(f.cons); counted && ok && now == entered {
		t.Logf("note: %s stayed %g across the uncertain transfer: the consumer did not quarantine (Q-1's to judge), so there was nothing for Q-6 to end", ObservableQuarantineEntered, entered)
	}
	start := time.Now()
	for {
		resp, err := f.cons.Health(ctx)
		n := f.counters("consumer", f.cons)[ObservableQuarantineBuffers]
		if err == nil && resp.GetState() == pb.HealthState_HEALTH_STATE_READY && n == before {
			break
		}
		if time.Since(start) > quarantineEndBound {
			t.Errorf("%v after a transfer whose producer hung and recovered, its producer alive throughout: Health(consumer) = %s%s, %s = %g; want READY and %g as before (Q-6: the consumer ends its quarantine by closing the connections that carried the request, not by waiting for a live producer to close them)",
				quarantineEndBound, resp.GetState(), healthChecks(resp), ObservableQuarantineBuffers, n, before)
			return
		}
		f.waitMs(100, "polling the consumer's quarantine")
	}
	if id := f.instanceID("producer", f.prod); id != producerID {
		HarnessError(t, "the producer's instance changed (%s -> %s) during the case: the case needs the same producer alive throughout", producerID, id)
	}
	f.handoff(fixture(t, faultImage), promptText(t, promptMarker))
}

// killProducer ends the producer's instance as a crash does (CONTRACT Q-6:
// "a killed producer"): SIGKILL and a fresh instance through
// target.Crasher where the target offers it; otherwise, or where it
// cannot kill this instance (target.ErrCannotCrash), a restart through
// target.Restarter (Shutdown first: the drain ends the producer's side
// before its process exits), which the case log says.
func (f *faultHarness) killProducer() {
	f.t.Helper()
	if c, ok := target.Capability[target.Crasher](f.tg); ok {
		err := c.Crash(f.ctx, target.RoleProducer)
		if err == nil {
			return
		}
		if !errors.Is(err, target.ErrCannotCrash) {
			HarnessError(f.t, "kill the producer: %v", err)
		}
		f.t.Logf("note: the target cannot kill the producer (%v): restarting it instead (a drain first, not a crash)", err)
	} else {
		f.t.Logf("note: the target cannot kill the producer (no target.Crasher): restarting it instead (a drain first, not a crash)")
	}
	if err := f.restart.Restart(f.ctx, target.RoleProducer); err != nil {
		HarnessError(f.t, "replace the producer: %v", err)
	}
}

// SE3UntrustedProducerEndpointRefused: a reference naming a producer
// endpoint the consumer does not trust is FAILED_PRECONDITION before any
// connection: nothing connects to that endpoint, the consumer stays READY,
// and the reference it imitated is still consumable.
func SE3UntrustedProducerEndpointRefused(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	needTransferBackend(t, h)
	probe := listenUntrusted(t, h, false)
	defer probe.close()
	defer h.cleanup()
	ready := h.publish(fixture(t, faultImage))
	forged := proto.Clone(ready.GetRef()).(*pb.EncoderCacheRef)
	forged.ProducerEndpoint = probe.endpoint()
	res := h.consume(promptText(t, promptMarker), forged)
	expectRejected(t, consumeCall(forged, "producer endpoint "+probe.Addr().String()+" not trusted"), res, codes.FailedPrecondition)
	if n := probe.accepted.Load(); n != 0 {
		t.Errorf("the consumer connected %d times to %s, which it does not trust; want none (SE-3: refused before any connection)", n, probe.Addr())
	}
	h.expectCalm("consumer", h.cons, "an untrusted producer endpoint")
	h.consumeOK(promptText(t, promptMarker), ready.GetRef(), "the reference the forged one imitated")
}

// batonAgentMetadata encodes baton-xfer-v1 agent metadata (Profile
// AgentFormat): "BXMD", version 1, backend 2 (tcp), the name, "host:port".
func batonAgentMetadata(name, addr string) []byte {
	var b bytes.Buffer
	b.WriteString("BXMD")
	b.WriteByte(1)
	b.WriteByte(2)
	b.WriteByte(byte(len(name)))
	b.WriteString(name)
	_ = binary.Write(&b, binary.BigEndian, uint16(len(addr)))
	b.WriteString(addr)
	return b.Bytes()
}

// SE3UntrustedConsumerAgentRefused: a producer asked (by any client) to
// WRITE into a consumer agent it does not trust answers
// FAILED_PRECONDITION with the before-write trailer before any connection:
// nothing connects to that agent, the producer stays READY, and the entry
// is still consumable.
func SE3UntrustedConsumerAgentRefused(ctx context.Context, t TB, tg target.Target) {
	h := needEPD(ctx, t, tg)
	if !slices.Contains(h.profile.Backends, "tcp") {
		NotApplicable(t, fmt.Sprintf("the target declares backends %v: only a tcp producer dials a consumer agent", h.profile.Backends))
	}
	if h.profile.AgentFormat != target.AgentFormatBatonXferV1 {
		NotVerifiable(t, "needs agent_format baton-xfer-v1 in the profile to name an untrusted consumer agent")
	}
	tr, ok := target.Capability[target.Transferer](h.prod)
	if !ok {
		NotVerifiable(t, "needs a producer engine the harness can call TransferEncoderCache on (target.Transferer)")
	}
	probe := listenUntrusted(t, h, true)
	defer probe.close()
	defer h.cleanup()
	ready := h.publish(fixture(t, faultImage))
	req := &pb.TransferEncoderCacheRequest{Ref: ready.GetRef(), TransferId: newRequestID("se3-agent"), ConsumerAgent: batonAgentMetadata("baton-se3-probe", probe.Addr().String())}
	for range ready.GetItems() {
		req.Targets = append(req.Targets, &pb.MemoryRegion{Address: 1 << 36, Length: 4, MemoryKind: "host", RemoteKey: pseudoBytes("se3-key", 16)})
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	_, trailer, err := tr.TransferEncoderCache(cctx, req)
	cancel()
	call := "TransferEncoderCache(consumer_agent=" + probe.Addr().String() + ", not trusted)"
	if c := status.Code(err); c != codes.FailedPrecondition {
		t.Errorf("%s = %s; want FAILED_PRECONDITION (SE-3)", call, statusString(err))
	} else if !slices.Contains(trailer.Get("baton-transfer-rejected"), "before-write") {
		t.Errorf("%s = FAILED_PRECONDITION without the trailer baton-transfer-rejected: before-write (trailer %v); want it (SE-3, Q-2)", call, trailer)
	}
	if n := probe.accepted.Load(); n != 0 {
		t.Errorf("the producer connected %d times to %s, which it does not trust; want none (SE-3: before any connection)", n, probe.Addr())
	}
	h.expectCalm("producer", h.prod, "an untrusted consumer agent")
	h.consumeOK(promptText(t, promptMarker), ready.GetRef(), "the entry a client asked to write elsewhere")
}

// SE4AttackCorpusLeavesEnginesReady: requests from an outsider (forged and
// stale references, untrusted and unreachable endpoints, a transfer the
// client abandons, malformed transfer and release requests) end in the
// contract's codes, and afterwards producer and consumer are READY with
// nothing quarantined and no receive in flight.
func SE4AttackCorpusLeavesEnginesReady(ctx context.Context, t TB, tg target.Target) {
	f := needFaults(ctx, t, tg)
	defer f.poisoned(target.RoleConsumer, target.RoleProducer)()
	prompt := promptText(t, promptMarker)
	contract := func(what string, code codes.Code) {
		t.Helper()
		if !slices.Contains(contractCodes, code) {
			t.Errorf("%s = code %s; want one of the contract's rejection codes %v (SE-4)", what, codeName(code), contractCodes)
		}
	}
	calm := func(after string) {
		t.Helper()
		f.expectCalm("consumer", f.cons, after)
		f.expectCalm("producer", f.prod, after)
	}
	// A forged reference to the real producer: its tag does not verify.
	ready := f.publish(fixture(t, faultImage))
	forged := withOpaque(ready.GetRef(), pseudoBytes("se4-forged", len(ready.GetRef().GetOpaqueState())))
	if f.formatDeclared() {
		if altered, err := refWithTagAltered(ready.GetRef().GetOpaqueState()); err == nil {
			forged = withOpaque(ready.GetRef(), altered)
		}
	}
	res := f.consume(prompt, forged)
	contract(consumeCall(forged, "forged"), res.Code())
	calm("a forged reference")
	// A stale reference: consumed once, replayed.
	f.consumeOK(prompt, ready.GetRef(), "the genuine reference")
	res = f.consume(prompt, ready.GetRef())
	contract(consumeCall(ready.GetRef(), "replayed"), res.Code())
	calm("a replayed reference")
	// An endpoint the consumer does not trust.
	if f.profile.UntrustedHost != "" {
		probe := listenUntrusted(t, f.harness, true)
		r := proto.Clone(f.publish(fixture(t, faultImage)).GetRef()).(*pb.EncoderCacheRef)
		r.ProducerEndpoint = probe.endpoint()
		res = f.consume(prompt, r)
		probe.close()
		contract(consumeCall(r, "untrusted endpoint"), res.Code())
		calm("an untrusted producer endpoint")
	}
	// A producer endpoint that refuses connections.
	if refuser, ok := target.Capability[target.ConnectionRefuser](tg); ok {
		r := f.publish(fixture(t, faultImage)).GetRef()
		restore, err := refuser.RefuseProducerConnections(ctx)
		if err != nil {
			HarnessError(t, "refuse the producer's connections: %v", err)
		}
		res = f.consume(prompt, r)
		if err := restore(); err != nil {
			HarnessError(t, "let the producer's endpoint listen again: %v", err)
		}
		contract(consumeCall(r, "producer unreachable"), res.Code())
		calm("an unreachable producer")
		// The producer listens again: consume r once the consumer reaches
		// it (UNAVAILABLE is retryable), so the next step's transfer crosses.
		for deadline := time.Now().Add(refusedRetryBound); ; {
			res = f.consume(prompt, r)
			if res.Code() != codes.Unavailable || time.Now().After(deadline) {
				break
			}
			f.waitMs(200, "retrying a consume answered UNAVAILABLE (retryable)")
		}
	}
	// A transfer the client abandons: it cancels while the reply is held.
	// The consumer waits for the outcome (C-4): no quarantine, not even
	// one that Q-6 ends at once, where the engine counts the quarantines
	// it entered (ObservableQuarantineEntered, optional).
	r := f.publish(fixture(t, faultImage)).GetRef()
	entered, counted := f.quarantinesEntered(f.cons)
	done, cancel := f.stuckConsume(r)
	cancel()
	<-done
	if _, err := f.faults.TransferCalls(ctx, target.MethodTransferEncoderCache, 1); err != nil {
		HarnessError(t, "the held transfer never finished at the proxy: %v", err)
	}
	if f.profile.Observables {
		f.waitInflight(0)
	}
	if now, ok := f.quarantinesEntered(f.cons); counted && ok && now > entered {
		t.Errorf("GetLoad(consumer) %s went %g -> %g across a transfer its client abandoned; want no quarantine (SE-4: a client's cancel never cancels the transfer call, C-4)", ObservableQuarantineEntered, entered, now)
	}
	calm("a transfer its client abandoned")
	// A reference naming the real producer with producer_endpoint.protocol
	// padded, once by 4 KiB and once until the whole consume is just under
	// a 64 MiB receive limit: a consumer that forwards it unchanged asks its
	// producer with a request larger than the producer accepts, and the
	// producer's transport refuses it without the before-write trailer
	// (attack A1). The answer is INVALID_ARGUMENT (SU-4, or SU-5 where the
	// tag covers the field); for the large one the consumer's own transport
	// may refuse it first (RESOURCE_EXHAUSTED, L-6).
	f.oversizeEndpointSteps(prompt, calm)
	// A consume carrying a traceparent and the largest tracestate the
	// consumer's transport accepts (a header list just under its limit): a
	// consumer that forwards it to its producer makes a header list the
	// producer refuses (attack A2). The consume is served or rejected.
	f.oversizeTracestateStep(prompt, contract, calm)
	// Malformed transfer and release requests sent to the producer itself.
	if tr, ok := target.Capability[target.Transferer](f.prod); ok {
		cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
		_, _, err := tr.TransferEncoderCache(cctx, &pb.TransferEncoderCacheRequest{Ref: forged, TransferId: "se4", ConsumerAgent: []byte("not an agent")})
		ccancel()
		contract("TransferEncoderCache(forged reference, malformed consumer_agent)", status.Code(err))
	}
	_, err := f.abort(f.prod, forged)
	contract(abortCall(forged, "forged"), status.Code(err))
	calm("malformed transfer and release requests")
}

// Settings of the decode-budget case (SE-4).
const (
	// decodeBudgetPublishes is how many publishes the case sends at once,
	// each of an image of just over half the declared decode budget: one
	// fits, the others do not.
	decodeBudgetPublishes = 4
	// decodeBudgetHoldMs holds each publish's encoder step
	// (baton.encoder_delay_ms), so the one admitted keeps its decoded image,
	// and the budget full, for far longer than the case waits for the
	// others' answers; the case cancels it then.
	decodeBudgetHoldMs = 30000
	// decodeRefusalBound is how long the case gives the publishes beyond
	// the budget to end RESOURCE_EXHAUSTED while it is held full: an engine
	// may wait a while for room, but not decode them anyway, nor keep them
	// until the holder ends (SE-4: "beyond the bound, RESOURCE_EXHAUSTED").
	decodeRefusalBound = 10 * time.Second
	// healthAnswerBound bounds each of the producer's Health answers while
	// the images are decoded and held (SE-4: the engine never stalls its
	// health checks); the case asks every healthProbeInterval.
	healthAnswerBound   = 2 * time.Second
	healthProbeInterval = 50 * time.Millisecond
	// decodedBytesPerPixel is what one pixel of a 16-bit RGBA image holds
	// decoded, in any form (Profile.DecodeBudgetBytes counts so).
	decodedBytesPerPixel = 8
	// heavyImageWidth is the width of the case's images (fixtures.HeavyPNG);
	// their height makes them just over half the budget.
	heavyImageWidth = 2048
)

// heavyImageFor returns the size of a 16-bit RGBA image just over half of a
// decode budget of budgetBytes (two never fit together), and how many
// such images fit at once.
func heavyImageFor(budgetBytes int64) (width, height int64, fit int64) {
	pixels := budgetBytes/decodedBytesPerPixel/2 + 1
	width = min(heavyImageWidth, pixels)
	height = (pixels + width - 1) / width
	return width, height, budgetBytes / (width * height * decodedBytesPerPixel)
}

// healthProber asks e's Health every healthProbeInterval until stop, and
// records every answer that is not READY within healthAnswerBound.
type healthProber struct {
	mu     sync.Mutex
	probes int
	worst  time.Duration
	bad    []string
	stop   chan struct{}
	done   chan struct{}
}

func probeHealth(ctx context.Context, e target.Engine) *healthProber {
	p := &healthProber{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(healthProbeInterval)
		defer tick.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			cctx, cancel := context.WithTimeout(ctx, healthAnswerBound)
			start := time.Now()
			resp, err := e.Health(cctx)
			took := time.Since(start)
			cancel()
			p.mu.Lock()
			p.probes++
			p.worst = max(p.worst, took)
			switch {
			case err != nil:
				p.bad = append(p.bad, fmt.Sprintf("%s after %v", statusString(err), took.Round(time.Millisecond)))
			case resp.GetState() != pb.HealthState_HEALTH_STATE_READY || took > healthAnswerBound:
				p.bad = append(p.bad, fmt.Sprintf("%s%s after %v", resp.GetState(), healthChecks(resp), took.Round(time.Millisecond)))
			}
			p.mu.Unlock()
		}
	}()
	return p
}

// end stops the prober and returns how many probes it made, the slowest
// answer and the bad ones.
func (p *healthProber) end() (probes int, worst time.Duration, bad []string) {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.probes, p.worst, p.bad
}

// SE4DecodeBudgetBoundsConcurrentImages: publishes of 16-bit PNGs of just
// over half the producer's declared decode budget, sent at once and each
// held in its encoder step (baton.encoder_delay_ms): all but those that fit
// together end RESOURCE_EXHAUSTED while the admitted one holds the budget,
// Health answers READY within healthAnswerBound throughout, a refused
// publish is served once the budget is free (retryable), and nothing is
// left published afterwards (SE-4: decode memory bounded across requests).
func SE4DecodeBudgetBoundsConcurrentImages(ctx context.Context, t TB, tg target.Target) {
	h := needProducer(ctx, t, tg)
	defer h.cleanup()
	budget := h.profile.DecodeBudgetBytes
	width, height, fit := heavyImageFor(budget)
	if fit < 1 || fit >= decodeBudgetPublishes {
		HarnessError(t, "a %dx%d image for a decode budget of %d bytes: %d fit at once; want 1..%d", width, height, budget, fit, decodeBudgetPublishes-1)
	}
	item := &pb.MediaItem{Modality: pb.Modality_MODALITY_IMAGE, Source: &pb.MediaItem_RawBytes{RawBytes: fixtures.HeavyPNG(int(width), int(height))}, MimeType: mimeOf("png")}
	what := fmt.Sprintf("Publish(%dx%d 16-bit PNG, %d decoded bytes, encoder step held %d ms)", width, height, width*height*decodedBytesPerPixel, decodeBudgetHoldMs)
	before, counted := h.optionalCounters("producer", h.prod)

	type answer struct {
		i   int
		res *target.GenerateResult
	}
	answers := make(chan answer, decodeBudgetPublishes)
	cancels := make([]context.CancelFunc, decodeBudgetPublishes)
	prober := probeHealth(h.ctx, h.prod)
	for i := range cancels {
		cctx, cancel := context.WithCancel(h.ctx)
		cancels[i] = cancel
		req := withExtra(h.publishRequest(nil, item), map[string]any{HookEncoderDelayMs: decodeBudgetHoldMs})
		go func() {
			res, err := h.prod.Generate(cctx, req)
			if err != nil || res == nil {
				res = &target.GenerateResult{}
			}
			answers <- answer{i, res}
		}()
	}
	defer func() {
		for _, cancel := range cancels {
			cancel()
		}
	}()
	// While the admitted publish holds the budget, the others must end
	// RESOURCE_EXHAUSTED.
	got := map[int]*target.GenerateResult{}
	refused := 0
	timer := time.NewTimer(decodeRefusalBound)
wait:
	for int64(len(got)) < decodeBudgetPublishes-fit {
		select {
		case a := <-answers:
			got[a.i] = a.res
			if ready := a.res.EncoderReady(); ready != nil {
				h.track(ready.GetRef())
			}
			if a.res.Code() == codes.ResourceExhausted {
				refused++
			} else {
				t.Errorf("%s while the decode budget of %d bytes was held full = %s; want RESOURCE_EXHAUSTED (SE-4; no publish ends otherwise while its encoder step is held)", what, budget, describe(a.res))
			}
		case <-timer.C:
			break wait
		case <-h.ctx.Done():
			break wait
		}
	}
	timer.Stop()
	if int64(refused) < decodeBudgetPublishes-fit {
		t.Errorf("%d %s sent at once: %d ended RESOURCE_EXHAUSTED within %v; want %d, all but the %d that fit the declared decode budget of %d bytes together (SE-4: beyond the bound, RESOURCE_EXHAUSTED, not decoded and kept)",
			decodeBudgetPublishes, what, refused, decodeRefusalBound, decodeBudgetPublishes-fit, fit, budget)
	}
	probes, worst, bad := prober.end()
	t.Logf("SE-4 decode budget %d bytes: %d of %d publishes refused; Health asked %d times meanwhile, slowest answer %v", budget, refused, decodeBudgetPublishes, probes, worst.Round(time.Millisecond))
	if len(bad) > 0 {
		t.Errorf("Health(producer) while the heavy images were decoded and held: %d of %d answers not READY within %v: %s; want READY within %v each (SE-4: the engine never stalls its health checks)",
			len(bad), probes, healthAnswerBound, strings.Join(bad[:min(len(bad), 5)], ", "), healthAnswerBound)
	}
	// The held publishes are cancelled by their client: they end, and
	// publish nothing.
	for _, cancel := range cancels {
		cancel()
	}
	ended := time.NewTimer(cleanupTimeout)
	defer ended.Stop()
	for len(got) < decodeBudgetPublishes {
		select {
		case a := <-answers:
			got[a.i] = a.res
			if ready := a.res.EncoderReady(); ready != nil {
				h.track(ready.GetRef())
				t.Errorf("%s cancelled by its client = %s; want no EncoderReady", what, describe(a.res))
			}
		case <-ended.C:
			t.Fatalf("%d of %d %s still running %v after their client cancelled them; want each ended", decodeBudgetPublishes-len(got), decodeBudgetPublishes, what, cleanupTimeout)
		}
	}
	// RESOURCE_EXHAUSTED is retryable: the same publish, not held, is
	// served once the budget is free.
	var res *target.GenerateResult
	for deadline := time.Now().Add(refusedRetryBound); ; {
		res = h.generate(h.prod, h.publishRequest(nil, item))
		if res.Code() != codes.ResourceExhausted || time.Now().After(deadline) {
			break
		}
		h.waitMs(200, "retrying a publish answered RESOURCE_EXHAUSTED (retryable)")
	}
	if ready := res.EncoderReady(); res.Code() != codes.OK || ready == nil {
		t.Errorf("Publish(%dx%d 16-bit PNG) once the decode budget was free = %s; want OK with an EncoderReady (RESOURCE_EXHAUSTED is retryable)", width, height, describe(res))
	} else {
		h.expectAbortStatus(ready.GetRef(), "the retried publish", pb.AbortStatus_ABORT_STATUS_ABORTED)
	}
	if counted {
		h.expectSettled("SE-4", "producer", h.prod, before, "after the decode-budget publishes were refused, cancelled or released", ObservableExportsEntries, ObservableExportsBytes)
	}
	h.expectReady("producer", h.prod)
}

// Settings of the scan-bomb case (SE-4, attack F1).
const (
	// scanBombs is how many scan bombs the case sends at once: more than
	// the one or two decode slots a small engine has.
	scanBombs = 4
	// scanBombSide is the width and height of each bomb: a 2048x2048
	// grayscale image, 4 megapixels, within the media bounds of the Faults
	// topologies conformance/launch starts (--max-request-pixels 4 Mi) and
	// far within the contract engine's default (40 megapixels).
	scanBombSide = 2048
	// scanBombACScans is each bomb's count of empty AC scans after its DC
	// scan (fixtures.ProgressiveJPEG: 20 bytes a scan, 352 KB a bomb). Go's
	// image/jpeg walks every one of the image's 65536 blocks in every scan:
	// about 1.4 ms of one core a scan on the 2-core CI machine (15000
	// scans took 21.5 s), so one bomb is about 25 s of CPU there, three
	// times scanBombServeBound, and still past the bound on a machine 2.5
	// times as fast. An engine that
	// decodes one bomb at a time (the reference engine without its scan
	// bound, under launch's one decode slot and 32 MiB budget, which one
	// bomb fills) spends no more than one bomb's decode on the case.
	scanBombACScans = 18000
	// scanBombServeBound is how long after the bombs were sent an ordinary
	// publish must be served (OK): the reference engine's
	// server.DecodeSlotWait (5 s, the most a decode waits for a slot before
	// RESOURCE_EXHAUSTED) and 3 s to decode and publish a small PNG on a
	// loaded machine. An engine that refuses the bombs from their scans
	// (CONTRACT L-6: media bounded before decoding) serves it at once.
	scanBombServeBound = 8 * time.Second
	// scanBombHeadStart is how long after the bombs the ordinary publish is
	// first sent: time for their 1.4 MB to reach the producer and their
	// decode to start, as in the attack, where the victims' publishes come
	// after the bombs (sent together, the small publish arrives first and
	// is served before any bomb is decoded, proving nothing). It counts
	// against scanBombServeBound.
	scanBombHeadStart = time.Second
	// scanBombRetryPause is the pause before an ordinary publish answered
	// RESOURCE_EXHAUSTED (retryable, SE-4) is sent again.
	scanBombRetryPause = 200 * time.Millisecond
	// scanBombCalmBound is how long, after the case failed, it waits for
	// the producer to serve a publish again before it ends, so the cases
	// after it do not inherit the stall (the decode of a bomb cannot be
	// cancelled once it started).
	scanBombCalmBound = 30 * time.Second
)

// SE4ScanBombsDoNotStallOtherPublishes: attack F1. It sends scanBombs
// publishes at once, each a 2048x2048 grayscale progressive JPEG of one DC
// scan and scanBombACScans empty AC scans (fixtures.ProgressiveJPEG: 352
// KB whose every scan is a pass over the whole image in a decoder that
// walks it scan by scan), and then, scanBombHeadStart (1 s) later, when
// the bombs have arrived, publishes an ordinary small PNG (the fault
// fixture image), again after scanBombRetryPause each time
// it is answered RESOURCE_EXHAUSTED (retryable, SE-4). Within
// scanBombServeBound (8 s) of the bombs' sending one of those publishes
// must end OK: a few hundred KB of scans must not stall every other
// publish (SE-4: decode CPU is bounded across all requests together;
// beyond the bound, RESOURCE_EXHAUSTED). An ordinary publish that ends
// DEADLINE_EXCEEDED or still runs at the bound, or ends in any code but
// OK and RESOURCE_EXHAUSTED, fails at once. Health must answer READY
// within healthAnswerBound throughout. The bombs' own answers are not
// judged (INVALID_ARGUMENT for the scan bound or the media bounds,
// RESOURCE_EXHAUSTED, or OK from a decoder fast enough): the case checks
// the rule, not the reference engine's way of keeping it. At the end the
// bombs are cancelled, any that were published released, and the
// producer's exports must be back where they were (observables, when
// declared).
//
// An engine without a scan bound is not failed as such: one whose decode
// slots outnumber the bombs (a vendor engine on many cores, each slot
// decoding a bomb for its ~25 s of CPU) serves the ordinary publish from a
// free slot and passes, since 4 bombs do not stall it. What fails is an
// engine in which the bombs take every slot, or the whole decode budget,
// for longer than the bound: the reference engine before the fix, whose
// scan-bound mutant (se4-no-jpeg-scan-bound) the kill table runs with
// conformance/launch's one decode slot and 32 MiB decode budget.
func SE4ScanBombsDoNotStallOtherPublishes(ctx context.Context, t TB, tg target.Target) {
	h := needProducer(ctx, t, tg)
	defer h.cleanup()
	bomb := &pb.MediaItem{Modality: pb.Modality_MODALITY_IMAGE, MimeType: mimeOf("jpeg"),
		Source: &pb.MediaItem_RawBytes{RawBytes: fixtures.ProgressiveJPEG(scanBombSide, scanBombSide, 1, 1, scanBombACScans)}}
	bombWhat := fmt.Sprintf("Publish(%dx%d gray progressive JPEG of %d scans, %d bytes)", scanBombSide, scanBombSide, 1+scanBombACScans, len(bomb.GetRawBytes()))
	small := fixture(t, faultImage)
	smallWhat := fmt.Sprintf("Publish(%s)", small.Name)
	before, counted := h.optionalCounters("producer", h.prod)

	type answer struct {
		res  *target.GenerateResult
		took time.Duration
	}
	answers := make(chan answer, scanBombs)
	bombCtx, cancelBombs := context.WithCancel(h.ctx)
	defer cancelBombs()
	prober := probeHealth(h.ctx, h.prod)
	sent := time.Now()
	for range scanBombs {
		req := h.publishRequest(nil, bomb)
		go func() {
			start := time.Now()
			res, err := h.prod.Generate(bombCtx, req)
			if err != nil || res == nil {
				res = &target.GenerateResult{}
			}
			answers <- answer{res, time.Since(start)}
		}()
	}
	// An ordinary publish, once the bombs are in, retried while it is
	// answered RESOURCE_EXHAUSTED, must be served within the bound of the
	// bombs' sending.
	h.waitMs(scanBombHeadStart.Milliseconds(), "letting the scan bombs reach the producer first")
	bound := sent.Add(scanBombServeBound)
	var (
		served    *pb.EncoderReady
		attempts  int
		exhausted int
		stalled   bool
	)
	for { // every answer but a RESOURCE_EXHAUSTED before the bound ends the loop
		attempts++
		actx, cancel := context.WithDeadline(h.ctx, bound)
		start := time.Now()
		res := h.generateCtx(actx, h.prod, h.publishRequest(nil, imageItem(small)))
		cancel()
		took := time.Since(start)
		switch code := res.Code(); {
		case code == codes.OK && res.EncoderReady() != nil:
			served = res.EncoderReady()
			t.Logf("SE-4 %d scan bombs: %s served after %v (%v after the bombs were sent), attempt %d, %d answered RESOURCE_EXHAUSTED before", scanBombs, smallWhat, took.Round(time.Millisecond), time.Since(sent).Round(time.Millisecond), attempts, exhausted)
		case code == codes.ResourceExhausted && time.Now().Add(scanBombRetryPause).Before(bound):
			exhausted++
			h.waitMs(scanBombRetryPause.Milliseconds(), "retrying a publish answered RESOURCE_EXHAUSTED (retryable)")
			continue
		case code == codes.ResourceExhausted:
			exhausted++
			t.Errorf("%s, sent %v after %d scan bombs (%s): not served within %v of the bombs' sending; %d attempts, %d answered RESOURCE_EXHAUSTED; want one OK (SE-4: a few hundred KB of scans stalled every other publish; decode CPU is bounded across requests)",
				smallWhat, scanBombHeadStart, scanBombs, bombWhat, scanBombServeBound, attempts, exhausted)
			stalled = true
		case code == codes.DeadlineExceeded || time.Now().After(bound):
			t.Errorf("%s, sent %v after %d scan bombs (%s): attempt %d still ran %v later, at the bound of %v after the bombs' sending (%s); want OK within it (SE-4: a few hundred KB of scans stalled every other publish; beyond the decode bound, RESOURCE_EXHAUSTED, not a wait)",
				smallWhat, scanBombHeadStart, scanBombs, bombWhat, attempts, took.Round(time.Millisecond), scanBombServeBound, describe(res))
			stalled = true
		default:
			t.Errorf("%s, sent %v after %d scan bombs (%s) = %s (attempt %d); want OK, or RESOURCE_EXHAUSTED and served on a retry within %v (SE-4)",
				smallWhat, scanBombHeadStart, scanBombs, bombWhat, describe(res), attempts, scanBombServeBound)
		}
		break
	}
	probes, worst, bad := prober.end()
	t.Logf("SE-4 %d scan bombs: Health asked %d times while they were sent and the ordinary publish waited, slowest answer %v", scanBombs, probes, worst.Round(time.Millisecond))
	if len(bad) > 0 {
		t.Errorf("Health(producer) while %d scan bombs (%s) were sent: %d of %d answers not READY within %v: %s; want READY within %v each (SE-4: the engine never stalls its health checks)",
			scanBombs, bombWhat, len(bad), probes, healthAnswerBound, strings.Join(bad[:min(len(bad), 5)], ", "), healthAnswerBound)
	}
	if served != nil {
		h.expectAbortStatus(served.GetRef(), "the ordinary publish served beside the scan bombs", pb.AbortStatus_ABORT_STATUS_ABORTED)
	}
	// The bombs are cancelled by their client; those answered before are
	// logged (any answer is allowed) and released if published.
	cancelBombs()
	ended := time.NewTimer(cleanupTimeout)
	defer ended.Stop()
	var got []string
	for len(got) < scanBombs {
		select {
		case a := <-answers:
			got = append(got, fmt.Sprintf("%s after %v", codeName(a.res.Code()), a.took.Round(time.Millisecond)))
			if ready := a.res.EncoderReady(); ready != nil {
				h.expectAbortStatus(ready.GetRef(), "a scan bomb the producer published", pb.AbortStatus_ABORT_STATUS_ABORTED)
			}
		case <-ended.C:
			t.Fatalf("%d of %d %s still running %v after their client cancelled them; want each ended", scanBombs-len(got), scanBombs, bombWhat, cleanupTimeout)
		}
	}
	t.Logf("SE-4 %d scan bombs (%s) answered (or were cancelled): %s", scanBombs, bombWhat, strings.Join(got, ", "))
	if stalled {
		h.awaitPublishServed(small, scanBombCalmBound)
	}
	if counted {
		h.expectSettled("SE-4", "producer", h.prod, before, "after the scan bombs were cancelled or released", ObservableExportsEntries, ObservableExportsBytes)
	}
	h.expectReady("producer", h.prod)
}

// awaitPublishServed publishes img, again while it is answered anything
// but OK, until it is served (then released) or within passes; it only
// logs (a case that already failed uses it so the cases after it do not
// inherit a stalled producer).
func (h *harness) awaitPublishServed(img fixtures.Image, within time.Duration) {
	h.t.Helper()
	start := time.Now()
	for deadline := start.Add(within); time.Now().Before(deadline); {
		actx, cancel := context.WithDeadline(h.ctx, deadline)
		res := h.generateCtx(actx, h.prod, h.publishRequest(nil, imageItem(img)))
		cancel()
		if ready := res.EncoderReady(); res.Code() == codes.OK && ready != nil {
			got, err := h.abort(h.prod, ready.GetRef())
			h.t.Logf("note: the producer served Publish(%s) again %v after the case's failure (released: %s %s)", img.Name, time.Since(start).Round(time.Millisecond), got, statusString(err))
			return
		}
		if time.Now().Add(scanBombRetryPause).After(deadline) {
			break
		}
		h.waitMs(scanBombRetryPause.Milliseconds(), "waiting for the producer to serve a publish again")
	}
	h.t.Logf("note: the producer still served no Publish(%s) %v after the case's failure; the cases after it may find it stalled", img.Name, within)
}

// attackReceiveLimit is the receive limit the SE-4 oversize steps aim just
// under: 64 MiB, the reference engine's and the fault proxy's (a target
// with a smaller limit refuses the request itself, RESOURCE_EXHAUSTED).
const attackReceiveLimit = 64 << 20

// oversizeEndpointSteps is SE-4's A1 step (SE4AttackCorpusLeavesEnginesReady).
func (f *faultHarness) oversizeEndpointSteps(prompt string, calm func(after string)) {
	t := f.t
	t.Helper()
	ref := f.publish(fixture(t, faultImage)).GetRef()
	padded := func(size int) *pb.GenerateRequest {
		r := proto.Clone(ref).(*pb.EncoderCacheRef)
		if r.ProducerEndpoint == nil {
			r.ProducerEndpoint = &pb.KvEndpoint{}
		}
		req := f.consumeRequest(prompt, r)
		pad := 1
		for range 4 { // the length prefixes grow with the padding: converge
			r.ProducerEndpoint.Protocol = string(bytes.Repeat([]byte("g"), pad))
			pad += size - proto.Size(req)
		}
		r.ProducerEndpoint.Protocol = string(bytes.Repeat([]byte("g"), pad))
		return req
	}
	small := f.consumeRequest(prompt, ref)
	for _, step := range []struct {
		what    string
		req     *pb.GenerateRequest
		allowed []codes.Code
	}{
		{"producer_endpoint.protocol padded by 4 KiB", padded(proto.Size(small) + 4<<10), []codes.Code{codes.InvalidArgument}},
		{"producer_endpoint.protocol padded to a consume 8 bytes under 64 MiB", padded(attackReceiveLimit - 8), []codes.Code{codes.InvalidArgument, codes.ResourceExhausted}},
	} {
		res := f.consumerAnswer(f.ctx, step.req)
		call := consumeCall(ref, step.what)
		if !slices.Contains(step.allowed, res.Code()) || len(res.TokenIDs()) > 0 {
			t.Errorf("%s = %s; want one of %v before any token (SU-4: a malformed reference; the consumer must not forward it to its producer)", call, describe(res), step.allowed)
		}
		calm(step.what)
	}
	f.consumeOK(prompt, ref, "the reference the padded ones imitated")
}

// tracestateHeaderLimit is the header-list limit the SE-4 A2 step aims
// just under: gRPC's default, 16 MiB.
const tracestateHeaderLimit = 16 << 20

// oversizeTracestateStep is SE-4's A2 step (SE4AttackCorpusLeavesEnginesReady).
func (f *faultHarness) oversizeTracestateStep(prompt string, contract func(what string, code codes.Code), calm func(after string)) {
	t := f.t
	t.Helper()
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	with := func(n int) context.Context {
		return metadata.AppendToOutgoingContext(f.ctx, "traceparent", parent, "tracestate", "k="+string(bytes.Repeat([]byte("v"), n-2)))
	}
	accepts := func(n int) bool {
		return f.generateCtx(with(n), f.cons, f.baselineRequest(promptText(t, promptTextOnly))).Code() == codes.OK
	}
	lo, hi := tracestateHeaderLimit-2048, tracestateHeaderLimit // the largest tracestate the consumer's transport accepts
	if !accepts(lo) {
		t.Logf("note: the consumer refuses a text-only request with a %d-byte tracestate; the A2 step sends one of 512 bytes", lo)
		lo = 512
	} else {
		for hi-lo > 1 {
			if mid := (lo + hi) / 2; accepts(mid) {
				lo = mid
			} else {
				hi = mid
			}
		}
	}
	ref := f.publish(fixture(t, faultImage)).GetRef()
	res := f.generateCtx(with(lo), f.cons, f.consumeRequest(prompt, ref))
	what := fmt.Sprintf("Consume(tracestate of %d bytes)", lo)
	if res.Code() != codes.OK {
		contract(what, res.Code())
	}
	calm(what)
}

// SE5GRPCHealthMirrorsHealth: grpc.health.v1 says SERVING while Health is
// READY, and NOT_SERVING while it is DRAINING (a consumer draining a
// request) and NOT_READY (a producer whose cleanup failed, X-1).
func SE5GRPCHealthMirrorsHealth(ctx context.Context, t TB, tg target.Target) {
	f := needFaults(ctx, t, tg)
	if !f.profile.TestHooks {
		NotVerifiable(t, "needs the baton.cleanup_fail test hook (profile test_hooks) to make the producer NOT_READY")
	}
	if !f.profile.Destructive {
		NotVerifiable(t, "needs a destructive profile to shut the consumer down (DRAINING)")
	}
	prodHealth, ok1 := target.Capability[target.StandardHealth](f.prod)
	consHealth, ok2 := target.Capability[target.StandardHealth](f.cons)
	if !ok1 || !ok2 {
		NotVerifiable(t, "needs engines whose grpc.health.v1 the harness can ask (target.StandardHealth)")
	}
	defer f.poisoned(target.RoleConsumer, target.RoleProducer)()
	mirror := func(who string, e target.Engine, hs target.StandardHealth, want pb.HealthState) {
		t.Helper()
		resp, err := e.Health(ctx)
		if err != nil || resp.GetState() != want {
			HarnessError(t, "Health(%s) = %s %s; the case needs %s to check grpc.health.v1 against", who, resp.GetState(), statusString(err), want)
		}
		st, err := hs.ServingStatus(ctx)
		wantSt := healthpb.HealthCheckResponse_NOT_SERVING
		if want == pb.HealthState_HEALTH_STATE_READY {
			wantSt = healthpb.HealthCheckResponse_SERVING
		}
		if err != nil || st != wantSt {
			t.Errorf("grpc.health.v1 Check(%s) while Health is %s = %s %s; want %s (SE-5)", who, want, st, statusString(err), wantSt)
		}
	}
	mirror("producer", f.prod, prodHealth, pb.HealthState_HEALTH_STATE_READY)
	mirror("consumer", f.cons, consHealth, pb.HealthState_HEALTH_STATE_READY)
	// DRAINING: the consumer is shut down while a consume's reply is held.
	ready := f.publish(fixture(t, faultImage))
	done, cancel := f.stuckConsume(ready.GetRef())
	defer cancel()
	info, err := f.cons.GetServerInfo(ctx)
	if err != nil {
		HarnessError(t, "GetServerInfo(consumer): %s", statusString(err))
	}
	if _, err := f.cons.Shutdown(ctx, &pb.ShutdownRequest{ExpectedInstanceId: info.GetInstanceId(), DrainTimeoutMs: proto.Uint32(uint32((3 * stuckTransfer).Milliseconds()))}); err != nil {
		HarnessError(t, "Shutdown(consumer): %s", statusString(err))
	}
	mirror("consumer", f.cons, consHealth, pb.HealthState_HEALTH_STATE_DRAINING)
	<-done
	// NOT_READY: a removal of the producer fails (X-1, sticky until restart).
	req := f.publishRequest(nil, imageItem(fixture(t, faultImage)))
	req.Extra, _ = structpb.NewStruct(map[string]any{"baton.cleanup_fail": true})
	pub := f.generate(f.prod, req)
	if pub.EncoderReady() == nil {
		HarnessError(t, "publish with baton.cleanup_fail = %s", describe(pub))
	}
	if _, err := f.abort(f.prod, pub.EncoderReady().GetRef()); err == nil {
		t.Logf("note: Abort of an entry whose removal fails answered OK")
	}
	mirror("producer", f.prod, prodHealth, pb.HealthState_HEALTH_STATE_NOT_READY)
}

// securityCases are the and SE-3..SE-5 cases, in registry order.
func securityCases() []Case {
	n := EPD.with(func(n *Needs) { n.FaultProxy = true })
	return []Case{
		{Rule: "Q-2", Name: "Q-2 a trusted producer endpoint that refuses connections is definite: UNAVAILABLE, consumer READY, reference still live", Run: Q2RefusedConnectionIsDefinite,
			Needs: n.discovering("whether the harness can make the producer endpoint refuse connections (target.ConnectionRefuser: the fault proxy that baton check and conformance/launch run can)")},
		{Rule: "Q-6", Name: "Q-6 a consumer's quarantine ends once the producer that may have written is gone, and its next handoff succeeds", Run: Q6QuarantineEndsWhenProducerIsGone, Needs: n},
		{Rule: "Q-6", Name: "Q-6 a consumer's quarantine ends while the producer that hung recovers and lives on, and its next handoff succeeds", Run: Q6QuarantineEndsWhileProducerLives,
			Needs: n.with(func(n *Needs) { n.Observables = true })},
		{Rule: "SE-3", Name: "SE-3 a reference naming an untrusted producer endpoint is FAILED_PRECONDITION before any connection", Run: SE3UntrustedProducerEndpointRefused,
			Needs: EPD.with(func(n *Needs) { n.Transfer, n.UntrustedHost = true, true })},
		{Rule: "SE-3", Name: "SE-3 a producer asked to write to an untrusted consumer agent answers FAILED_PRECONDITION with the before-write trailer", Run: SE3UntrustedConsumerAgentRefused,
			Needs: EPD.with(func(n *Needs) { n.Backend, n.UntrustedHost, n.AgentFormat = "tcp", true, true })},
		{Rule: "SE-4", Name: "SE-4 forged, stale and unreachable references and abandoned transfers leave every engine READY", Run: SE4AttackCorpusLeavesEnginesReady, Needs: n, Labels: []string{LabelSlow}},
		{Rule: "SE-4", Name: "SE-4 concurrent heavy PNGs beyond the declared decode budget end RESOURCE_EXHAUSTED while Health stays READY", Run: SE4DecodeBudgetBoundsConcurrentImages,
			Needs: Needs{TestHooks: true, DecodeBudget: true}}, // E's alone: any topology
		{Rule: "SE-4", Name: "SE-4 progressive JPEGs of many scans do not stall the producer's other publishes", Run: SE4ScanBombsDoNotStallOtherPublishes, Needs: Needs{}}, // E's alone: any topology
		{Rule: "SE-5", Name: "SE-5 grpc.health.v1 mirrors Health through DRAINING and NOT_READY", Run: SE5GRPCHealthMirrorsHealth, Needs: n.with(func(n *Needs) { n.TestHooks = true })},
	}
}
