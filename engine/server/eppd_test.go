package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/xfer"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// eppd is an E+P+D topology of in-process engines plus the aggregated baseline.
type eppd struct {
	t                    *testing.T
	ctx                  context.Context
	prod, pre, dec, base *target.GRPCEngine
	stop                 *pb.StoppingOptions
}

// startEPPD starts E (tcp backend), P (accepting tcp), D and the baseline;
// preCfg and decCfg adjust P and D.
func startEPPD(t *testing.T, preCfg, decCfg Config) *eppd {
	t.Helper()
	x := &eppd{t: t, ctx: context.Background(), stop: &pb.StoppingOptions{MaxTokens: proto.Uint32(16)}}
	_, x.prod = startEngine(t, Config{Role: RoleEncoder, Backend: BackendTCP})
	preCfg.Role = RolePrefill
	if preCfg.AcceptBackends == nil {
		preCfg.AcceptBackends = []string{BackendTCP}
	}
	_, x.pre = startEngine(t, preCfg)
	decCfg.Role = RoleDecode
	_, x.dec = startEngine(t, decCfg)
	_, x.base = startEngine(t, Config{Role: RoleAggregated})
	return x
}

func (x *eppd) publish(items ...*pb.MediaItem) *pb.EncoderReady {
	x.t.Helper()
	res, err := x.prod.Generate(x.ctx, &pb.GenerateRequest{Media: items,
		Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Publish{Publish: &pb.EncoderPublish{}}}})
	if err != nil || res.Code() != codes.OK || res.EncoderReady() == nil {
		x.t.Fatalf("publish = %v, %v; want OK with EncoderReady", res.Status, err)
	}
	return res.EncoderReady()
}

// prefillRequest is a request to P: the prompt and, unless nil, a reference.
func (x *eppd) prefillRequest(prompt string, ref *pb.EncoderCacheRef) *pb.GenerateRequest {
	req := &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: prompt}, Stopping: x.stop}
	if ref != nil {
		req.Encoder = &pb.EncoderOptions{Mode: &pb.EncoderOptions_Consume{Consume: ref}}
	}
	return req
}

// prefill runs a request on P and returns its PrefillReady, checking the
// stream is exactly one PrefillReady with Usage {N, 0, N}.
func (x *eppd) prefill(prompt string, ref *pb.EncoderCacheRef) (*pb.PrefillReady, *pb.Usage) {
	x.t.Helper()
	res, err := x.pre.Generate(x.ctx, x.prefillRequest(prompt, ref))
	if err != nil || res.Code() != codes.OK {
		x.t.Fatalf("prefill = %v, %v; want OK", res.Status, err)
	}
	if len(res.Responses) != 1 || res.Responses[0].GetPrefillReady() == nil {
		x.t.Fatalf("prefill answered %d responses %v; want exactly one PrefillReady", len(res.Responses), res.Responses)
	}
	u := res.Usage()
	if u == nil || u.GetCompletionTokens() != 0 || u.GetPromptTokens() == 0 || u.GetTotalTokens() != u.GetPromptTokens() {
		x.t.Errorf("PrefillReady usage %v; want {N, 0, N}", u)
	}
	return res.Responses[0].GetPrefillReady(), u
}

func (x *eppd) decodeRequest(prompt string, kv *pb.KvSessionRef, prep []byte) *pb.GenerateRequest {
	return &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: prompt}, Stopping: x.stop, Kv: &pb.KvOptions{Session: kv}, DecodePreparation: prep}
}

func (x *eppd) decode(prompt string, kv *pb.KvSessionRef, prep []byte) *target.GenerateResult {
	x.t.Helper()
	res, err := x.dec.Generate(x.ctx, x.decodeRequest(prompt, kv, prep))
	if err != nil {
		x.t.Fatal(err)
	}
	return res
}

// liveSessions is P's kv.sessions.live.
func (x *eppd) liveSessions() float64 {
	x.t.Helper()
	load, err := x.pre.GetLoad(x.ctx)
	if err != nil {
		x.t.Fatal(err)
	}
	return load.GetAttributes().GetFields()["kv.sessions.live"].GetNumberValue()
}

func (x *eppd) abortSession(e *target.GRPCEngine, id string) (pb.AbortStatus, error) {
	resp, err := e.Abort(x.ctx, &pb.AbortRequest{Target: &pb.AbortRequest_KvSession{KvSession: &pb.KvSessionRef{SessionId: id}}})
	return resp.GetStatus(), err
}

