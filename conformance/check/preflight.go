package check

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/baton-dev/baton/conformance/suite"
	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/fixtures"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// ErrProfileMismatch is wrapped by the error of a probe whose target
// contradicts its profile: an endpoint of the wrong role, a declared
// backend the consumer does not accept, roles on different presets or
// models, a declared topology without its endpoints, a declared observable
// or test hook the target does not honour, a producer whose shared-directory
// entries the consumer cannot see. It is a configuration error (the CLI
// exits 3, reports.ExitSetup) found once, before any case, instead of as
// rule failures.
var ErrProfileMismatch = errors.New("check: the profile does not match the target")

// The preflight's own requests: one tiny image, a prompt no case uses (so
// its prefix-cache entries are never a case's), one token.
const (
	preflightImage  = "one-pixel.png"
	preflightPrompt = "<image> baton preflight: what colour is it?"
)

// wantRoles is CONTRACT section 1's table: the ServerInfo.engine_role and
// ModelInfo.encoder.role each role's endpoint must advertise.
var wantRoles = map[target.Role]struct {
	engine  pb.EngineRole
	encoder pb.EncoderRole
}{
	target.RoleProducer: {pb.EngineRole_ENGINE_ROLE_AGGREGATED, pb.EncoderRole_ENCODER_ROLE_PRODUCER},
	target.RoleConsumer: {pb.EngineRole_ENGINE_ROLE_AGGREGATED, pb.EncoderRole_ENCODER_ROLE_CONSUMER},
	target.RolePrefill:  {pb.EngineRole_ENGINE_ROLE_PREFILL, pb.EncoderRole_ENCODER_ROLE_CONSUMER},
	target.RoleDecode:   {pb.EngineRole_ENGINE_ROLE_DECODE, pb.EncoderRole_ENCODER_ROLE_NONE},
	target.RoleBaseline: {pb.EngineRole_ENGINE_ROLE_AGGREGATED, pb.EncoderRole_ENCODER_ROLE_NONE},
}

// ProfileProblems lists what is wrong with profile p and the roles it names
// endpoints for, decided without contacting anything (`baton check
// --dry-run` reports them too): a declared topology without an endpoint for
// one of its roles. One line per problem, naming the profile field.
func ProfileProblems(p target.Profile, roles []target.Role) []string {
	var out []string
	for _, topo := range p.Topologies {
		var missing []string
		for _, r := range suite.TopologyRoles(topo) {
			if !slices.Contains(roles, r) {
				missing = append(missing, string(r))
			}
		}
		if len(missing) > 0 {
			named := make([]string, len(roles))
			for i, r := range roles {
				named[i] = string(r)
			}
			out = append(out, fmt.Sprintf("topologies %v: %s needs an endpoint for %s; endpoints names only %s",
				p.Topologies, topo, strings.Join(missing, ", "), strings.Join(named, ", ")))
		}
	}
	return out
}

// endpointInfo is what the probe learnt of one endpoint.
type endpointInfo struct {
	role   target.Role
	engine target.Engine
	server *pb.ServerInfo
	model  *pb.ModelInfo
}

// where names an endpoint in a message: its role and, when known, address.
func (ei endpointInfo) where() string { return endpointName(ei.role, ei.engine) }

// endpointName is "consumer 127.0.0.1:7102", or "consumer endpoint" when
// the engine does not say where it is.
func endpointName(role target.Role, e target.Engine) string {
	if a, ok := e.(interface{ Address() string }); ok && a.Address() != "" {
		return string(role) + " " + a.Address()
	}
	return string(role) + " endpoint"
}

