package check

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/baton-dev/baton/conformance/target"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"github.com/baton-dev/baton/reports"
	"google.golang.org/grpc/status"
)

// Recorder records every call the cases make to the target, per case: the
// transcript that report.html shows for a failed case, and the publish and
// consume latencies it plots. Calls are keyed by the case running when
// they are made (keyOf; Run uses the current Ginkgo spec's name); calls
// made outside any case are not recorded. Each case keeps at most
// reports.TranscriptMaxCalls calls and each latency series at most
// reports.LatencyMaxSamples samples. Safe for concurrent use (cases make
// concurrent calls, e.g. SU-1).
type Recorder struct {
	keyOf func() (caseName string, labels []string)
	now   func() time.Time

	mu      sync.Mutex
	cases   map[string]*caseLog
	latency map[[2]string][]float64 // (topology, phase) -> ms
	at      map[[2]string][]float64 // (topology, phase) -> ms since origin, when each call started
	origin  time.Time               // when the Recorder was made: the run's start
}

type caseLog struct {
	start    time.Time
	calls    []reports.Call
	dropped  int
	backends []string // of the consumes that answered OK, sorted
}

// NewRecorder returns a Recorder that files calls under keyOf's case name
// ("" = not inside a case: not recorded) and reads time from now.
func NewRecorder(keyOf func() (string, []string), now func() time.Time) *Recorder {
	return &Recorder{keyOf: keyOf, now: now, cases: map[string]*caseLog{}, latency: map[[2]string][]float64{}, at: map[[2]string][]float64{}, origin: now()}
}

// Transcript returns the calls recorded for caseName and how many were
// dropped once the transcript was full.
func (r *Recorder) Transcript(caseName string) ([]reports.Call, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cl := r.cases[caseName]
	if cl == nil {
		return nil, 0
	}
	return slices.Clone(cl.calls), cl.dropped
}

// Backends returns the backends caseName handed off over (each consume
// that answered OK, by EncoderCacheRef.backend), sorted.
func (r *Recorder) Backends(caseName string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cl := r.cases[caseName]; cl != nil {
		return slices.Clone(cl.backends)
	}
	return nil
}

// Latencies returns the recorded handoff latencies per (topology, phase),
// ordered E+PD, E+P+D, then others; publish before consume.
func (r *Recorder) Latencies() []reports.LatencySeries {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([][2]string, 0, len(r.latency))
	for k := range r.latency {
		keys = append(keys, k)
	}
	rank := func(t string) int {
		switch t {
		case target.TopologyEPD:
			return 0
		case target.TopologyEPPD:
			return 1
		}
		return 2
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if rank(a[0]) != rank(b[0]) {
			return rank(a[0]) < rank(b[0])
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		return a[1] > b[1] // "publish" before "consume"
	})
	out := make([]reports.LatencySeries, 0, len(keys))
	for _, k := range keys {
		out = append(out, reports.LatencySeries{Topology: k[0], Phase: k[1], SamplesMs: slices.Clone(r.latency[k]), AtMs: slices.Clone(r.at[k])})
	}
	return out
}

// record files one finished call; backend is the backend a consume that
// answered OK handed off over ("" for any other call).
func (r *Recorder) record(role target.Role, method, request string, start time.Time, code, response, phase, backend string) {
	name, labels := r.keyOf()
	if name == "" {
		return
	}
	end := r.now()
	latencyMs := float64(end.Sub(start).Microseconds()) / 1000
	r.mu.Lock()
	defer r.mu.Unlock()
	cl := r.cases[name]
	if cl == nil {
		cl = &caseLog{start: start}
		r.cases[name] = cl
	}
	if len(cl.calls) >= reports.TranscriptMaxCalls {
		cl.dropped++
	} else {
		cl.calls = append(cl.calls, reports.Call{
			Role:      string(role),
			Method:    method,
			Request:   clip(request),
			Code:      code,
			Response:  clip(response),
			StartMs:   float64(start.Sub(cl.start).Microseconds()) / 1000,
			LatencyMs: latencyMs,
		})
	}
	if backend != "" && !slices.Contains(cl.backends, backend) {
		cl.backends = append(cl.backends, backend)
		slices.Sort(cl.backends)
	}
	if phase != "" && code == "OK" {
		k := [2]string{topologyOf(labels, role), phase}
		if len(r.latency[k]) < reports.LatencyMaxSamples {
			r.latency[k] = append(r.latency[k], latencyMs)
			r.at[k] = append(r.at[k], float64(start.Sub(r.origin).Microseconds())/1000)
		}
	}
}