func rejected(res *target.GenerateResult, want codes.Code) bool {
	return res.Code() == want && len(res.TokenIDs()) == 0 && len(res.Responses) == 0
}

var hex32 = regexp.MustCompile(`^[0-9a-f]{32}$`)

// TestEPPDMatchesBaseline (B-1): E -> P -> D answers equal the aggregated
// baseline's token for token, with equal usage, for one image with and
// without a marker, two images, and a text-only prompt; P's PrefillReady
// carries a well-formed KV session and decode preparation; a replayed
// session is INVALID_ARGUMENT on D, and Abort of it on P ALREADY_FINISHED.
func TestEPPDMatchesBaseline(t *testing.T) {
	x := startEPPD(t, Config{}, Config{})
	runs := []struct {
		prompt string
		images []string
	}{
		{"<image> What colour dominates?", []string{"video-001.png"}},
		{"Describe the image.", []string{"video-001.jpeg"}},
		{"Compare <image> and <image>.", []string{"video-001.png", "triangle-001.gif"}},
		{"Say hello.", nil},
	}
	for _, r := range runs {
		var items []*pb.MediaItem
		for _, name := range r.images {
			items = append(items, imageItem(t, name))
		}
		want, err := x.base.Generate(x.ctx, &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: r.prompt}, Stopping: x.stop, Media: items})
		if err != nil || want.Code() != codes.OK || len(want.TokenIDs()) == 0 {
			t.Fatalf("%q: baseline = %v, %v", r.prompt, want.Status, err)
		}
		var ref *pb.EncoderCacheRef
		var hashes []string
		if len(items) > 0 {
			ready := x.publish(items...)
			ref = ready.GetRef()
			for _, it := range ready.GetItems() {
				hashes = append(hashes, it.GetContentHash())
			}
		}
		pr, pu := x.prefill(r.prompt, ref)
		if pu.GetPromptTokens() != want.Usage().GetPromptTokens() {
			t.Errorf("%q: PrefillReady prompt_tokens %d, baseline %d", r.prompt, pu.GetPromptTokens(), want.Usage().GetPromptTokens())
		}
		kv := pr.GetKvSession()
		if !hex32.MatchString(kv.GetSessionId()) || kv.GetTransferBackend() != "tcp" || len(kv.GetEndpoints()) != 1 || kv.GetEndpoints()[0].GetPort() == 0 {
			t.Errorf("%q: kv_session %v; want 32 hex id, tcp, P's endpoint", r.prompt, kv)
		}
		if mm := kv.GetAttributesStruct().GetFields()[AttrMultimodal].GetBoolValue(); mm != (len(items) > 0) {
			t.Errorf("%q: %s = %v with %d images", r.prompt, AttrMultimodal, mm, len(items))
		}
		prep, err := ParseDecodePreparation(pr.GetDecodePreparation())
		if err != nil {
			t.Fatalf("%q: P's decode preparation does not parse: %v\n%s", r.prompt, err, pr.GetDecodePreparation())
		}
		if prep.SessionID != kv.GetSessionId() || prep.PromptTokens != pu.GetPromptTokens() || len(prep.Items) != len(hashes) {
			t.Errorf("%q: decode preparation %+v does not match the session %s and usage %v", r.prompt, prep, kv.GetSessionId(), pu)
		}
		for i, h := range hashes {
			if prep.Items[i].ContentHash != h {
				t.Errorf("%q: decode preparation item %d hash %s, EncoderReady's %s", r.prompt, i, prep.Items[i].ContentHash, h)
			}
		}
		if len(pr.GetDecodePreparation()) > handoff.MaxDecodePreparationBytes {
			t.Errorf("L-1 P's decode preparation is %d bytes", len(pr.GetDecodePreparation()))
		}

		got := x.decode(r.prompt, kv, pr.GetDecodePreparation())
		if got.Code() != codes.OK || got.Finished() == nil || len(got.TokenIDs()) == 0 {
			t.Fatalf("%q: decode = %v, %d tokens", r.prompt, got.Status, len(got.TokenIDs()))
		}
		if got.Text() != want.Text() || !slicesEqual(got.TokenIDs(), want.TokenIDs()) || !proto.Equal(got.Usage(), want.Usage()) {
			t.Errorf("B-1 %q: E+P+D %q usage %v; baseline %q usage %v", r.prompt, got.Text(), got.Usage(), want.Text(), want.Usage())
		}
		if replay := x.decode(r.prompt, kv, pr.GetDecodePreparation()); !rejected(replay, codes.InvalidArgument) {
			t.Errorf("%q: replayed session on D = %v, %d tokens; want INVALID_ARGUMENT before any token", r.prompt, replay.Status, len(replay.TokenIDs()))
		}
		if st, err := x.abortSession(x.pre, kv.GetSessionId()); err != nil || st != pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED {
			t.Errorf("%q: Abort(kv_session) on P after the decode = %v, %v; want ALREADY_FINISHED", r.prompt, st, err)
		}
	}
	if n := x.liveSessions(); n != 0 {
		t.Errorf("P holds %v KV sessions after every one was decoded", n)
	}
	for _, e := range []*target.GRPCEngine{x.pre, x.dec} {
		if h, err := e.Health(x.ctx); err != nil || h.GetState() != pb.HealthState_HEALTH_STATE_READY {
			t.Errorf("health after E+P+D runs = %v, %v; want READY", h.GetState(), err)
		}
	}
}