// preflight cross-checks the endpoints against each other and the profile
// (roles, backends, preset, model), then probes the capabilities the
// profile declares (observables, test hooks) and, over the shared
// directory, that the consumers see the producer's entries. It returns
// one line per problem.
func preflight(ctx context.Context, p target.Profile, infos []endpointInfo) []string {
	roles := make([]target.Role, len(infos))
	for i, ei := range infos {
		roles[i] = ei.role
	}
	out := ProfileProblems(p, roles)
	out = append(out, roleProblems(infos)...)
	out = append(out, backendProblems(p, infos)...)
	out = append(out, identityProblems(infos)...)
	if len(out) > 0 {
		return out // the endpoints are not what the profile says: probe nothing more
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	add := func(lines ...string) {
		mu.Lock()
		out = append(out, lines...)
		mu.Unlock()
	}
	if p.Observables {
		for _, ei := range infos {
			if ei.role == target.RoleDecode {
				continue // no case reads D's counters
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if line := observablesProblem(ctx, ei); line != "" {
					add(line)
				}
			}()
		}
	}
	if p.TestHooks {
		for _, ei := range infos {
			if ei.role != target.RoleProducer && ei.role != target.RoleBaseline {
				continue // the encoder hooks concern the roles that encode
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if line := hookProblem(ctx, p, ei); line != "" {
					add(line)
				}
			}()
		}
	}
	wg.Wait()
	out = append(out, sharedDirProblems(ctx, p, infos)...)
	return out
}

// roleProblems checks each endpoint against CONTRACT section 1's table. An
// unspecified engine role is not held against it (unknown enum values read
// as UNSPECIFIED, WIRE.md); a missing encoder extension on the producer or
// a consumer is ErrNotEncoderTarget's, checked before.
func roleProblems(infos []endpointInfo) []string {
	var out []string
	for _, ei := range infos {
		want := wantRoles[ei.role]
		engine := ei.server.GetEngineRole()
		encoder := ei.model.GetEncoder().GetRole()
		if want.encoder == pb.EncoderRole_ENCODER_ROLE_NONE && encoder == pb.EncoderRole_ENCODER_ROLE_UNSPECIFIED {
			encoder = pb.EncoderRole_ENCODER_ROLE_NONE // no extension: takes no part in the handoff
		}
		if (engine == pb.EngineRole_ENGINE_ROLE_UNSPECIFIED || engine == want.engine) && encoder == want.encoder {
			continue
		}
		out = append(out, fmt.Sprintf("endpoints.%s: %s advertises ServerInfo.engine_role %s and ModelInfo.encoder.role %s; a %s is %s and %s (CONTRACT section 1)%s",
			ei.role, ei.where(), engine, encoder, roleWord(ei.role), want.engine, want.encoder, guessRole(infos, ei, engine, encoder)))
	}
	return out
}

// roleWord names a role as CONTRACT section 1 does.
func roleWord(r target.Role) string {
	switch r {
	case target.RoleProducer:
		return "producer (E)"
	case target.RoleConsumer:
		return "consumer (PD)"
	case target.RolePrefill:
		return "prefill engine (P)"
	case target.RoleDecode:
		return "decode engine (D)"
	}
	return "baseline (aggregated engine)"
}

// guessRole says which role an endpoint advertises, when that is another
// role of the profile ("; is it the consumer?").
func guessRole(infos []endpointInfo, ei endpointInfo, engine pb.EngineRole, encoder pb.EncoderRole) string {
	for _, r := range probeRoles {
		w := wantRoles[r]
		if r != ei.role && (engine == pb.EngineRole_ENGINE_ROLE_UNSPECIFIED || w.engine == engine) && w.encoder == encoder {
			return fmt.Sprintf(": it advertises what a %s does; is endpoints.%s pointed at the wrong process?", roleWord(r), ei.role)
		}
	}
	return ""
}

// backendProblems checks the profile's backends (their names are checked
// when the profile file is read: target.KnownBackends): each must be
// accepted by every consumer (consumer, prefill: ModelInfo.encoder.backends),
// and the producer must publish on one of them.
func backendProblems(p target.Profile, infos []endpointInfo) []string {
	var out []string
	if len(p.Backends) == 0 {
		return nil
	}
	for _, ei := range infos {
		advertised := ei.model.GetEncoder().GetBackends()
		switch ei.role {
		case target.RoleConsumer, target.RolePrefill:
			var missing []string
			for _, b := range p.Backends {
				if !slices.Contains(advertised, b) {
					missing = append(missing, b)
				}
			}
			if len(missing) > 0 {
				out = append(out, fmt.Sprintf("backends %v: the %s does not accept %s (ModelInfo.encoder.backends %v)", p.Backends, ei.where(), strings.Join(missing, ", "), advertised))
			}
		case target.RoleProducer:
			if len(advertised) > 0 && !slices.ContainsFunc(advertised, func(b string) bool { return slices.Contains(p.Backends, b) }) {
				out = append(out, fmt.Sprintf("backends %v: the %s publishes on %v (ModelInfo.encoder.backends), none of them declared", p.Backends, ei.where(), advertised))
			}
		}
	}
	return out
}

// identityProblems checks the endpoints' identities, implementation by
// implementation (ServerInfo.engine_name): every endpoint of one
// implementation runs the same preprocessing preset
// (ServerInfo.extra["baton.preset"], where advertised) and the same model
// (GetModelInfo model_id and served_model_name), as CONTRACT section 4
// lets the harness check; a preset mismatch is reported alone (the model
// ids of two presets differ too). Two implementations may meet in one
// topology (a producer of one engine, a consumer of another: the
// cross-implementation matrix), and then run models of their own; the
// baseline must then be the consumer implementation's aggregated engine,
// since it answers for what the consumer computes (the cases that compare
// answers across the two models are not applicable, the suite decides).
func identityProblems(infos []endpointInfo) []string {
	byImpl := map[string][]endpointInfo{}
	var impls []string
	for _, ei := range infos {
		name := ei.server.GetEngineName()
		if _, seen := byImpl[name]; !seen {
			impls = append(impls, name)
		}
		byImpl[name] = append(byImpl[name], ei)
	}
	var out []string
	for _, impl := range impls {
		group := byImpl[impl]
		if line := disagreement(group, `preset: the endpoints run different presets (ServerInfo.extra["baton.preset"])`, func(ei endpointInfo) string {
			return ei.server.GetExtra().GetFields()["baton.preset"].GetStringValue()
		}); line != "" {
			out = append(out, line)
			continue
		}
		for _, f := range []struct {
			field string
			get   func(*pb.ModelInfo) string
		}{{"model_id", (*pb.ModelInfo).GetModelId}, {"served_model_name", (*pb.ModelInfo).GetServedModelName}} {
			if line := disagreement(group, "model: the endpoints serve different models (GetModelInfo."+f.field+")", func(ei endpointInfo) string { return f.get(ei.model) }); line != "" {
				out = append(out, line)
				break
			}
		}
	}
	named := 0
	for _, impl := range impls {
		if impl != "" {
			named++
		}
	}
	if named > 1 {
		var base, cons *endpointInfo
		for i := range infos {
			switch infos[i].role {
			case target.RoleBaseline:
				base = &infos[i]
			case target.RoleConsumer, target.RolePrefill:
				if cons == nil {
					cons = &infos[i]
				}
			}
		}
		if base != nil && cons != nil && base.server.GetEngineName() != "" && cons.server.GetEngineName() != "" && base.server.GetEngineName() != cons.server.GetEngineName() {
			out = append(out, fmt.Sprintf("endpoints.baseline: the %s is %q but the %s is %q; when two implementations meet in one topology the baseline is the consumer implementation's aggregated engine (ServerInfo.engine_name)",
				base.where(), base.server.GetEngineName(), cons.where(), cons.server.GetEngineName()))
		}
	}
	return out
}

// disagreement is "<what>: producer ... "a", consumer ... "b"" when the
// non-empty values of get differ between endpoints, else "".
func disagreement(infos []endpointInfo, what string, get func(endpointInfo) string) string {
	var parts []string
	distinct := map[string]bool{}
	for _, ei := range infos {
		v := get(ei)
		if v == "" {
			continue
		}
		distinct[v] = true
		parts = append(parts, fmt.Sprintf("%s %q", ei.where(), v))
	}
	if len(distinct) < 2 {
		return ""
	}
	return what + ": " + strings.Join(parts, ", ")
}

// observablesProblem checks that GetLoad on ei carries every CONTRACT
// section 4 counter as a number ("" when it does).
func observablesProblem(ctx context.Context, ei endpointInfo) string {
	cctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	info, err := ei.engine.GetLoad(cctx)
	if err != nil {
		return fmt.Sprintf("observables: true, but GetLoad on %s = %s (CONTRACT section 4)", ei.where(), callText(err))
	}
	fields := info.GetAttributes().GetFields()
	var missing, notNumber []string
	for _, k := range suite.Observables() {
		v, ok := fields[k]
		switch {
		case !ok:
			missing = append(missing, k)
		case !isNumber(v):
			notNumber = append(notNumber, fmt.Sprintf("%s = %v", k, v.AsInterface()))
		}
	}
	switch {
	case len(missing) > 0:
		return fmt.Sprintf("observables: true, but GetLoad on %s has no %s (CONTRACT section 4)", ei.where(), strings.Join(missing, ", "))
	case len(notNumber) > 0:
		return fmt.Sprintf("observables: true, but GetLoad on %s has %s, not a number (CONTRACT section 4)", ei.where(), strings.Join(notNumber, ", "))
	}
	return ""
}

func isNumber(v *structpb.Value) bool {
	_, ok := v.GetKind().(*structpb.Value_NumberValue)
	return ok
}

// hookProblem checks that ei honours a test hook whose effect the wire
// shows at once, so the check cannot depend on timing (CONTRACT section 4:
// hooks are honoured only when the server was started with test hooks on,
// ignored after a type check otherwise):
//
//   - the producer: baton.omit_content_hash on a publish of one tiny image
//     leaves the item without a content hash (the entry is released);
//   - the baseline: baton.encoder_fail fails the request's encoder step,
//     so it ends with a terminal error instead of tokens.
//
// Only an answer that shows the hook ignored (a content hash; tokens and a
// clean finish) is a problem; a request that fails otherwise is left to
// the cases.
func hookProblem(ctx context.Context, p target.Profile, ei endpointInfo) string {
	img, err := fixtures.ImageByName(preflightImage)
	if err != nil {
		return fmt.Sprintf("harness: fixture %s: %v", preflightImage, err)
	}
	req := &pb.GenerateRequest{RequestId: preflightID("hooks"), Model: p.Model, Media: []*pb.MediaItem{imageMedia(img)}}
	hook := hookOmitContentHash
	if ei.role == target.RoleProducer {
		req.Encoder = &pb.EncoderOptions{Mode: &pb.EncoderOptions_Publish{Publish: &pb.EncoderPublish{}}}
	} else {
		hook = hookEncoderFail
		req.Input = &pb.GenerateRequest_Prompt{Prompt: preflightPrompt}
		req.Stopping = &pb.StoppingOptions{MaxTokens: proto.Uint32(1)}
	}
	req.Extra, _ = structpb.NewStruct(map[string]any{hook: true})
	cctx, cancel := context.WithTimeout(ctx, 2*ProbeTimeout)
	defer cancel()
	res, err := ei.engine.Generate(cctx, req)
	if err != nil || res == nil || res.Status == nil || res.Code() != codes.OK {
		return ""
	}
	ignored := ""
	if ready := res.EncoderReady(); ready != nil {
		release(ctx, ei.engine, ready.GetRef())
		if items := ready.GetItems(); len(items) > 0 && items[0].GetContentHash() != "" {
			ignored = "its publish came back with a content hash"
		}
	}
	if hook == hookEncoderFail && res.EngineError() == nil && len(res.TokenIDs()) > 0 {
		ignored = "the request finished with tokens"
	}
	if ignored == "" {
		return ""
	}
	return fmt.Sprintf("test_hooks: true, but the %s did not honour %s: %s (CONTRACT section 4); was it started with test hooks on?", ei.where(), hook, ignored)
}

// The hooks the preflight sends (CONTRACT section 4).
const (
	hookOmitContentHash = "baton.omit_content_hash"
	hookEncoderFail     = "baton.encoder_fail"
)

// sharedDirProblems publishes one tiny image on the producer and consumes
// it on each consumer (consumer, prefill). Over the shared directory, a
// consumer that rejects the reference (INVALID_ARGUMENT) while the
// producer still holds the entry (its Abort answers ABORTED) cannot see the
// producer's directory; over a transfer backend (tcp, cuda_ipc), one that
// refuses it FAILED_PRECONDITION has a trust list that leaves the other
// side out (CONTRACT SE-3: the consumer's trusted producers, the
// producer's trusted consumer agents). Every reference and KV session the
// probe made is released. Other failures are left to the cases.
func sharedDirProblems(ctx context.Context, p target.Profile, infos []endpointInfo) []string {
	var prod *endpointInfo
	for i, ei := range infos {
		if ei.role == target.RoleProducer {
			prod = &infos[i]
		}
	}
	if prod == nil {
		return nil
	}
	img, err := fixtures.ImageByName(preflightImage)
	if err != nil {
		return []string{fmt.Sprintf("harness: fixture %s: %v", preflightImage, err)}
	}
	var out []string
	for _, ei := range infos {
		if ei.role != target.RoleConsumer && ei.role != target.RolePrefill {
			continue
		}
		if line := claimProblem(ctx, p, *prod, ei, img); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// claimProblem is sharedDirProblems for one consumer.
func claimProblem(ctx context.Context, p target.Profile, prod, cons endpointInfo, img fixtures.Image) string {
	cctx, cancel := context.WithTimeout(ctx, 2*ProbeTimeout)
	defer cancel()
	pub, err := prod.engine.Generate(cctx, &pb.GenerateRequest{
		RequestId: preflightID("publish"),
		Model:     p.Model,
		Media:     []*pb.MediaItem{imageMedia(img)},
		Encoder:   &pb.EncoderOptions{Mode: &pb.EncoderOptions_Publish{Publish: &pb.EncoderPublish{}}},
	})
	if err != nil || pub == nil || pub.EncoderReady() == nil {
		return "" // the cases judge a producer that cannot publish
	}
	ref := pub.EncoderReady().GetRef()
	transfer := ref.GetBackend() == "tcp" || ref.GetBackend() == "cuda_ipc"
	if ref.GetBackend() != sharedDirBackend && !transfer {
		release(ctx, prod.engine, ref)
		return ""
	}
	res, err := cons.engine.Generate(cctx, &pb.GenerateRequest{
		RequestId: preflightID("consume"),
		Model:     p.Model,
		Input:     &pb.GenerateRequest_Prompt{Prompt: preflightPrompt},
		Stopping:  &pb.StoppingOptions{MaxTokens: proto.Uint32(1)},
		Encoder:   &pb.EncoderOptions{Mode: &pb.EncoderOptions_Consume{Consume: ref}},
	})
	if err == nil && res != nil {
		for _, r := range res.Responses {
			if s := r.GetPrefillReady().GetKvSession(); s != nil {
				_, _ = cons.engine.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_KvSession{KvSession: s}})
			}
		}
	}
	st := release(ctx, prod.engine, ref)
	if transfer {
		// A trust list that leaves the other side out (CONTRACT SE-3) refuses
		// the first valid handoff before any connection or byte.
		if err != nil || res == nil || res.Code() != codes.FailedPrecondition || st != pb.AbortStatus_ABORT_STATUS_ABORTED {
			return ""
		}
		return fmt.Sprintf("backends [%s]: the %s refuses a fresh reference of the %s: consume = code FAILED_PRECONDITION (%s) while the producer still held the entry (Abort = ABORTED); do the consumer's trusted producers include the producer_endpoint the references name (%s), and the producer's trusted consumers the consumer's transfer agent (CONTRACT SE-3; with the harness's fault proxy the references name the proxy)?",
			ref.GetBackend(), cons.where(), prod.where(), shorten(res.Status.Message(), 120), endpointText(ref.GetProducerEndpoint()))
	}
	if err != nil || res == nil || res.Code() != codes.InvalidArgument || st != pb.AbortStatus_ABORT_STATUS_ABORTED {
		return ""
	}
	return fmt.Sprintf("backends [%s]: the %s cannot claim the %s's entries: its consume of a fresh reference = code INVALID_ARGUMENT (%s) while the producer still held the entry (Abort = ABORTED); do they share one cache directory?",
		sharedDirBackend, cons.where(), prod.where(), shorten(res.Status.Message(), 120))
}

// endpointText is a KvEndpoint as host:port ("none" when absent).
func endpointText(e *pb.KvEndpoint) string {
	if e == nil {
		return "none"
	}
	return net.JoinHostPort(e.GetHost(), strconv.Itoa(int(e.GetPort())))
}

// release aborts ref on the producer (bounded by ProbeTimeout) and returns
// the answer (UNSPECIFIED on an error).
func release(ctx context.Context, e target.Engine, ref *pb.EncoderCacheRef) pb.AbortStatus {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ProbeTimeout)
	defer cancel()
	resp, err := e.Abort(cctx, &pb.AbortRequest{Target: &pb.AbortRequest_EncoderCache{EncoderCache: ref}})
	if err != nil {
		return pb.AbortStatus_ABORT_STATUS_UNSPECIFIED
	}
	return resp.GetStatus()
}

// sharedDirBackend is EncoderCacheRef.backend of the shared directory.
const sharedDirBackend = "shared_dir"

// imageMedia is img as a raw-bytes MediaItem.
func imageMedia(img fixtures.Image) *pb.MediaItem {
	return &pb.MediaItem{Modality: pb.Modality_MODALITY_IMAGE, MimeType: "image/" + img.Format, Source: &pb.MediaItem_RawBytes{RawBytes: img.Data}}
}

// preflightID is a fresh request id ("preflight-hooks-<16 hex>").
func preflightID(kind string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "preflight-" + kind + "-" + hex.EncodeToString(b[:])
}
