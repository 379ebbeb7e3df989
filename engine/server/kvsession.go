package server

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"regexp"

	"github.com/baton-dev/baton/engine/handoff"
	"github.com/baton-dev/baton/engine/kvsession"
	"github.com/baton-dev/baton/engine/lm"
	"github.com/baton-dev/baton/engine/xfer"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/protobuf/types/known/structpb"
)

// E+P+D KV sessions (CONTRACT section 1, L-2; WIRE.md KvSessionRef).
//
// P keeps the serialised lm.Session of each prefill (lm.SessionBytes = 32
// bytes) in memory registered with its tcp transfer agent, and describes it
// in PrefillReady.kv_session:
//
//	session_id        32 lowercase hex digits (128 random bits)
//	transfer_backend  "tcp"
//	endpoints         [P's control address (host, port, protocol "grpc")]
//	attributes_struct {
//	  "baton.multimodal": true | false     (WIRE.md convention; true when the prefill had images)
//	  "baton.kv.format":  "baton-lm-session-v1"
//	  "baton.kv.agent":   base64 (standard, padded) of P's xfer agent metadata
//	  "baton.kv.region":  base64 (standard, padded) of the registered region:
//	                      address (8 bytes, big-endian), length (8 bytes,
//	                      big-endian, = 32), remote key (1..64 bytes)
//	}
//
// D READs the region into its own registered memory from the agent the
// metadata describes (xfer CreateReadFrom, the NIXL model; the metadata
// is not loaded into D's agent, so nothing of it outlives the READ), then
// releases the session on P
// with Abort(kv_session) on the endpoint: ABORTED means this D took it;
// ALREADY_FINISHED means another decode took it, or it was released or
// expired first, so D rejects the request (INVALID_ARGUMENT, KV session
// not found). A session is therefore decoded at most once. P keeps an
// unfetched session for Config.DefaultTTL, then frees it.

// KV session attribute keys and values (KvSessionRef.attributes_struct).
const (
	// AttrMultimodal marks a KV session from a multimodal prefill (bool);
	// D then requires the decode preparation (CONTRACT L-2).
	AttrMultimodal = "baton.multimodal"
	// AttrKVFormat names the format of the session bytes (string, KVFormat).
	AttrKVFormat = "baton.kv.format"
	// AttrKVAgent is P's transfer-agent metadata, base64 (string).
	AttrKVAgent = "baton.kv.agent"
	// AttrKVRegion is the registered region holding the session, base64 of
	// address (8 bytes BE), length (8 bytes BE) and remote key (string).
	AttrKVRegion = "baton.kv.region"
	// KVFormat is the session format: lm.Session.MarshalBinary, lm.SessionBytes bytes.
	KVFormat = "baton-lm-session-v1"
	// KVBackend is the only transfer_backend of the reference engine's KV sessions.
	KVBackend = BackendTCP
)

// Bounds on a KV session reference's fields (checked by D before anything runs).
const (
	kvSessionIDHexDigits = 32      // 128 bits
	maxKVAgentBytes      = 4 << 10 // xfer metadata is at most ~1.3 KiB
	maxKVAttributes      = 16      // keys in attributes_struct
	maxKVRegionKeyBytes  = 64      // xfer's bound on remote keys
	kvRegionFixedBytes   = 8 + 8
)

var kvSessionIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// kvSessionRef is a parsed, checked KvSessionRef as D sees it.
type kvSessionRef struct {
	ID         string
	Multimodal bool
	Endpoint   *pb.KvEndpoint // P's control endpoint; D dials it only if trusted (SE-3)
	AgentMD    []byte
	Region     xfer.Descriptor
	wire       *pb.KvSessionRef
}

// holdKVSession registers a prefill's session bytes and keeps them until
// fetched, aborted or expired (after Config.DefaultTTL: engine/kvsession's
// Driver); it returns the KvSessionRef for PrefillReady. Errors are
// internal (agent failures).
func (e *Engine) holdKVSession(b []byte, images int) (*pb.KvSessionRef, error) {
	drv := e.kvDriver()
	s, err := drv.Register(mustRandomHex(kvSessionIDHexDigits/2), b, images)
	if err != nil {
		return nil, err
	}
	md, err := e.agent.LocalMetadata()
	if err != nil {
		drv.Free(s.Reg)
		return nil, fmt.Errorf("server: transfer-agent metadata: %w", err)
	}
	ref, err := kvSessionWire(s, md, e.controlEndpoint())
	if err != nil {
		drv.Free(s.Reg)
		return nil, err
	}
	drv.Hold(s, e.cfg.DefaultTTL)
	return ref, nil
}

// kvDriver is P's KV session driver (engine/kvsession) over this engine:
// its sessions, its agent, X-1.
func (e *Engine) kvDriver() *kvsession.Driver {
	return &kvsession.Driver{Sessions: &e.kv, Agent: e.agent, Env: consumerEnv{e}, Log: e.log}
}