func slicesEqual(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestPrefillFromSharedDir: P consumes a shared_dir reference the same way
// PD does, and D decodes it to the baseline's answer (B-1).
func TestPrefillFromSharedDir(t *testing.T) {
	dir := t.TempDir()
	_, prod := startEngine(t, Config{Role: RoleEncoder, CacheDir: dir})
	_, pre := startEngine(t, Config{Role: RolePrefill, CacheDir: dir})
	_, dec := startEngine(t, Config{Role: RoleDecode})
	_, base := startEngine(t, Config{Role: RoleAggregated})
	ctx := context.Background()
	stop := &pb.StoppingOptions{MaxTokens: proto.Uint32(16)}
	item := imageItem(t, "basn6a08.png")
	prompt := "<image> What is shown?"
	pub, err := prod.Generate(ctx, &pb.GenerateRequest{Media: []*pb.MediaItem{item}, Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Publish{Publish: &pb.EncoderPublish{}}}})
	if err != nil || pub.Code() != codes.OK {
		t.Fatalf("publish = %v, %v", pub.Status, err)
	}
	pr, err := pre.Generate(ctx, &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: prompt}, Stopping: stop,
		Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Consume{Consume: pub.EncoderReady().GetRef()}}})
	if err != nil || pr.Code() != codes.OK || len(pr.Responses) != 1 || pr.Responses[0].GetPrefillReady() == nil {
		t.Fatalf("prefill = %v, %v", pr.Status, err)
	}
	ready := pr.Responses[0].GetPrefillReady()
	got, _ := dec.Generate(ctx, &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: prompt}, Stopping: stop,
		Kv: &pb.KvOptions{Session: ready.GetKvSession()}, DecodePreparation: ready.GetDecodePreparation()})
	want, _ := base.Generate(ctx, &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: prompt}, Stopping: stop, Media: []*pb.MediaItem{item}})
	if got.Code() != codes.OK || got.Text() != want.Text() || !proto.Equal(got.Usage(), want.Usage()) {
		t.Errorf("B-1 shared_dir E+P+D = %v %q usage %v; baseline %q usage %v", got.Status, got.Text(), got.Usage(), want.Text(), want.Usage())
	}
}

