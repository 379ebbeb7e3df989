package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/xfer"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// Regression tests for the attack run's agent-metadata findings: A3 (E
// kept every consumer agent a TransferEncoderCache named), A4 (a call's
// agent metadata redirected another call's WRITE) and A7 (D kept every P
// agent a kv.session named). The attacker is a plain client: neither the
// operator nor a configured peer (CONTRACT SE-4).

// tcpAgentMetadata is xfer's tcp agent metadata (engine/xfer/metadata.go)
// as an attacker writes it: any name, any connection string.
func tcpAgentMetadata(name, address string) []byte {
	b := append([]byte("BXMD"), 1, 2, byte(len(name)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(address)))
	return append(b, address...)
}

// randomAgentName is a fresh 64-hex-digit agent name.
func randomAgentName(t *testing.T) string {
	t.Helper()
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// paddedPort writes host:port with leading zeros in the port, about 1 KiB
// in all: the address the attacker's trusted-looking metadata carried.
func paddedPort(t *testing.T, hostport string) string {
	t.Helper()
	host, port, ok := strings.Cut(hostport, ":")
	if !ok {
		t.Fatalf("not host:port: %q", hostport)
	}
	return host + ":" + strings.Repeat("0", 1000) + port
}

// agentAddress is the address in s's transfer-agent metadata.
func agentAddress(t *testing.T, s *Server) string {
	t.Helper()
	md, err := s.Engine.agent.LocalMetadata()
	if err != nil {
		t.Fatal(err)
	}
	m, err := xfer.ParseMetadata(md)
	if err != nil {
		t.Fatal(err)
	}
	return m.Address
}

// rawTransfer calls TransferEncoderCache on addr as a client would, with
// consumer_agent agentMD and one target per item of ref, each of the item's
// size (so only the agent metadata and the reference decide the answer),
// then changed by each of edits.
func rawTransfer(t *testing.T, addr string, ref *pb.EncoderCacheRef, agentMD []byte, edits ...func(*pb.TransferEncoderCacheRequest)) (codes.Code, string, metadata.MD) {
	t.Helper()
	parsed, err := handoff.ParseReference(ref.GetBackend(), ref.GetProducerInstanceId(), endpointOf(ref.GetProducerEndpoint()), ref.GetOpaqueState(), 0)
	if err != nil {
		t.Fatal(err)
	}
	req := &pb.TransferEncoderCacheRequest{Ref: ref, TransferId: "attack", ConsumerAgent: agentMD}
	for i, it := range parsed.Items {
		req.Targets = append(req.Targets, &pb.MemoryRegion{Address: 1<<36 + uint64(i)<<30, Length: uint64(it.PayloadBytes()), MemoryKind: "host", RemoteKey: []byte("0123456789abcdef")})
	}
	for _, edit := range edits {
		edit(req)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var trailer metadata.MD
	_, err = pb.NewControlClient(cc).TransferEncoderCache(ctx, req, grpc.Trailer(&trailer))
	st := status.Convert(err)
	return st.Code(), st.Message(), trailer
}

// publishRef publishes one image on producer and returns its reference.
func publishRef(t *testing.T, producer *target.GRPCEngine) *pb.EncoderCacheRef {
	t.Helper()
	res, err := producer.Generate(context.Background(), mediaPublish(imageItem(t, "basn6a08.png")))
	if err != nil || res.Code() != codes.OK {
		t.Fatalf("publish: %v %v", res.Status, err)
	}
	return res.EncoderReady().GetRef()
}

// expectNoPeers fails unless s's transfer agent holds no peer metadata and
// no transfer request: nothing a request named outlived it (A3, A7).
func expectNoPeers(t *testing.T, who string, s *Server) {
	t.Helper()
	if c := s.Engine.agent.Counters(); c.Peers != 0 || c.Requests != 0 || c.InFlight != 0 {
		t.Errorf("%s's transfer agent after the attack: %d peers, %d requests, %d in flight; want 0 (no agent a request named outlives it)", who, c.Peers, c.Requests, c.InFlight)
	}
}

// TestA3ProducerKeepsNoConsumerAgent: a client calls E's
// TransferEncoderCache with a reference it published and spent, each call
// naming a new agent at the trusted consumer's address, written with the
// port padded by leading zeros or canonically. The padded address is
// malformed agent metadata (INVALID_ARGUMENT with the before-write
// trailer, before any check of the reference); the canonical one meets the
// spent reference (SU-2). Neither leaves anything in E's agent. A fresh
// reference of the client's own, with a name the consumer's agent does not
// have, fails after the claim (the consumer's agent refuses the WRITE) and
// leaves nothing either; E and the consumer stay READY.
func TestA3ProducerKeepsNoConsumerAgent(t *testing.T) {
	prodSrv, producer := startEngine(t, Config{Role: RoleEncoder, Backend: BackendTCP})
	consSrv, consumer := startEngine(t, Config{Role: RolePD, AcceptBackends: []string{BackendTCP}})
	ctx := context.Background()
	spent := publishRef(t, producer)
	if res, _ := consumer.Generate(ctx, consumeReq(spent)); res.Code() != codes.OK {
		t.Fatalf("genuine consume = %v", res.Status)
	}
	trusted := agentAddress(t, consSrv)
	padded := paddedPort(t, trusted)
	eAddr := prodSrv.lis.Addr().String()
	for i := range 32 {
		code, msg, trailer := rawTransfer(t, eAddr, spent, tcpAgentMetadata(randomAgentName(t), padded))
		if code != codes.InvalidArgument || !strings.Contains(msg, "consumer_agent") || !slicesContain(trailer.Get(TrailerTransferRejected), TrailerBeforeWrite) {
			t.Fatalf("call %d with a padded port = %v %q, trailer %v; want INVALID_ARGUMENT naming consumer_agent, with the before-write trailer", i, code, msg, trailer)
		}
		code, msg, trailer = rawTransfer(t, eAddr, spent, tcpAgentMetadata(randomAgentName(t), trusted))
		if code != codes.InvalidArgument || !strings.Contains(msg, "SU-2") || !slicesContain(trailer.Get(TrailerTransferRejected), TrailerBeforeWrite) {
			t.Fatalf("call %d with a spent reference = %v %q, trailer %v; want INVALID_ARGUMENT naming SU-2, with the before-write trailer", i, code, msg, trailer)
		}
	}
	expectNoPeers(t, "E", prodSrv)
	for i := range 3 {
		code, msg, _ := rawTransfer(t, eAddr, publishRef(t, producer), tcpAgentMetadata(randomAgentName(t), trusted))
		if code != codes.Unavailable || !strings.Contains(msg, "Q-3") {
			t.Errorf("call %d with the client's own reference and a name the consumer's agent does not have = %v %q; want UNAVAILABLE naming Q-3", i, code, msg)
		}
	}
	expectNoPeers(t, "E", prodSrv)
	expectCalm(t, "E", prodSrv)
	expectCalm(t, "PD", consSrv)
	if res, _ := consumer.Generate(ctx, consumeReq(publishRef(t, producer))); res.Code() != codes.OK || len(res.TokenIDs()) == 0 {
		t.Errorf("genuine consume after the attack = %v; want OK with tokens", res.Status)
	}
}

// TestTransferTargetsCheckedBeforeClaim: targets the producer's agent
// would refuse to create a WRITE for (no remote key, a key over 64 bytes,
// a range wrapping around 2^64) are a malformed request: INVALID_ARGUMENT
// with the before-write trailer, before the claim, so the entry
// stays published and a genuine consume of it still succeeds, instead of a
// claim followed by a failure past it (Q-3, the entry gone).
func TestTransferTargetsCheckedBeforeClaim(t *testing.T) {
	prodSrv, producer := startEngine(t, Config{Role: RoleEncoder, Backend: BackendTCP})
	consSrv, consumer := startEngine(t, Config{Role: RolePD, AcceptBackends: []string{BackendTCP}})
	ref := publishRef(t, producer)
	agentMD := tcpAgentMetadata(consSrv.Engine.InstanceID(), agentAddress(t, consSrv))
	for name, edit := range map[string]func(*pb.TransferEncoderCacheRequest){
		"no remote key":      func(r *pb.TransferEncoderCacheRequest) { r.Targets[0].RemoteKey = nil },
		"a 65-byte key":      func(r *pb.TransferEncoderCacheRequest) { r.Targets[0].RemoteKey = make([]byte, 65) },
		"a wrapping address": func(r *pb.TransferEncoderCacheRequest) { r.Targets[0].Address = ^uint64(0) - 3 },
	} {
		code, msg, trailer := rawTransfer(t, prodSrv.lis.Addr().String(), ref, agentMD, edit)
		if code != codes.InvalidArgument || !strings.Contains(msg, "targets") || !slicesContain(trailer.Get(TrailerTransferRejected), TrailerBeforeWrite) {
			t.Errorf("targets with %s = %v %q, trailer %v; want INVALID_ARGUMENT naming the targets, with the before-write trailer", name, code, msg, trailer)
		}
	}
	if obs := prodSrv.Engine.Observables(); obs["encoder.exports.entries"] != 1 {
		t.Errorf("encoder.exports.entries = %g after refused transfers; want 1 (nothing claimed)", obs["encoder.exports.entries"])
	}
	if res, _ := consumer.Generate(context.Background(), consumeReq(ref)); res.Code() != codes.OK || len(res.TokenIDs()) == 0 {
		t.Errorf("genuine consume after the refused transfers = %v; want OK with tokens", res.Status)
	}
	expectCalm(t, "E", prodSrv)
	expectNoPeers(t, "E", prodSrv)
}

// pausingAgent is E's transfer agent with its first WRITE, once armed,
// held before it is created until resume is closed: a test orders another
// call's agent operations inside that window (A4).
type pausingAgent struct {
	xfer.Agent
	armed          atomic.Bool
	once           sync.Once
	paused, resume chan struct{}
}

func newPausingAgent() *pausingAgent {
	return &pausingAgent{paused: make(chan struct{}), resume: make(chan struct{})}
}

func (a *pausingAgent) hold() {
	if !a.armed.Load() {
		return
	}
	first := false
	a.once.Do(func() { first = true })
	if first {
		close(a.paused)
		<-a.resume
	}
}

func (a *pausingAgent) CreateWrite(local []xfer.Descriptor, peer string, remote []xfer.Descriptor) (*xfer.Request, error) {
	a.hold()
	return a.Agent.CreateWrite(local, peer, remote)
}

func (a *pausingAgent) CreateWriteTo(local []xfer.Descriptor, md []byte, remote []xfer.Descriptor) (*xfer.Request, error) {
	a.hold()
	return a.Agent.CreateWriteTo(local, md, remote)
}

// TestA4NoCallRedirectsAnothersWrite: PD1's genuine consume has passed
// every check on E and its WRITE is about to be created; meanwhile a
// client sends E two TransferEncoderCache calls whose consumer_agent pairs
// PD1's agent name (its public instance id) with PD2's agent address: one
// with a spent reference, one with a fresh reference of its own. PD1's
// WRITE still goes to PD1 (each call writes only to the agent its own
// consumer_agent describes): its consume answers tokens and PD1, PD2 and
// E stay READY. The SharedAgentTable mutant (the engine before the fix:
// one table of agents by name, shared by every call) writes PD1's entry
// to PD2, which refuses it: PD1's consume is uncertain and PD1
// quarantines; the test kills it.
func TestA4NoCallRedirectsAnothersWrite(t *testing.T) {
	for _, c := range []struct {
		name       string
		hooks      Hooks
		redirected bool
	}{
		{"contract", Hooks{}, false},
		{"mutant SharedAgentTable", Hooks{SharedAgentTable: true}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			pause := newPausingAgent()
			prodSrv, producer := startEngine(t, Config{Role: RoleEncoder, Backend: BackendTCP, Hooks: c.hooks,
				wrapAgent: func(a xfer.Agent) xfer.Agent { pause.Agent = a; return pause }})
			pd1Srv, pd1 := startEngine(t, Config{Role: RolePD, AcceptBackends: []string{BackendTCP}})
			pd2Srv, pd2 := startEngine(t, Config{Role: RolePD, AcceptBackends: []string{BackendTCP}})
			ctx := context.Background()
			spent := publishRef(t, producer)
			if res, _ := pd2.Generate(ctx, consumeReq(spent)); res.Code() != codes.OK {
				t.Fatalf("spending the client's reference through PD2 = %v", res.Status)
			}
			genuine, own := publishRef(t, producer), publishRef(t, producer)
			forged := tcpAgentMetadata(pd1Srv.Engine.InstanceID(), agentAddress(t, pd2Srv))

			pause.armed.Store(true)
			done := make(chan *target.GenerateResult, 1)
			go func() {
				res, err := pd1.Generate(ctx, consumeReq(genuine))
				if err != nil {
					t.Error(err)
				}
				done <- res
			}()
			select {
			case <-pause.paused:
			case <-time.After(20 * time.Second):
				t.Fatal("PD1's transfer never reached E's WRITE")
			}
			eAddr := prodSrv.lis.Addr().String()
			if code, msg, _ := rawTransfer(t, eAddr, spent, forged); code != codes.InvalidArgument {
				t.Errorf("the client's call with a spent reference = %v %q; want INVALID_ARGUMENT (SU-2)", code, msg)
			}
			if code, msg, _ := rawTransfer(t, eAddr, own, forged); code != codes.Unavailable {
				t.Errorf("the client's call with its own reference, PD1's name and PD2's address = %v %q; want UNAVAILABLE (PD2's agent refuses a WRITE addressed to PD1)", code, msg)
			}
			close(pause.resume)
			res := <-done
			if c.redirected {
				if res == nil || res.Code() != codes.Unavailable || !strings.Contains(res.Status.Message(), "Q-1") {
					t.Errorf("mutant: PD1's consume = %v; want UNAVAILABLE naming Q-1 (its WRITE went to PD2)", res.Status)
				}
				return
			}
			if res == nil || res.Code() != codes.OK || len(res.TokenIDs()) == 0 {
				t.Fatalf("PD1's consume while a client named PD1's agent at PD2's address = %v; want OK with tokens (its WRITE goes to PD1)", res.Status)
			}
			expectCalm(t, "PD1", pd1Srv)
			expectCalm(t, "PD2", pd2Srv)
			expectCalm(t, "E", prodSrv)
			expectNoPeers(t, "E", prodSrv)
		})
	}
}

// TestA7DecodeKeepsNoPrefillAgent: a client sends D decode requests whose
// kv.session is forged: a random session id, P's genuine control endpoint,
// and agent metadata naming a new agent each time at P's trusted agent
// address, canonical or with the port padded by leading zeros. Each is
// INVALID_ARGUMENT (the padded one as a malformed kv.session, before any
// connection); none leaves anything in D's agent or D's record of attached
// sessions, and a genuine session still decodes.
func TestA7DecodeKeepsNoPrefillAgent(t *testing.T) {
	preSrv, pre := startEngine(t, Config{Role: RolePrefill, AcceptBackends: []string{BackendTCP}})
	decSrv, dec := startEngine(t, Config{Role: RoleDecode})
	ctx := context.Background()
	stop := &pb.StoppingOptions{MaxTokens: proto.Uint32(4)}
	prefill := func() *pb.KvSessionRef {
		res, err := pre.Generate(ctx, &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: "Say hello."}, Stopping: stop})
		if err != nil || res.Code() != codes.OK || len(res.Responses) != 1 {
			t.Fatalf("prefill = %v, %v", res.Status, err)
		}
		return res.Responses[0].GetPrefillReady().GetKvSession()
	}
	decode := func(kv *pb.KvSessionRef) *target.GenerateResult {
		res, err := dec.Generate(ctx, &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: "Say hello."}, Stopping: stop, Kv: &pb.KvOptions{Session: kv}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	genuine := prefill()
	trusted := agentAddress(t, preSrv)
	forge := func(address string) *pb.KvSessionRef {
		kv := proto.Clone(genuine).(*pb.KvSessionRef)
		var id [16]byte
		_, _ = rand.Read(id[:])
		kv.SessionId = hex.EncodeToString(id[:])
		region := binary.BigEndian.AppendUint64(nil, 1<<36)
		region = binary.BigEndian.AppendUint64(region, 32)
		region = append(region, id[:]...)
		kv.AttributesStruct.Fields[AttrKVAgent] = structpb.NewStringValue(base64.StdEncoding.EncodeToString(tcpAgentMetadata(randomAgentName(t), address)))
		kv.AttributesStruct.Fields[AttrKVRegion] = structpb.NewStringValue(base64.StdEncoding.EncodeToString(region))
		return kv
	}
	for i := range 32 {
		if res := decode(forge(paddedPort(t, trusted))); !rejected(res, codes.InvalidArgument) || !strings.Contains(res.Status.Message(), "malformed kv.session") {
			t.Fatalf("request %d with a padded agent port = %v; want INVALID_ARGUMENT (malformed kv.session)", i, res.Status)
		}
		if res := decode(forge(trusted)); !rejected(res, codes.InvalidArgument) {
			t.Fatalf("request %d with a forged session = %v; want INVALID_ARGUMENT", i, res.Status)
		}
	}
	expectNoPeers(t, "D", decSrv)
	attached := decSrv.Engine.kv.Attached()
	if attached != 0 {
		t.Errorf("D remembers %d attached sessions after forged ones only; want 0 (P answered ALREADY_FINISHED for each)", attached)
	}
	if res := decode(genuine); res.Code() != codes.OK || len(res.TokenIDs()) == 0 {
		t.Errorf("genuine decode after the attack = %v; want OK with tokens", res.Status)
	}
	expectNoPeers(t, "D", decSrv)
	expectCalm(t, "D", decSrv)
	expectCalm(t, "P", preSrv)
}
