package suite

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/internal/devcert"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Security cases (CONTRACT SE-1, SE-2): feature rules, checked at every
// level when the profile declares the feature (FeatureRules).

// Labels of the feature cases: a case that needs a feature the profile
// does not declare never runs (FeatureFilter) and its rule is not in the
// report (RulesForProfile).
const (
	// LabelNeedsTLS marks an SE-1 case (the profile's tls block).
	LabelNeedsTLS = "needs:" + FeatureTLS
	// LabelNeedsAuthorization marks an SE-2 case (the profile's
	// authorization block).
	LabelNeedsAuthorization = "needs:" + FeatureAuthorization
)

// Declared reports whether profile p declares feature (FeatureTLS: a tls
// block; FeatureAuthorization: an authorization block).
func Declared(p target.Profile, feature string) bool {
	switch feature {
	case FeatureTLS:
		return p.TLS != nil
	case FeatureAuthorization:
		return p.Authorization != nil
	}
	return false
}

// RulesForProfile returns the level table levels (level name -> rule IDs,
// as RulesByLevel gives it) with the feature rules p declares added to the
// core level, which every claim covers (CONTRACT section 5: "SE-1 and SE-2
// are checked at every level when the profile declares tls or
// authorization"). Undeclared feature rules stay out, so they are not in
// the report. levels is not modified.
func RulesForProfile(levels map[string][]string, p target.Profile) map[string][]string {
	out := make(map[string][]string, len(levels))
	for l, rules := range levels {
		out[l] = slices.Clone(rules)
	}
	core := string(LevelCore)
	if _, ok := out[core]; !ok {
		return out
	}
	for _, f := range FeatureRules() {
		if Declared(p, f.Feature) && !slices.Contains(out[core], f.Rule) {
			out[core] = append(out[core], f.Rule)
		}
	}
	return out
}

// FeatureFilter narrows the Ginkgo label filter filter to the cases whose
// features p declares: "(filter) && !needs:tls" when p declares no tls
// block, and so on; filter unchanged when p declares every feature.
func FeatureFilter(filter string, p target.Profile) string {
	var not []string
	for _, f := range FeatureRules() {
		if !Declared(p, f.Feature) {
			not = append(not, "!needs:"+f.Feature)
		}
	}
	if len(not) == 0 {
		return filter
	}
	n := strings.Join(not, " && ")
	if strings.TrimSpace(filter) == "" {
		return n
	}
	return "(" + filter + ") && " + n
}

// FeaturesDeclared reports whether p declares every feature a case with
// labels needs (its needs:<feature> labels).
func FeaturesDeclared(p target.Profile, labels []string) bool {
	for _, f := range FeatureRules() {
		if slices.Contains(labels, "needs:"+f.Feature) && !Declared(p, f.Feature) {
			return false
		}
	}
	return true
}

// probeWait bounds one probe of a listener: the wait for its first answer,
// and how long a silent accepted connection is watched.
const probeWait = 2 * time.Second

// listener is one listener an SE-1 case probes.
type listener struct {
	who, kind, address string
	hello              []byte
}

// config is base for this listener: gRPC negotiates HTTP/2 by ALPN (gRPC
// servers refuse a TLS connection without it), metrics HTTP/1.1.
func (l listener) config(base *tls.Config) *tls.Config {
	c := base.Clone()
	switch l.kind {
	case "grpc":
		c.NextProtos = []string{"h2"}
	case target.ListenerMetrics:
		c.NextProtos = []string{"http/1.1"}
	}
	return c
}

// tlsListeners are the target's gRPC endpoints and its declared other
// listeners; a gRPC endpoint the harness cannot name an address for ends
// the case not verifiable.
func tlsListeners(t TB, tg target.Target) []listener {
	t.Helper()
	var out []listener
	for _, role := range allRoles {
		e, ok := tg.Engine(role)
		if !ok {
			continue
		}
		g := target.Dialled(e)
		if g == nil || g.Address() == "" {
			NotVerifiable(t, fmt.Sprintf("the harness reaches the %s otherwise than over gRPC, so it cannot probe its listener", role))
		}
		out = append(out, listener{who: string(role) + " gRPC", kind: "grpc", address: g.Address(), hello: target.HTTP2Preface})
	}
	for _, l := range tg.Profile().TLS.Listeners {
		hello := []byte(nil)
		if l.Kind == target.ListenerMetrics {
			hello = target.MetricsRequest
		}
		out = append(out, listener{who: string(l.Role) + " " + l.Kind, kind: l.Kind, address: l.Address, hello: hello})
	}
	if len(out) == 0 {
		HarnessError(t, "the target names no engine")
	}
	return out
}