// mutatePrep decodes P's decode preparation into a map, applies f, and
// encodes it again.
func mutatePrep(t *testing.T, prep []byte, f func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(prep, &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// withAttr returns a copy of kv with attribute key set to v (nil: removed).
func withAttr(t *testing.T, kv *pb.KvSessionRef, key string, v any) *pb.KvSessionRef {
	t.Helper()
	c := proto.Clone(kv).(*pb.KvSessionRef)
	if v == nil {
		delete(c.AttributesStruct.Fields, key)
		return c
	}
	val, err := structpb.NewValue(v)
	if err != nil {
		t.Fatal(err)
	}
	c.AttributesStruct.Fields[key] = val
	return c
}

// TestDecodeRejectsBeforeFetch (L-1, L-2, H-3, N-1): every malformed,
// missing, oversize or mismatched decode preparation, and every malformed KV
// session reference, is rejected by D with its code before any token, and
// nothing is fetched: P still holds the session, which then decodes with
// its own preparation (padded with spaces to exactly 2 MiB: still legal).
func TestDecodeRejectsBeforeFetch(t *testing.T) {
	x := startEPPD(t, Config{}, Config{})
	prompt := "<image> What colour dominates?"
	ref := x.publish(imageItem(t, "video-001.png")).GetRef()
	pr, _ := x.prefill(prompt, ref)
	kv, prep := pr.GetKvSession(), pr.GetDecodePreparation()

	upperHash := mutatePrep(t, prep, func(m map[string]any) {
		m["items"].([]any)[0].(map[string]any)["hash"] = strings.ToUpper(m["items"].([]any)[0].(map[string]any)["hash"].(string))
	})
	shortHash := mutatePrep(t, prep, func(m map[string]any) {
		h := m["items"].([]any)[0].(map[string]any)["hash"].(string)
		m["items"].([]any)[0].(map[string]any)["hash"] = h[:63]
	})
	otherSession := mutatePrep(t, prep, func(m map[string]any) { m["session_id"] = strings.Repeat("ab", 16) })
	unknownField := mutatePrep(t, prep, func(m map[string]any) { m["extra"] = 1 })
	missingField := mutatePrep(t, prep, func(m map[string]any) { delete(m, "prompt_tokens") })
	wrongModel := mutatePrep(t, prep, func(m map[string]any) { m["model"] = "other-model" })
	noItems := mutatePrep(t, prep, func(m map[string]any) { m["items"] = []any{} })
	wrongTokens := mutatePrep(t, prep, func(m map[string]any) { m["prompt_tokens"] = m["prompt_tokens"].(float64) + 1 })
	badRegion := withAttr(t, kv, AttrKVRegion, "!!not base64!!")
	badAgent := withAttr(t, kv, AttrKVAgent, base64.StdEncoding.EncodeToString([]byte("garbage metadata")))
	pAgent, err := base64.StdEncoding.DecodeString(kv.GetAttributesStruct().GetFields()[AttrKVAgent].GetStringValue())
	if err != nil {
		t.Fatal(err)
	}
	pMD, err := xfer.ParseMetadata(pAgent)
	if err != nil {
		t.Fatal(err)
	}
	paddedAgent := withAttr(t, kv, AttrKVAgent, base64.StdEncoding.EncodeToString(tcpAgentMetadata(pMD.Name, paddedPort(t, pMD.Address))))
	wrapping := binary.BigEndian.AppendUint64(nil, ^uint64(0)-7)
	wrapping = binary.BigEndian.AppendUint64(wrapping, 32)
	wrappingRegion := withAttr(t, kv, AttrKVRegion, base64.StdEncoding.EncodeToString(append(wrapping, bytes.Repeat([]byte{7}, 16)...)))
	noFormat := withAttr(t, kv, AttrKVFormat, nil)
	mmString := withAttr(t, kv, AttrMultimodal, "yes")
	badID := proto.Clone(kv).(*pb.KvSessionRef)
	badID.SessionId = "../../" + kv.GetSessionId()
	otherBackend := proto.Clone(kv).(*pb.KvSessionRef)
	otherBackend.TransferBackend = "nixl"
	farEndpoint := proto.Clone(kv).(*pb.KvSessionRef)
	farEndpoint.Endpoints[0].Host = "10.0.0.1"

	cases := []struct {
		name   string
		prompt string
		kv     *pb.KvSessionRef
		prep   []byte
		want   codes.Code
		rule   string // a rule ID the status message must name, or ""
	}{
		{"L-2 no decode preparation for a multimodal session", prompt, kv, nil, codes.InvalidArgument, "L-2"},
		{"L-1 decode preparation of 2 MiB + 1", prompt, kv, bytes.Repeat([]byte{'x'}, handoff.MaxDecodePreparationBytes+1), codes.InvalidArgument, "L-1"},
		{"L-1 valid preparation padded past 2 MiB", prompt, kv, append(append([]byte(nil), prep...), bytes.Repeat([]byte{' '}, handoff.MaxDecodePreparationBytes)...), codes.InvalidArgument, "L-1"},
		{"L-2 64 garbage bytes", prompt, kv, bytes.Repeat([]byte{0xA5}, 64), codes.InvalidArgument, "L-2"},
		{"L-2 JSON array", prompt, kv, []byte(`[1,2,3]`), codes.InvalidArgument, "L-2"},
		{"L-2 two JSON objects", prompt, kv, append(append([]byte(nil), prep...), prep...), codes.InvalidArgument, "L-2"},
		{"H-3 upper-case content hash", prompt, kv, upperHash, codes.InvalidArgument, "H-3"},
		{"H-3 63-digit content hash", prompt, kv, shortHash, codes.InvalidArgument, "H-3"},
		{"L-2 preparation of another session", prompt, kv, otherSession, codes.InvalidArgument, "L-2"},
		{"L-2 unknown field", prompt, kv, unknownField, codes.InvalidArgument, "L-2"},
		{"L-2 missing field", prompt, kv, missingField, codes.InvalidArgument, "L-2"},
		{"L-2 another model", prompt, kv, wrongModel, codes.InvalidArgument, "L-2"},
		{"L-2 no items for a multimodal session", prompt, kv, noItems, codes.InvalidArgument, "L-2"},
		{"L-2 prompt_tokens off by one", prompt, kv, wrongTokens, codes.InvalidArgument, "L-2"},
		{"L-2 another prompt than P's", "<image> Something else entirely, longer.", kv, prep, codes.InvalidArgument, "L-2"},
		{"L-2 two markers for one image", "<image> <image>", kv, prep, codes.InvalidArgument, ""},
		{"malformed session id", prompt, badID, prep, codes.InvalidArgument, ""},
		{"region attribute not base64", prompt, badRegion, prep, codes.InvalidArgument, ""},
		{"agent attribute not agent metadata", prompt, badAgent, prep, codes.InvalidArgument, ""},
		{"agent address with its port padded by leading zeros", prompt, paddedAgent, prep, codes.InvalidArgument, ""},
		{"region wrapping around 2^64", prompt, wrappingRegion, prep, codes.InvalidArgument, ""},
		{"format attribute missing", prompt, noFormat, prep, codes.InvalidArgument, ""},
		{"multimodal attribute not a bool", prompt, mmString, prep, codes.InvalidArgument, ""},
		{"SE-3 an endpoint D does not trust", prompt, farEndpoint, prep, codes.FailedPrecondition, "SE-3"},
		{"N-1 another transfer backend", prompt, otherBackend, prep, codes.FailedPrecondition, "N-1"},
	}
	for _, tc := range cases {
		res := x.decode(tc.prompt, tc.kv, tc.prep)
		if !rejected(res, tc.want) {
			t.Errorf("%s: decode = %v, %d tokens; want %v before any event", tc.name, res.Status, len(res.TokenIDs()), tc.want)
			continue
		}
		if tc.rule != "" && !strings.Contains(res.Status.Message(), tc.rule) {
			t.Errorf("%s: status message %q does not name %s", tc.name, res.Status.Message(), tc.rule)
		}
	}
	if n := x.liveSessions(); n != 1 {
		t.Fatalf("P holds %v KV sessions after rejected decodes; want 1 (nothing fetched before validation)", n)
	}
	padded := append(append([]byte(nil), prep...), bytes.Repeat([]byte{' '}, handoff.MaxDecodePreparationBytes-len(prep))...)
	if res := x.decode(prompt, kv, padded); res.Code() != codes.OK || len(res.TokenIDs()) == 0 {
		t.Errorf("decode with its own preparation padded to exactly 2 MiB = %v, %d tokens; want tokens", res.Status, len(res.TokenIDs()))
	}
	if n := x.liveSessions(); n != 0 {
		t.Errorf("P holds %v KV sessions after the decode; want 0", n)
	}
	if h, err := x.dec.Health(x.ctx); err != nil || h.GetState() != pb.HealthState_HEALTH_STATE_READY {
		t.Errorf("D health after rejections = %v, %v; want READY", h.GetState(), err)
	}
}

// TestEPPDWrongRole (L-4): requests P and D do not serve are
// FAILED_PRECONDITION before any event, and so is a KV-session request to
// the other roles; Abort(kv_session) is P's alone.
func TestEPPDWrongRole(t *testing.T) {
	x := startEPPD(t, Config{}, Config{})
	_, pd := startEngine(t, Config{Role: RolePD, AcceptBackends: []string{BackendTCP}})
	ctx := x.ctx
	item := imageItem(t, "video-001.png")
	ref := x.publish(item).GetRef()
	pr, _ := x.prefill("<image> Describe.", ref)
	kv, prep := pr.GetKvSession(), pr.GetDecodePreparation()
	publish := &pb.EncoderOptions{Mode: &pb.EncoderOptions_Publish{Publish: &pb.EncoderPublish{}}}
	consume := &pb.EncoderOptions{Mode: &pb.EncoderOptions_Consume{Consume: ref}}
	prompt := &pb.GenerateRequest_Prompt{Prompt: "<image> Describe."}
	cases := []struct {
		name string
		e    *target.GRPCEngine
		req  *pb.GenerateRequest
	}{
		{"publish to P", x.pre, &pb.GenerateRequest{Media: []*pb.MediaItem{item}, Encoder: publish}},
		{"media to P", x.pre, &pb.GenerateRequest{Input: prompt, Media: []*pb.MediaItem{item}}},
		{"KV session to P", x.pre, &pb.GenerateRequest{Input: prompt, Kv: &pb.KvOptions{Session: kv}, DecodePreparation: prep}},
		{"decode preparation alone to P", x.pre, &pb.GenerateRequest{Input: prompt, DecodePreparation: prep}},
		{"text-only without a KV session to D", x.dec, &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: "hello"}}},
		{"decode preparation without a KV session to D", x.dec, &pb.GenerateRequest{Input: prompt, DecodePreparation: prep}},
		{"media with the KV session to D", x.dec, &pb.GenerateRequest{Input: prompt, Media: []*pb.MediaItem{item}, Kv: &pb.KvOptions{Session: kv}, DecodePreparation: prep}},
		{"encoder reference with the KV session to D", x.dec, &pb.GenerateRequest{Input: prompt, Encoder: consume, Kv: &pb.KvOptions{Session: kv}, DecodePreparation: prep}},
		{"publish to D", x.dec, &pb.GenerateRequest{Media: []*pb.MediaItem{item}, Encoder: publish}},
		{"KV session to E", x.prod, &pb.GenerateRequest{Input: prompt, Kv: &pb.KvOptions{Session: kv}, DecodePreparation: prep}},
		{"KV session to PD", pd, &pb.GenerateRequest{Input: prompt, Kv: &pb.KvOptions{Session: kv}, DecodePreparation: prep}},
		{"KV session to the baseline", x.base, &pb.GenerateRequest{Input: prompt, Kv: &pb.KvOptions{Session: kv}, DecodePreparation: prep}},
	}
	for _, tc := range cases {
		res, err := tc.e.Generate(ctx, tc.req)
		if err != nil {
			t.Fatal(err)
		}
		if !rejected(res, codes.FailedPrecondition) || !strings.Contains(res.Status.Message(), "L-4") {
			t.Errorf("L-4 %s = %v, %d events; want FAILED_PRECONDITION (L-4) before any event", tc.name, res.Status, len(res.Responses))
		}
	}
	for _, e := range []*target.GRPCEngine{x.dec, pd, x.base} {
		if _, err := x.abortSession(e, kv.GetSessionId()); status.Code(err) != codes.FailedPrecondition {
			t.Errorf("L-4 Abort(kv_session) on a role without KV sessions = %v; want FAILED_PRECONDITION", err)
		}
	}
	if _, err := x.abortSession(x.pre, "../"+kv.GetSessionId()); status.Code(err) != codes.InvalidArgument {
		t.Errorf("Abort(kv_session) with a malformed id on P = %v; want INVALID_ARGUMENT", err)
	}
	if st, err := x.abortSession(x.pre, strings.Repeat("0", 32)); err != nil || st != pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED {
		t.Errorf("Abort(kv_session) of an unknown session on P = %v, %v; want ALREADY_FINISHED", st, err)
	}
	// The session survived every wrong-role request.
	if res := x.decode("<image> Describe.", kv, prep); res.Code() != codes.OK || len(res.TokenIDs()) == 0 {
		t.Errorf("decode after the wrong-role requests = %v; want tokens", res.Status)
	}
	// Roles advertise themselves.
	for _, c := range []struct {
		e    *target.GRPCEngine
		role pb.EngineRole
		enc  pb.EncoderRole
	}{{x.pre, pb.EngineRole_ENGINE_ROLE_PREFILL, pb.EncoderRole_ENCODER_ROLE_CONSUMER}, {x.dec, pb.EngineRole_ENGINE_ROLE_DECODE, pb.EncoderRole_ENCODER_ROLE_NONE}} {
		si, err := c.e.GetServerInfo(ctx)
		if err != nil || si.GetEngineRole() != c.role {
			t.Errorf("GetServerInfo engine_role = %v, %v; want %v", si.GetEngineRole(), err, c.role)
		}
		mi, err := c.e.GetModelInfo(ctx, "")
		if err != nil || mi.GetEncoder().GetRole() != c.enc {
			t.Errorf("GetModelInfo encoder role = %v, %v; want %v", mi.GetEncoder().GetRole(), err, c.enc)
		}
		if c.enc == pb.EncoderRole_ENCODER_ROLE_CONSUMER && (!mi.GetEncoder().GetRequiresHandoff() || len(mi.GetEncoder().GetBackends()) == 0) {
			t.Errorf("N-1 P advertises %v; want requires_handoff and its backends", mi.GetEncoder())
		}
	}
}