// kvSessionWire builds the KvSessionRef describing s.
func kvSessionWire(s *kvsession.Session, agentMD []byte, ep *pb.KvEndpoint) (*pb.KvSessionRef, error) {
	d := s.Reg.Descriptors[0]
	region := binary.BigEndian.AppendUint64(nil, d.Address)
	region = binary.BigEndian.AppendUint64(region, d.Length)
	region = append(region, d.RemoteKey...)
	attrs, err := structpb.NewStruct(map[string]any{
		AttrMultimodal: s.Images > 0,
		AttrKVFormat:   KVFormat,
		AttrKVAgent:    base64.StdEncoding.EncodeToString(agentMD),
		AttrKVRegion:   base64.StdEncoding.EncodeToString(region),
	})
	if err != nil {
		return nil, fmt.Errorf("server: KV session attributes: %w", err)
	}
	return &pb.KvSessionRef{SessionId: s.ID, TransferBackend: KVBackend, Endpoints: []*pb.KvEndpoint{ep}, AttributesStruct: attrs}, nil
}

// parseKVSessionRef checks a KvSessionRef sent to D, before anything runs:
// a well-formed session id, one well-formed endpoint (whether D may dial
// it is SE-3's, in runDecode), and the attributes of this profile. Errors: handoff.ErrBadRequest (INVALID_ARGUMENT) for a
// malformed reference; handoff.ErrBackendNotAccepted (N-1,
// FAILED_PRECONDITION) for a transfer_backend other than "tcp".
func parseKVSessionRef(w *pb.KvSessionRef) (kvSessionRef, error) {
	bad := func(format string, args ...any) (kvSessionRef, error) {
		return kvSessionRef{}, fmt.Errorf("%w: malformed kv.session: %s", handoff.ErrBadRequest, fmt.Sprintf(format, args...))
	}
	ref := kvSessionRef{ID: w.GetSessionId(), wire: w}
	if !kvSessionIDPattern.MatchString(ref.ID) {
		return bad("session_id %.80q is not %d lowercase hex digits", ref.ID, kvSessionIDHexDigits)
	}
	fields := w.GetAttributesStruct().GetFields()
	if len(fields) > maxKVAttributes {
		return bad("%d attributes (at most %d)", len(fields), maxKVAttributes)
	}
	if v, ok := fields[AttrMultimodal]; ok {
		b, isBool := v.GetKind().(*structpb.Value_BoolValue)
		if !isBool {
			return bad("attribute %s is not a bool", AttrMultimodal)
		}
		ref.Multimodal = b.BoolValue
	}
	str := func(key string, maxLen int) (string, error) {
		v, ok := fields[key].GetKind().(*structpb.Value_StringValue)
		if !ok {
			return "", fmt.Errorf("attribute %s is missing or not a string", key)
		}
		if len(v.StringValue) > maxLen {
			return "", fmt.Errorf("attribute %s is %d bytes (at most %d)", key, len(v.StringValue), maxLen)
		}
		return v.StringValue, nil
	}
	if b := w.GetTransferBackend(); b != KVBackend {
		return kvSessionRef{}, fmt.Errorf("%w: N-1 kv.session transfer_backend %.40q, this decode engine fetches %q", handoff.ErrBackendNotAccepted, b, KVBackend)
	}
	format, err := str(AttrKVFormat, 64)
	if err != nil {
		return bad("%v", err)
	}
	if format != KVFormat {
		return bad("attribute %s = %.64q, want %q", AttrKVFormat, format, KVFormat)
	}
	agent, err := str(AttrKVAgent, base64.StdEncoding.EncodedLen(maxKVAgentBytes))
	if err != nil {
		return bad("%v", err)
	}
	if ref.AgentMD, err = base64.StdEncoding.Strict().DecodeString(agent); err != nil || len(ref.AgentMD) == 0 {
		return bad("attribute %s is not base64 of agent metadata", AttrKVAgent)
	}
	region, err := str(AttrKVRegion, base64.StdEncoding.EncodedLen(kvRegionFixedBytes+maxKVRegionKeyBytes))
	if err != nil {
		return bad("%v", err)
	}
	rb, err := base64.StdEncoding.Strict().DecodeString(region)
	if err != nil || len(rb) <= kvRegionFixedBytes || len(rb) > kvRegionFixedBytes+maxKVRegionKeyBytes {
		return bad("attribute %s is not base64 of address, length and a 1..%d-byte key", AttrKVRegion, maxKVRegionKeyBytes)
	}
	ref.Region = xfer.Descriptor{
		Address:    binary.BigEndian.Uint64(rb[0:8]),
		Length:     binary.BigEndian.Uint64(rb[8:16]),
		MemoryKind: xfer.MemoryHost,
		RemoteKey:  append([]byte(nil), rb[16:]...),
	}
	if ref.Region.Length != lm.SessionBytes {
		return bad("region of %d bytes, a %s session is %d", ref.Region.Length, KVFormat, lm.SessionBytes)
	}
	if err := xfer.CheckRemote([]xfer.Descriptor{ref.Region}); err != nil {
		return bad("attribute %s: %v", AttrKVRegion, err)
	}
	eps := w.GetEndpoints()
	if len(eps) != 1 {
		return bad("%d endpoints (want P's control endpoint)", len(eps))
	}
	if ep := eps[0]; ep.GetHost() == "" || len(ep.GetHost()) > 255 || ep.GetPort() == 0 || ep.GetPort() > 65535 {
		return bad("endpoint %.60q:%d is not a host and a port 1..65535", ep.GetHost(), ep.GetPort())
	}
	ref.Endpoint = eps[0]
	return ref, nil
}