// needTLS ends the case not applicable unless the profile declares tls,
// and returns the harness's client configuration (its own certificate).
func needTLS(t TB, p target.Profile) *tls.Config {
	t.Helper()
	if p.TLS == nil {
		NotApplicable(t, "the profile declares no tls block (SE-1 applies when it does)")
	}
	cfg, err := p.NonOperatorTLS().ClientConfig()
	if err != nil {
		HarnessError(t, "the profile's tls settings: %v", err)
	}
	return cfg
}

// SE1ListenersServeTLS connects to every gRPC endpoint and every declared listener with the profile's TLS settings (the connection is accepted and answered) and in plaintext (refused: a plaintext gRPC call fails, a plaintext GET /metrics gets no 2xx) (SE-1).
func SE1ListenersServeTLS(ctx context.Context, t TB, tg target.Target) {
	cfg := needTLS(t, tg.Profile())
	for _, l := range tlsListeners(t, tg) {
		probe, err := target.ProbeTLS(ctx, l.address, l.config(cfg), l.hello, probeWait)
		switch {
		case err != nil:
			t.Errorf("%s at %s: cannot connect: %v", l.who, l.address, err)
			continue
		case !probe.Accepted():
			t.Errorf("%s at %s over TLS with the profile's settings: %s; want the connection served", l.who, l.address, probe)
		case l.kind == "grpc" && !isHTTP2Settings(probe.Answer):
			t.Errorf("%s at %s over TLS answered %q; want an HTTP/2 SETTINGS frame (gRPC)", l.who, l.address, probe.Answer)
		case l.kind == target.ListenerMetrics && !bytes.HasPrefix(probe.Answer, []byte("HTTP/1.")):
			t.Errorf("%s at %s over TLS answered %q; want an HTTP response", l.who, l.address, probe.Answer)
		}
		switch l.kind {
		case "grpc":
			if healthAnswers(ctx, t, l.address) {
				t.Errorf("%s at %s answered Health in plaintext; want plaintext refused (every listener serves TLS)", l.who, l.address)
			}
		case target.ListenerMetrics:
			p, err := target.ProbePlain(ctx, l.address, target.MetricsRequest, probeWait)
			if err == nil && (bytes.HasPrefix(p.Answer, []byte("HTTP/1.1 2")) || bytes.HasPrefix(p.Answer, []byte("HTTP/1.0 2"))) {
				t.Errorf("%s at %s answered GET /metrics in plaintext with %q; want plaintext refused", l.who, l.address, p.Answer)
			}
		}
	}
}

// healthAnswers reports whether a new connection to address made with
// opts (plaintext without any) gets an answer to Health within probeWait.
func healthAnswers(ctx context.Context, t TB, address string, opts ...target.DialOption) bool {
	t.Helper()
	e, err := target.DialEngine(address, opts...)
	if err != nil {
		HarnessError(t, "dial %s: %v", address, err)
	}
	defer e.Close()
	hctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	_, err = e.Health(hctx)
	return err == nil
}

// isHTTP2Settings reports whether b starts with an HTTP/2 SETTINGS frame
// header (type 0x4 at byte 3).
func isHTTP2Settings(b []byte) bool { return len(b) >= 9 && b[3] == 0x4 }