// TestKVSessionRelease: Abort(kv_session) on P answers ABORTED once, then
// ALREADY_FINISHED; D then rejects the session INVALID_ARGUMENT (not found)
// and stays READY; an unfetched session expires after P's TTL.
func TestKVSessionRelease(t *testing.T) {
	x := startEPPD(t, Config{DefaultTTL: 300 * time.Millisecond}, Config{})
	pr, _ := x.prefill("Say hello.", nil)
	kv := pr.GetKvSession()
	if st, err := x.abortSession(x.pre, kv.GetSessionId()); err != nil || st != pb.AbortStatus_ABORT_STATUS_ABORTED {
		t.Fatalf("first Abort(kv_session) = %v, %v; want ABORTED", st, err)
	}
	if st, err := x.abortSession(x.pre, kv.GetSessionId()); err != nil || st != pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED {
		t.Fatalf("second Abort(kv_session) = %v, %v; want ALREADY_FINISHED", st, err)
	}
	if res := x.decode("Say hello.", kv, pr.GetDecodePreparation()); !rejected(res, codes.InvalidArgument) || !strings.Contains(res.Status.Message(), "not found") {
		t.Errorf("decode of a released session = %v; want INVALID_ARGUMENT (KV session not found)", res.Status)
	}
	// Without a decode preparation (text-only: not required) it is the same.
	pr2, _ := x.prefill("Say hello.", nil)
	if res := x.decode("Say hello.", pr2.GetKvSession(), nil); res.Code() != codes.OK || len(res.TokenIDs()) == 0 {
		t.Errorf("text-only decode without a decode preparation = %v; want tokens", res.Status)
	}
	// Expiry: wait (bounded) for P's TTL to free an unfetched session.
	pr3, _ := x.prefill("Say hello.", nil)
	deadline := time.Now().Add(10 * time.Second)
	for x.liveSessions() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("an unfetched KV session outlived P's 300 ms TTL by 10 s")
		}
		time.Sleep(20 * time.Millisecond) // waiting for time to pass (the TTL), not for a goroutine
	}
	if st, err := x.abortSession(x.pre, pr3.GetKvSession().GetSessionId()); err != nil || st != pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED {
		t.Errorf("Abort(kv_session) of an expired session = %v, %v; want ALREADY_FINISHED", st, err)
	}
	if res := x.decode("Say hello.", pr3.GetKvSession(), pr3.GetDecodePreparation()); !rejected(res, codes.InvalidArgument) {
		t.Errorf("decode of an expired session = %v; want INVALID_ARGUMENT", res.Status)
	}
	if h, err := x.dec.Health(x.ctx); err != nil || h.GetState() != pb.HealthState_HEALTH_STATE_READY {
		t.Errorf("D health after not-found sessions = %v, %v; want READY", h.GetState(), err)
	}
}