// topologyOf is the topology a call belongs to: the case's topology label,
// else the role's (prefill and decode are E+P+D, everything else E+PD).
func topologyOf(labels []string, role target.Role) string {
	for _, l := range labels {
		if t, ok := strings.CutPrefix(l, reports.TopologyLabelPrefix); ok {
			return t
		}
	}
	if role == target.RolePrefill || role == target.RoleDecode {
		return target.TopologyEPPD
	}
	return target.TopologyEPD
}

// clip bounds a summary to reports.TranscriptMaxRunes runes.
func clip(s string) string {
	if utf8.RuneCountInString(s) <= reports.TranscriptMaxRunes {
		return s
	}
	return string([]rune(s)[:reports.TranscriptMaxRunes-3]) + "..."
}

// Engine wraps e so that every call is recorded under role.
func (r *Recorder) Engine(role target.Role, e target.Engine) target.Engine {
	return &recordingEngine{Engine: e, role: role, rec: r}
}

// recordingEngine is a target.Engine that records each call (method,
// redacted request summary, gRPC code, response summary, latency).
type recordingEngine struct {
	target.Engine
	role target.Role
	rec  *Recorder
}

// UnwrapEngine implements target.EngineWrapper: the suite's
// target.Capability finds the other capabilities of the wrapped engine
// (their calls are not recorded).
func (e *recordingEngine) UnwrapEngine() target.Engine { return e.Engine }

// Generate calls the wrapped engine and records the call under the current
// case: the redacted request, the gRPC code, a summary of the stream's end and
// the latency, which also joins the publish (producer) or consume (consumer or
// prefill) latency series.
func (e *recordingEngine) Generate(ctx context.Context, req *pb.GenerateRequest) (*target.GenerateResult, error) {
	start := e.rec.now()
	res, err := e.Engine.Generate(ctx, req)
	phase := ""
	switch {
	case req.GetEncoder().GetPublish() != nil && e.role == target.RoleProducer:
		phase = reports.PhasePublish
	case req.GetEncoder().GetConsume() != nil && (e.role == target.RoleConsumer || e.role == target.RolePrefill):
		phase = reports.PhaseConsume
	}
	code, resp := generateSummary(res, err)
	backend := ""
	if phase == reports.PhaseConsume && code == "OK" && res.EngineError() == nil {
		backend = req.GetEncoder().GetConsume().GetBackend()
	}
	e.rec.record(e.role, "Generate", GenerateRequestSummary(req), start, code, resp, phase, backend)
	return res, err
}

// GetServerInfo calls the wrapped engine and records the call (code, role,
// instance id, schema revision, latency).
func (e *recordingEngine) GetServerInfo(ctx context.Context) (*pb.ServerInfo, error) {
	start := e.rec.now()
	si, err := e.Engine.GetServerInfo(ctx)
	code, resp := unarySummary(err)
	if err == nil {
		resp = fmt.Sprintf("role %s, instance %s, schema_revision %d", si.GetEngineRole(), si.GetInstanceId(), si.GetSchemaRevision())
	}
	e.rec.record(e.role, "GetServerInfo", "", start, code, resp, "", "")
	return si, err
}

// GetModelInfo calls the wrapped engine and records the call (model, code,
// whether the model has an encoder and its role, latency).
func (e *recordingEngine) GetModelInfo(ctx context.Context, model string) (*pb.ModelInfo, error) {
	start := e.rec.now()
	mi, err := e.Engine.GetModelInfo(ctx, model)
	code, resp := unarySummary(err)
	if err == nil {
		enc := mi.GetEncoder()
		resp = fmt.Sprintf("model %s, encoder %v", mi.GetModelId(), enc != nil)
		if enc != nil {
			resp += fmt.Sprintf(" (role %s)", enc.GetRole())
		}
	}
	e.rec.record(e.role, "GetModelInfo", fmt.Sprintf("model=%q", model), start, code, resp, "", "")
	return mi, err
}

// GetLoad calls the wrapped engine and records the call (code, the CONTRACT
// section 4 observables of the LoadInfo, latency).
func (e *recordingEngine) GetLoad(ctx context.Context) (*pb.LoadInfo, error) {
	start := e.rec.now()
	li, err := e.Engine.GetLoad(ctx)
	code, resp := unarySummary(err)
	if err == nil {
		resp = loadSummary(li)
	}
	e.rec.record(e.role, "GetLoad", "", start, code, resp, "", "")
	return li, err
}

// Health calls the wrapped engine and records the call (code, state and every
// check not READY, latency).
func (e *recordingEngine) Health(ctx context.Context) (*pb.HealthResponse, error) {
	start := e.rec.now()
	h, err := e.Engine.Health(ctx)
	code, resp := unarySummary(err)
	if err == nil {
		resp = h.GetState().String()
		for _, c := range h.GetChecks() {
			if c.GetState() != pb.HealthState_HEALTH_STATE_READY {
				resp += fmt.Sprintf("; %s %s %s", c.GetName(), c.GetState(), c.GetMessage())
			}
		}
	}
	e.rec.record(e.role, "Health", "", start, code, resp, "", "")
	return h, err
}