// SE1ClientWithoutValidCertificateRefused connects to every gRPC endpoint and every declared listener without a client certificate and with a self-signed one: with client authentication declared, each connection is refused in the TLS handshake, before the server answers a byte of its protocol, and a gRPC call without a certificate fails (SE-1).
func SE1ClientWithoutValidCertificateRefused(ctx context.Context, t TB, tg target.Target) {
	p := tg.Profile()
	cfg := needTLS(t, p)
	if !p.TLS.ClientAuth {
		NotApplicable(t, "the profile does not declare tls.client_auth (mutual TLS), so a client without a certificate may be served")
	}
	stranger, err := devcert.SelfSigned("baton-se1-stranger")
	if err != nil {
		HarnessError(t, "generate a self-signed certificate: %v", err)
	}
	clients := []struct {
		what string
		cfg  *tls.Config
	}{{"without a client certificate", cfg.Clone()}, {"with a self-signed client certificate", cfg.Clone()}}
	clients[0].cfg.Certificates = nil
	clients[1].cfg.Certificates = []tls.Certificate{stranger}
	for _, l := range tlsListeners(t, tg) {
		for _, c := range clients {
			probe, err := target.ProbeTLS(ctx, l.address, l.config(c.cfg), l.hello, probeWait)
			if err != nil {
				t.Errorf("%s at %s: cannot connect: %v", l.who, l.address, err)
				continue
			}
			if probe.Accepted() {
				t.Errorf("%s at %s, TLS %s: %s; want the handshake refused before any handler runs", l.who, l.address, c.what, probe)
			}
		}
		if l.kind != "grpc" {
			continue
		}
		noCert := *p.NonOperatorTLS()
		noCert.CertFile, noCert.KeyFile, noCert.ClientAuth = "", "", false
		if healthAnswers(ctx, t, l.address, target.WithTLS(&noCert)) {
			t.Errorf("%s at %s answered Health to a client without a certificate; want it refused", l.who, l.address)
		}
	}
}

// needAuthorization ends the case not applicable unless the profile
// declares authorization.
func needAuthorization(t TB, p target.Profile) {
	t.Helper()
	if p.Authorization == nil {
		NotApplicable(t, "the profile declares no authorization block (SE-2 applies when it does)")
	}
}

// randomToken is a bearer token for a caller the harness makes up.
func randomToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "baton-se2-" + hex.EncodeToString(b[:])
}

// nonOperator is the engine e as a non-operator reaches it, and its close
// function: e itself when the operator is a token (the calls then carry
// another caller's token, target.WithCaller), a new connection with the
// profile's own tls certificate when the operator is a certificate.
func nonOperator(t TB, p target.Profile, who string, e target.Engine) (target.Engine, func()) {
	t.Helper()
	if p.Authorization.Operator.CertFile == "" {
		return e, func() {}
	}
	g := target.Dialled(e)
	if g == nil {
		NotVerifiable(t, fmt.Sprintf("the harness reaches the %s otherwise than over gRPC, so it cannot call it without the operator's certificate", who))
	}
	x, err := g.Redial(target.WithTLS(p.NonOperatorTLS()))
	if err != nil {
		HarnessError(t, "dial the %s as a non-operator: %v", who, err)
	}
	return x, func() { x.Close() }
}

