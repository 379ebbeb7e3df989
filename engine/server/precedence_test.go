package server

import (
	"context"
	"strings"
	"testing"

	"github.com/baton-dev/baton/engine/consumer"
	"github.com/baton-dev/baton/engine/handoff"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
)

// opaque builds a baton-json-v1 opaque state with the given fields.
func opaque(id string, exp string, hash string, rows string) []byte {
	return []byte(`{"v":1,"id":"` + id + `","exp":` + exp + `,"items":[{"hash":"` + hash + `","rows":` + rows + `,"cols":512}],"tag":"` + strings.Repeat("ef", 32) + `"}`)
}

// TestPrecedenceAdjacentPairs: for each adjacent pair of CONTRACT "which
// code wins" (S-2/X-1/Q-4 -> L-4 -> L-6 -> L-1 -> SU-4 -> H-3 -> N-1 ->
// SE-3 -> SU-5 -> SU-2 -> L-5), a request that breaks both rules is
// answered by the earlier one. L-6 -> L-1 has no request this engine can be
// sent: media and a reference or decode preparation together are L-4 on
// every role. SU-2 -> L-5 is TestSpentBeforeQuota.
func TestPrecedenceAdjacentPairs(t *testing.T) {
	dir := t.TempDir()
	_, consumer := startEngineAlone(t, Config{Role: RolePD, CacheDir: dir, AcceptBackends: []string{BackendSharedDir, BackendTCP}}, nil)
	_, sharedOnly := startEngineAlone(t, Config{Role: RolePD, CacheDir: dir, AcceptBackends: []string{BackendSharedDir}}, nil)
	goodID, badID := strings.Repeat("ab", 16), strings.Repeat("zz", 16)
	goodHash, badHash := strings.Repeat("cd", 32), "NOT-A-HASH"
	future, past := "4102444800000", "1000"
	instance := "3f2a7c1e-0b4d-4e8f-9a6b-5c7d8e9f0a1b"
	untrusted := &pb.KvEndpoint{Host: "127.0.0.1", Port: 1, Protocol: "grpc"}
	ref := func(backend string, state []byte) *pb.EncoderCacheRef {
		return &pb.EncoderCacheRef{Backend: backend, ProducerInstanceId: instance, ProducerEndpoint: untrusted, OpaqueState: state}
	}
	badMedia := &pb.MediaItem{Modality: pb.Modality_MODALITY_IMAGE, Source: &pb.MediaItem_RawBytes{RawBytes: []byte("\x89PNG not really")}}
	type tc struct {
		pair string
		eng  string // "consumer" or "shared-only"
		req  *pb.GenerateRequest
		code codes.Code
		rule string
	}
	withMedia := consumeReq(ref(BackendSharedDir, opaque(goodID, future, goodHash, "196")))
	withMedia.Media = []*pb.MediaItem{badMedia}
	for _, c := range []tc{
		{"L-4 before L-6: media (malformed) sent to a consumer", "consumer", withMedia, codes.FailedPrecondition, "L-4"},
		{"L-1 before SU-4: an oversize opaque state that is not JSON", "consumer", consumeReq(ref(BackendSharedDir, []byte(strings.Repeat("x", handoff.MaxOpaqueStateBytes+1)))), codes.InvalidArgument, "L-1"},
		{"SU-4 before H-3: an item of 0 rows with a malformed hash", "consumer", consumeReq(ref(BackendSharedDir, opaque(goodID, future, badHash, "0"))), codes.InvalidArgument, "SU-4"},
		{"H-3 before N-1: a malformed hash for a backend not accepted", "consumer", consumeReq(ref("rdma", opaque(goodID, future, badHash, "196"))), codes.InvalidArgument, "H-3"},
		{"H-3 before SU-5: a malformed hash and an entry id that is none", "consumer", consumeReq(ref(BackendSharedDir, opaque(badID, future, badHash, "196"))), codes.InvalidArgument, "H-3"},
		{"N-1 before SE-3: a tcp reference naming an untrusted endpoint, tcp not accepted", "shared-only", consumeReq(ref(BackendTCP, opaque(goodID, future, goodHash, "196"))), codes.FailedPrecondition, "N-1"},
		{"SE-3 before SU-5: an untrusted endpoint and an entry id that is none", "consumer", consumeReq(ref(BackendTCP, opaque(badID, future, goodHash, "196"))), codes.FailedPrecondition, "SE-3"},
		{"SU-5 before SU-2: a forged tag on an expired reference", "consumer", consumeReq(ref(BackendSharedDir, opaque(goodID, past, goodHash, "196"))), codes.InvalidArgument, "SU-5"},
	} {
		eng := consumer
		if c.eng == "shared-only" {
			eng = sharedOnly
		}
		res, err := eng.Generate(context.Background(), c.req)
		if err != nil {
			t.Fatal(err)
		}
		if res.Code() != c.code || !strings.Contains(res.Status.Message(), c.rule+" ") {
			t.Errorf("%s: %v; want %v naming %s", c.pair, res.Status, c.code, c.rule)
		}
	}
}

// TestHealthRefusalsComeFirst: on a quarantined consumer, one whose
// cleanup failed and a draining one (S-2), a handoff request that
// also breaks L-4 is answered UNAVAILABLE by the health rule; a text-only
// request on the quarantined consumer is still served.
func TestHealthRefusalsComeFirst(t *testing.T) {
	wrongRole := &pb.GenerateRequest{Media: []*pb.MediaItem{imageItem(t, "basn6a08.png")}, Input: &pb.GenerateRequest_Prompt{Prompt: "x"},
		Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Consume{Consume: &pb.EncoderCacheRef{}}}}
	for _, poison := range []string{"Q-4", "X-1", "S-2"} {
		srv, client := startEngineAlone(t, Config{Role: RolePD}, nil)
		e := srv.Engine
		switch poison {
		case "Q-4":
			e.enterQuarantine(&consumer.Quarantine{ID: "test", Reason: "Q-1 injected by the test"}, nil)
		case "X-1":
			e.failCleanup("test", errTest)
		case "S-2":
			e.mu.Lock()
			e.health.StartDrain()
			e.mu.Unlock()
		}
		res, err := client.Generate(context.Background(), wrongRole)
		if err != nil {
			t.Fatal(err)
		}
		if res.Code() != codes.Unavailable || !strings.Contains(res.Status.Message(), poison) {
			t.Errorf("%s: a handoff request to the wrong role = %v; want UNAVAILABLE naming %s before L-4", poison, res.Status, poison)
		}
		if poison == "Q-4" {
			text, _ := client.Generate(context.Background(), &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: "hello"}})
			if text.Code() != codes.OK {
				t.Errorf("Q-4: a text-only request on a quarantined consumer = %v; want OK", text.Status)
			}
		}
	}
}