// Abort calls the wrapped engine and records the call (redacted request, code,
// AbortStatus and message, latency).
func (e *recordingEngine) Abort(ctx context.Context, req *pb.AbortRequest) (*pb.AbortResponse, error) {
	start := e.rec.now()
	a, err := e.Engine.Abort(ctx, req)
	code, resp := unarySummary(err)
	if err == nil {
		resp = a.GetStatus().String()
		if m := a.GetMessage(); m != "" {
			resp += ": " + m
		}
	}
	e.rec.record(e.role, "Abort", AbortRequestSummary(req), start, code, resp, "", "")
	return a, err
}

// Shutdown calls the wrapped engine and records the call (expected_instance_id,
// code, ShutdownStatus and message, latency).
func (e *recordingEngine) Shutdown(ctx context.Context, req *pb.ShutdownRequest) (*pb.ShutdownResponse, error) {
	start := e.rec.now()
	s, err := e.Engine.Shutdown(ctx, req)
	code, resp := unarySummary(err)
	if err == nil {
		resp = s.GetStatus().String()
		if m := s.GetMessage(); m != "" {
			resp += ": " + m
		}
	}
	e.rec.record(e.role, "Shutdown", fmt.Sprintf("expected_instance_id=%q", req.GetExpectedInstanceId()), start, code, resp, "", "")
	return s, err
}

// unarySummary is the code of a unary call and, on error, its message.
func unarySummary(err error) (code, resp string) {
	if err == nil {
		return "OK", ""
	}
	st, ok := status.FromError(err)
	if !ok {
		return "harness error", err.Error()
	}
	return codeName(st), st.Message()
}

// codeName is the gRPC code in the contract's spelling ("INVALID_ARGUMENT").
func codeName(st *status.Status) string {
	return strings.ToUpper(snake(st.Code().String()))
}