// TestKVSessionDecodedOnce: two decode engines race for one session; exactly
// one answers with tokens, the other INVALID_ARGUMENT before any token.
func TestKVSessionDecodedOnce(t *testing.T) {
	x := startEPPD(t, Config{}, Config{})
	_, dec2 := startEngine(t, Config{Role: RoleDecode})
	for round := range 3 {
		ref := x.publish(imageItem(t, "video-001.png")).GetRef()
		pr, _ := x.prefill("<image> Describe.", ref)
		results := make([]*target.GenerateResult, 2)
		var wg sync.WaitGroup
		for i, d := range []*target.GRPCEngine{x.dec, dec2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], _ = d.Generate(x.ctx, x.decodeRequest("<image> Describe.", pr.GetKvSession(), pr.GetDecodePreparation()))
			}()
		}
		wg.Wait()
		ok, rej := 0, 0
		for _, r := range results {
			switch {
			case r != nil && r.Code() == codes.OK && len(r.TokenIDs()) > 0:
				ok++
			case r != nil && rejected(r, codes.InvalidArgument):
				rej++
			}
		}
		if ok != 1 || rej != 1 {
			t.Errorf("round %d: %d decodes answered, %d rejected (%v, %v); want exactly one of each", round, ok, rej, results[0].Status, results[1].Status)
		}
	}
}