// SE2NonOperatorCallsDenied sends every engine Shutdown (with its own instance id) and Abort(all_requests) as an anonymous caller and as a caller with a made-up token: PERMISSION_DENIED, the engine neither drains nor changes instance, and (with test hooks) a held publish survives them; the operator's Shutdown with a foreign id gets S-1's refusal, not PERMISSION_DENIED, and its Abort(all_requests) is accepted (SE-2).
func SE2NonOperatorCallsDenied(ctx context.Context, t TB, tg target.Target) {
	p := tg.Profile()
	needAuthorization(t, p)
	h := newHarness(ctx, t, tg)
	defer h.cleanup()
	callers := []struct{ what, token string }{{"an anonymous caller", ""}, {"a non-operator caller", randomToken()}}
	all := &pb.AbortRequest{Target: &pb.AbortRequest_AllRequests{AllRequests: &pb.AllRequests{}}}
	visited := 0
	for _, role := range allRoles {
		e, ok := tg.Engine(role)
		if !ok {
			continue
		}
		visited++
		who := string(role)
		id := h.instanceID(who, e)
		x, done := nonOperator(t, p, who, e)
		for _, c := range callers {
			cctx := target.WithCaller(ctx, c.token)
			if resp, err := x.Shutdown(cctx, &pb.ShutdownRequest{ExpectedInstanceId: id, DrainTimeoutMs: proto.Uint32(shutdownDrainMs)}); status.Code(err) != codes.PermissionDenied {
				t.Errorf("Shutdown(%s, its own instance id) by %s = %s; want PERMISSION_DENIED (an operator call)", who, c.what, shutdownOrCode(resp, err))
			}
			if resp, err := x.Abort(cctx, all); status.Code(err) != codes.PermissionDenied {
				t.Errorf("Abort(%s, all_requests) by %s = %s; want PERMISSION_DENIED (an operator call)", who, c.what, abortOrCode(resp, err))
			}
		}
		done()
		// The operator passes authorization: its Shutdown reaches the S-1
		// decision (a foreign id is refused by S-1, not by SE-2).
		other := newUUID()
		if resp, err := e.Shutdown(ctx, &pb.ShutdownRequest{ExpectedInstanceId: other}); status.Code(err) == codes.PermissionDenied || err == nil {
			t.Errorf("Shutdown(%s, a foreign instance id) by the operator = %s; want the S-1 refusal (FAILED_PRECONDITION), not PERMISSION_DENIED", who, shutdownOrCode(resp, err))
		}
		health, err := e.Health(ctx)
		switch {
		case err != nil:
			t.Fatalf("Health(%s) after denied operator calls = %s; want the engine serving", who, statusString(err))
		case health.GetState() == pb.HealthState_HEALTH_STATE_DRAINING:
			t.Fatalf("Health(%s) after a non-operator's Shutdown = DRAINING; want nothing started", who)
		}
		if now := h.instanceID(who, e); now != id {
			t.Errorf("GetServerInfo(%s).instance_id changed from %s to %s after denied operator calls; want the same instance", who, id, now)
		}
	}
	if visited == 0 {
		HarnessError(t, "the target names no engine")
	}
	if h.prod != nil && p.TestHooks {
		// A held publish of another caller survives a non-operator's
		// Abort(all_requests).
		x, done := nonOperator(t, p, "producer", h.prod)
		defer done()
		alice := *h
		alice.ctx = target.WithCaller(ctx, randomToken())
		req := withExtra(h.publishRequest(nil, imageItem(fixture(t, faultImage))), map[string]any{HookEncoderDelayMs: se2HoldMs})
		req.RequestId = newRequestID("se2-held")
		_, held := alice.startHeld(x, req)
		if resp, err := x.Abort(target.WithCaller(ctx, randomToken()), all); status.Code(err) != codes.PermissionDenied {
			t.Errorf("Abort(producer, all_requests) by a non-operator during a held publish = %s; want PERMISSION_DENIED", abortOrCode(resp, err))
		}
		res := <-held
		if ready := encoderReadyOf(res); ready != nil {
			h.track(ready.GetRef())
		}
		if res.Status == nil || res.Status.Code() != codes.OK {
			t.Errorf("a held publish after a non-operator's Abort(all_requests) = %s; want it to finish OK", describe(res))
		}
	}
	for _, role := range allRoles {
		if e, ok := tg.Engine(role); ok {
			if resp, err := e.Abort(ctx, all); err != nil {
				t.Errorf("Abort(%s, all_requests) by the operator = %s; want it accepted", role, abortOrCode(resp, err))
			}
		}
	}
}

// se2HoldMs holds the SE-2 cases' publishes long enough for another
// caller's Aborts to reach them.
const se2HoldMs = 1500

// encoderReadyOf is res's EncoderReady, or nil.
func encoderReadyOf(res *target.GenerateResult) *pb.EncoderReady {
	if res == nil {
		return nil
	}
	return res.EncoderReady()
}