// snake turns "InvalidArgument" into "invalid_argument" ("OK" stays).
func snake(s string) string {
	if s == "OK" {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// generateSummary summarizes a collected Generate stream.
func generateSummary(res *target.GenerateResult, err error) (code, resp string) {
	if err != nil {
		return "harness error", err.Error()
	}
	if res == nil {
		return "harness error", "no result"
	}
	code = codeName(res.Status)
	var parts []string
	tokens := len(res.TokenIDs())
	for _, r := range res.Responses {
		switch {
		case r.GetEncoderReady() != nil:
			er := r.GetEncoderReady()
			parts = append(parts, fmt.Sprintf("EncoderReady(%s, %d items)", refSummary(er.GetRef()), len(er.GetItems())))
		case r.GetPrefillReady() != nil:
			pr := r.GetPrefillReady()
			parts = append(parts, fmt.Sprintf("PrefillReady(kv_session %s, decode_preparation=%d B)", pr.GetKvSession().GetSessionId(), len(pr.GetDecodePreparation())))
		case r.GetFinished() != nil:
			parts = append(parts, "finished "+strings.TrimPrefix(r.GetFinished().GetReason().String(), "FINISH_REASON_"))
		case r.GetError() != nil:
			parts = append(parts, fmt.Sprintf("EngineError(%s: %s)", strings.TrimPrefix(r.GetError().GetCode().String(), "ERROR_CODE_"), r.GetError().GetMessage()))
		}
	}
	if tokens > 0 {
		parts = append(parts, fmt.Sprintf("%d tokens", tokens))
	}
	if u := res.Usage(); u != nil {
		parts = append(parts, fmt.Sprintf("usage %d+%d", u.GetPromptTokens(), u.GetCompletionTokens()))
	}
	if res.Status.Code() != 0 && res.Status.Message() != "" {
		parts = append(parts, "status: "+res.Status.Message())
	}
	for k, v := range res.Trailer {
		if strings.HasPrefix(k, "baton-") {
			parts = append(parts, fmt.Sprintf("trailer %s=%s", k, strings.Join(v, ",")))
		}
	}
	return code, strings.Join(parts, "; ")
}

// loadSummary lists the CONTRACT section 4 observables of a LoadInfo.
func loadSummary(li *pb.LoadInfo) string {
	fields := li.GetAttributes().GetFields()
	keys := make([]string, 0, len(fields))
	for k := range fields {
		if strings.HasPrefix(k, "encoder.") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%v", strings.TrimPrefix(k, "encoder."), fields[k].AsInterface()))
	}
	if len(parts) == 0 {
		return "no encoder observables"
	}
	return strings.Join(parts, " ")
}

// GenerateRequestSummary describes a GenerateRequest without its secrets
// or bulk: the encoder mode (publish, or consume with the reference's
// backend, producer and opaque_state length only), the prompt (first 60
// characters), each media item as its modality, MIME type, source kind,
// size and a SHA-256 prefix, the KV session id, the decode preparation's
// length and the extra keys.
func GenerateRequestSummary(req *pb.GenerateRequest) string {
	var parts []string
	switch {
	case req.GetEncoder().GetPublish() != nil:
		p := "publish"
		if ttl := req.GetEncoder().GetPublish().TtlMs; ttl != nil {
			p += fmt.Sprintf(" ttl=%dms", *ttl)
		}
		parts = append(parts, p)
	case req.GetEncoder().GetConsume() != nil:
		parts = append(parts, "consume "+refSummary(req.GetEncoder().GetConsume()))
	}
	switch in := req.GetInput().(type) {
	case *pb.GenerateRequest_Prompt:
		parts = append(parts, fmt.Sprintf("prompt=%q", shorten(in.Prompt, 60)))
	case *pb.GenerateRequest_TokenIds:
		parts = append(parts, fmt.Sprintf("token_ids=%d", len(in.TokenIds.GetIds())))
	}
	if m := req.GetMedia(); len(m) > 0 {
		items := make([]string, len(m))
		for i, it := range m {
			items[i] = mediaSummary(it)
		}
		parts = append(parts, "media=["+strings.Join(items, ", ")+"]")
	}
	if s := req.GetKv().GetSession(); s != nil {
		parts = append(parts, "kv_session="+s.GetSessionId())
	}
	if n := len(req.GetDecodePreparation()); n > 0 {
		parts = append(parts, fmt.Sprintf("decode_preparation=%d B", n))
	}
	if f := req.GetExtra().GetFields(); len(f) > 0 {
		keys := make([]string, 0, len(f))
		for k := range f {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts = append(parts, "extra="+strings.Join(keys, ","))
	}
	if st := req.GetStopping(); st != nil && st.MaxTokens != nil {
		parts = append(parts, fmt.Sprintf("max_tokens=%d", st.GetMaxTokens()))
	}
	if len(parts) == 0 {
		return "(empty request)"
	}
	return strings.Join(parts, " ")
}

// AbortRequestSummary describes an AbortRequest (a reference by its
// backend, producer and opaque_state length only).
func AbortRequestSummary(req *pb.AbortRequest) string {
	switch t := req.GetTarget().(type) {
	case *pb.AbortRequest_EncoderCache:
		return "encoder_cache " + refSummary(t.EncoderCache)
	case *pb.AbortRequest_RequestId:
		return "request_id=" + t.RequestId
	case *pb.AbortRequest_KvSession:
		return "kv_session=" + t.KvSession.GetSessionId()
	case *pb.AbortRequest_AllRequests:
		return "all_requests"
	}
	return "(no target)"
}

// refSummary describes a reference without its opaque state: backend,
// producer instance and the opaque state's length.
func refSummary(ref *pb.EncoderCacheRef) string {
	if ref == nil {
		return "ref <nil>"
	}
	return fmt.Sprintf("ref %s producer=%s opaque_state=%d B", ref.GetBackend(), shorten(ref.GetProducerInstanceId(), 24), len(ref.GetOpaqueState()))
}

// mediaSummary describes one item by size and SHA-256 prefix, never its
// bytes (a url is shown by length only).
func mediaSummary(it *pb.MediaItem) string {
	kind := strings.ToLower(strings.TrimPrefix(it.GetModality().String(), "MODALITY_"))
	if mt := it.GetMimeType(); mt != "" {
		kind += " " + mt
	}
	if it.GetUuid() != "" {
		kind += " uuid=" + shorten(it.GetUuid(), 24)
	}
	switch s := it.GetSource().(type) {
	case *pb.MediaItem_RawBytes:
		return fmt.Sprintf("%s raw %d B sha256:%s", kind, len(s.RawBytes), sha8(s.RawBytes))
	case *pb.MediaItem_DataUri:
		return fmt.Sprintf("%s data_uri %d B sha256:%s", kind, len(s.DataUri), sha8([]byte(s.DataUri)))
	case *pb.MediaItem_Url:
		return fmt.Sprintf("%s url (%d chars)", kind, len(s.Url))
	}
	return kind + " (no source)"
}

// sha8 is the first 8 hex digits of the SHA-256 of b.
func sha8(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:4])
}

// shorten cuts s to n runes, marking the cut with "...".
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-3]) + "..."
}