// TestParseDecodePreparation covers the malformed-input paths of the
// decode preparation format directly.
func TestParseDecodePreparation(t *testing.T) {
	valid := DecodePreparation{Version: 1, Model: "m", SessionID: strings.Repeat("a", 32), PromptTokens: 60,
		Items: []DecodePrepItem{{ContentHash: strings.Repeat("b", 64), Rows: 49}}, SessionBytes: 32, SessionSHA256: strings.Repeat("c", 64)}
	if p, err := ParseDecodePreparation(valid.Marshal()); err != nil || p.PromptTokens != 60 || len(p.Items) != 1 {
		t.Fatalf("valid preparation = %+v, %v", p, err)
	}
	edit := func(f func(p *DecodePreparation)) []byte {
		p := valid
		p.Items = append([]DecodePrepItem(nil), valid.Items...)
		f(&p)
		return p.Marshal()
	}
	// An empty hash is a missing one (an item published without content
	// hash, H-2), not a malformed one.
	if p, err := ParseDecodePreparation(edit(func(p *DecodePreparation) { p.Items[0].ContentHash = "" })); err != nil || p.Items[0].ContentHash != "" {
		t.Errorf("preparation with an item without hash = %+v, %v; want it accepted (H-2)", p, err)
	}
	cases := []struct {
		name string
		in   []byte
		hash bool // H-3 (ErrMalformedHash) rather than L-2
	}{
		{"empty", nil, false},
		{"null", []byte("null"), false},
		{"string", []byte(`"x"`), false},
		{"truncated", valid.Marshal()[:20], false},
		{"version 2", edit(func(p *DecodePreparation) { p.Version = 2 }), false},
		{"short session id", edit(func(p *DecodePreparation) { p.SessionID = "abc" }), false},
		{"zero prompt tokens", edit(func(p *DecodePreparation) { p.PromptTokens = 0 }), false},
		{"rows past prompt tokens", edit(func(p *DecodePreparation) { p.Items[0].Rows = 61 }), false},
		{"zero rows", edit(func(p *DecodePreparation) { p.Items[0].Rows = 0 }), false},
		{"session bytes 31", edit(func(p *DecodePreparation) { p.SessionBytes = 31 }), false},
		{"digest not hex", edit(func(p *DecodePreparation) { p.SessionSHA256 = strings.Repeat("z", 64) }), false},
		{"65 items", edit(func(p *DecodePreparation) {
			p.PromptTokens = 1000
			p.Items = make([]DecodePrepItem, handoff.MaxReferenceItems+1)
			for i := range p.Items {
				p.Items[i] = DecodePrepItem{ContentHash: strings.Repeat("b", 64), Rows: 1}
			}
		}), false},
		{"rows as a string", []byte(strings.Replace(string(valid.Marshal()), `"rows":49`, `"rows":"49"`, 1)), false},
		{"negative rows", []byte(strings.Replace(string(valid.Marshal()), `"rows":49`, `"rows":-1`, 1)), false},
		{"item without hash", []byte(strings.Replace(string(valid.Marshal()), `"hash":"`+strings.Repeat("b", 64)+`",`, ``, 1)), false},
		{"item null", []byte(strings.Replace(string(valid.Marshal()), `[{"hash"`, `[null,{"hash"`, 1)), false},
		{"deep nesting", []byte(strings.Repeat("[", 100000)), false},
		{"hash with uppercase", edit(func(p *DecodePreparation) { p.Items[0].ContentHash = strings.Repeat("B", 64) }), true},
		{"hash of 66 digits", edit(func(p *DecodePreparation) { p.Items[0].ContentHash = strings.Repeat("b", 66) }), true},
	}
	for _, tc := range cases {
		_, err := ParseDecodePreparation(tc.in)
		rule, code := handoff.Classify(err)
		if err == nil || code != handoff.CodeInvalidArgument {
			t.Errorf("%s: ParseDecodePreparation = %v; want INVALID_ARGUMENT", tc.name, err)
			continue
		}
		if tc.hash != (rule == "H-3") {
			t.Errorf("%s: rule %q (%v); want H-3 = %t", tc.name, rule, err, tc.hash)
		}
	}
}