// SE2AbortOfAnotherCallersRequestDoesNotCancelIt starts a held publish as one caller and aborts its request id, again and again until it ends, as another caller and as an anonymous one: no Abort answers ABORTED and the publish finishes OK with its EncoderReady (SE-2).
func SE2AbortOfAnotherCallersRequestDoesNotCancelIt(ctx context.Context, t TB, tg target.Target) {
	p := tg.Profile()
	needAuthorization(t, p)
	h := newHarness(ctx, t, tg)
	if h.prod == nil {
		NotApplicable(t, "the target has no producer, whose held publish the case aborts")
	}
	defer h.cleanup()
	x, done := nonOperator(t, p, "producer", h.prod)
	defer done()
	alice := *h
	alice.ctx = target.WithCaller(ctx, randomToken())
	id := newRequestID("se2-alice")
	req := withExtra(h.publishRequest(nil, imageItem(fixture(t, faultImage))), map[string]any{HookEncoderDelayMs: se2HoldMs})
	req.RequestId = id
	_, held := alice.startHeld(x, req)
	others := []struct{ what, token string }{{"another caller", randomToken()}, {"an anonymous caller", ""}}
	aborts := 0
	var res *target.GenerateResult
	for res == nil {
		for _, o := range others {
			resp, err := x.Abort(target.WithCaller(ctx, o.token), &pb.AbortRequest{Target: &pb.AbortRequest_RequestId{RequestId: id}})
			aborts++
			if err == nil && resp.GetStatus() == pb.AbortStatus_ABORT_STATUS_ABORTED {
				t.Errorf("Abort(request_id %s) by %s = ABORTED; want the request of another caller left running", id, o.what)
			}
		}
		select {
		case res = <-held:
		case <-time.After(pollInterval):
		}
	}
	if ready := encoderReadyOf(res); ready != nil {
		h.track(ready.GetRef())
	}
	if res.Status == nil || res.Status.Code() != codes.OK || encoderReadyOf(res) == nil {
		t.Errorf("the publish of one caller after %d Aborts of its request id by others = %s; want it to finish OK with its EncoderReady", aborts, describe(res))
	}
}

// SE2OperatorShutdownAccepted shuts the producer down with the operator's credential (which every connection of the harness presents): ACCEPTED, after a non-operator's identical Shutdown was PERMISSION_DENIED; the harness then restarts it (SE-2; destructive).
func SE2OperatorShutdownAccepted(ctx context.Context, t TB, tg target.Target) {
	p := tg.Profile()
	needAuthorization(t, p)
	h := newHarness(ctx, t, tg)
	if !p.Destructive {
		NotVerifiable(t, "the profile does not allow destructive cases (destructive: false), so the operator's Shutdown is unchecked")
	}
	rs, ok := tg.(target.Restarter)
	if !ok {
		NotVerifiable(t, "the operator's accepted Shutdown needs an instance the harness can restart (CONTRACT section 4)")
	}
	role, e := target.RoleProducer, h.prod
	if e == nil {
		role, e = target.RoleBaseline, h.base
	}
	if e == nil {
		NotApplicable(t, "the target has neither a producer nor a baseline to shut down")
	}
	who := string(role)
	if _, err := e.Health(ctx); err != nil {
		HarnessError(t, "the %s does not answer Health (%s) before its Shutdown", who, statusString(err))
	}
	id := h.instanceID(who, e)
	x, done := nonOperator(t, p, who, e)
	resp, err := x.Shutdown(target.WithCaller(ctx, randomToken()), &pb.ShutdownRequest{ExpectedInstanceId: id})
	done()
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("Shutdown(%s) by a non-operator = %s; want PERMISSION_DENIED", who, shutdownOrCode(resp, err))
	}
	resp, err = e.Shutdown(ctx, &pb.ShutdownRequest{ExpectedInstanceId: id, DrainTimeoutMs: proto.Uint32(shutdownDrainMs)})
	if err != nil || resp.GetStatus() != pb.ShutdownStatus_SHUTDOWN_STATUS_ACCEPTED {
		t.Errorf("Shutdown(%s) by the operator = %s; want ACCEPTED", who, shutdownOrCode(resp, err))
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := rs.Restart(rctx, role); err != nil {
		t.Errorf("harness error: restart the %s after the operator's Shutdown: %v", who, err)
	}
}

// shutdownOrCode renders a Shutdown's answer.
func shutdownOrCode(resp *pb.ShutdownResponse, err error) string {
	if err != nil {
		return statusString(err)
	}
	return shutdownName(resp.GetStatus())
}

// abortOrCode renders an Abort's answer.
func abortOrCode(resp *pb.AbortResponse, err error) string {
	if err != nil {
		return statusString(err)
	}
	return abortName(resp.GetStatus())
}
