package server

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/lm"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// Fuzz targets of the engine's untrusted parsers: a decode preparation
// (GenerateRequest.decode_preparation, sent to D), a KV session reference
// (GenerateRequest.kv_session), the test hooks in GenerateRequest.extra
// (baton.* keys) and the authorization metadata (security_test.go). The
// seeds (here and under testdata/fuzz/) run with `go test`; `make fuzz`
// fuzzes each for FUZZTIME.

// FuzzParseDecodePreparation: never panics; refuses with ErrBadRequest
// (L-2) or ErrMalformedHash (H-3); what it accepts is within its bounds and
// round-trips through Marshal.
func FuzzParseDecodePreparation(f *testing.F) {
	good := DecodePreparation{Version: 1, Model: ModelName("tiny"), SessionID: strings.Repeat("a", 32), PromptTokens: 61,
		Items: []DecodePrepItem{{ContentHash: strings.Repeat("0", 64), Rows: 49}}, SessionBytes: lm.SessionBytes, SessionSHA256: SessionDigest(nil)}
	f.Add(good.Marshal())
	f.Add([]byte(`{"v":1}`))
	f.Add([]byte(`{"v":1,"model":"m","session_id":"","prompt_tokens":1,"items":[null],"session_bytes":0,"session_sha256":""} {}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseDecodePreparation(b)
		if err != nil {
			if !errors.Is(err, handoff.ErrBadRequest) && !errors.Is(err, handoff.ErrMalformedHash) {
				t.Fatalf("error %v wraps neither ErrBadRequest nor ErrMalformedHash", err)
			}
			return
		}
		var rows uint64
		for _, it := range p.Items {
			rows += uint64(it.Rows)
		}
		if p.PromptTokens == 0 || rows > uint64(p.PromptTokens) || len(p.Items) > handoff.MaxReferenceItems {
			t.Fatalf("accepted %+v", p)
		}
		again, err := ParseDecodePreparation(p.Marshal())
		if err != nil || again.SessionID != p.SessionID || len(again.Items) != len(p.Items) {
			t.Fatalf("accepted preparation does not round-trip: %+v, %v", again, err)
		}
	})
}

// FuzzParseKVSessionRef: a KvSessionRef (protobuf bytes) never panics the
// parser; refusals are ErrBadRequest or ErrBackendNotAccepted (N-1) or the
// endpoint's own rejection; an accepted one has a loopback endpoint, agent
// metadata and a region of one session's size.
func FuzzParseKVSessionRef(f *testing.F) {
	md := []byte("BXMD\x01\x02\x01p\x00\x0e127.0.0.1:7400")
	region := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, 4096), lm.SessionBytes)
	region = append(region, "key-0123"...)
	attrs, _ := structpb.NewStruct(map[string]any{AttrMultimodal: true, AttrKVFormat: KVFormat,
		AttrKVAgent: base64.StdEncoding.EncodeToString(md), AttrKVRegion: base64.StdEncoding.EncodeToString(region)})
	good := &pb.KvSessionRef{SessionId: strings.Repeat("b", 32), TransferBackend: KVBackend, AttributesStruct: attrs,
		Endpoints: []*pb.KvEndpoint{{Host: "127.0.0.1", Port: 7100}}}
	raw, _ := proto.Marshal(good)
	f.Add(raw)
	bad := proto.Clone(good).(*pb.KvSessionRef)
	bad.Endpoints[0].Host = "10.0.0.1"
	raw, _ = proto.Marshal(bad)
	f.Add(raw)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var w pb.KvSessionRef
		if proto.Unmarshal(b, &w) != nil {
			return
		}
		ref, err := parseKVSessionRef(&w)
		if err != nil {
			_, code := handoff.Classify(err)
			if code != handoff.CodeInvalidArgument && code != handoff.CodeFailedPrecondition {
				t.Fatalf("error %v is %v; want INVALID_ARGUMENT or FAILED_PRECONDITION", err, code)
			}
			return
		}
		if len(ref.AgentMD) == 0 || ref.Region.Length != lm.SessionBytes || len(ref.Region.RemoteKey) == 0 || ref.Endpoint == nil {
			t.Fatalf("accepted %+v", ref)
		}
		if len(ref.AgentMD) > maxKVAgentBytes {
			t.Fatalf("accepted agent metadata of %d bytes (bound %d)", len(ref.AgentMD), maxKVAgentBytes)
		}
	})
}

// FuzzHooksOf: the test-hook parser never panics on any extra struct
// (protobuf bytes of a google.protobuf.Struct); refusals are ErrBadRequest;
// accepted delays and counts are within their documented ranges.
func FuzzHooksOf(f *testing.F) {
	for _, m := range []map[string]any{
		{HookEncoderDelayMs: 1500, HookEncoderFail: true},
		{HookContextDelayMs: 60000, HookPreemptAfterTokens: 4, HookPreemptMode: "pause"},
		{HookEncoderDelayMs: -1},
		{HookPreemptMode: "sideways", HookCleanupFail: "yes"},
		{"baton.unknown": []any{1, "x"}},
	} {
		s, _ := structpb.NewStruct(m)
		raw, _ := proto.Marshal(s)
		f.Add(raw)
	}
	engines := map[Role]*Engine{}
	for _, r := range []Role{RoleAggregated, RoleEncoder} {
		engines[r] = &Engine{cfg: Config{Role: r, TestHooks: true}}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var extra structpb.Struct
		if proto.Unmarshal(b, &extra) != nil {
			return
		}
		req := &pb.GenerateRequest{Extra: &extra}
		for role, e := range engines {
			h, err := e.hooksOf(req)
			if err != nil {
				if !errors.Is(err, handoff.ErrBadRequest) {
					t.Fatalf("%s: error %v does not wrap ErrBadRequest", role, err)
				}
				continue
			}
			if h.encoderDelay < 0 || h.encoderDelay.Milliseconds() > MaxEncoderDelayMs || h.contextDelay < 0 || h.contextDelay.Milliseconds() > MaxEncoderDelayMs ||
				h.preemptAfter > MaxPreemptAfterTokens || (h.preemptAfter > 0 && role != RoleAggregated) {
				t.Fatalf("%s: accepted hooks %+v", role, h)
			}
		}
	})
}
