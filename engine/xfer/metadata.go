package xfer

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// Metadata layout (all integers big-endian):
//
//	magic    4 bytes  "BXMD"
//	version  1 byte   1
//	backend  1 byte   1 = loopback, 2 = tcp
//	nameLen  1 byte   1..255, then the agent name
//	connLen  2 bytes  1..1024, then the connection info:
//	                  loopback: the Registry's id; tcp: "host:port" to dial,
//	                  in its canonical form (CanonicalAddress: at most 262
//	                  bytes, no leading zeros in the port)
//
// Nothing may follow. ParseMetadata, LoadRemoteMetadata, CreateWriteTo and
// CreateReadFrom answer ErrInvalidParam for anything else.
const (
	metadataMagic   = "BXMD"
	metadataVersion = 1
	maxNameBytes    = 255
	maxConnBytes    = 1024
)

var backendCodes = map[string]byte{BackendLoopback: 1, BackendTCP: 2}

// peerInfo is a peer: its name and how to reach it. A loaded peer's lives
// in the agent's table until invalidated; a request keeps its own copy.
type peerInfo struct {
	name    string
	backend string
	conn    string
}

func encodeMetadata(backend, name, conn string) []byte {
	b := make([]byte, 0, len(metadataMagic)+3+len(name)+2+len(conn)) // one allocation
	b = append(b, metadataMagic...)
	b = append(b, metadataVersion, backendCodes[backend], byte(len(name)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(conn)))
	return append(b, conn...)
}

func decodeMetadata(md []byte) (peerInfo, error) {
	backend, nameLen, err := checkMetadataLayout(md)
	if err != nil {
		return peerInfo{}, err
	}
	// The name and the connection info in one string: <name><len><conn>.
	s := string(md[len(metadataMagic)+3:])
	p := peerInfo{name: s[:nameLen], backend: backend, conn: s[nameLen+2:]}
	if backend == BackendTCP {
		if err := CanonicalAddress(p.conn); err != nil {
			return peerInfo{}, fmt.Errorf("xfer: malformed agent metadata: %w", err)
		}
	}
	return p, nil
}

// checkMetadataLayout is decodeMetadata's check of md's layout (all but
// the tcp address's canonical form), without copying anything out of md:
// the backend and the name's length.
func checkMetadataLayout(md []byte) (backend string, nameLen int, err error) {
	bad := func(why string) (string, int, error) {
		return "", 0, fmt.Errorf("xfer: malformed agent metadata (%s): %w", why, ErrInvalidParam)
	}
	r := md
	if len(r) < len(metadataMagic)+3 || string(r[:len(metadataMagic)]) != metadataMagic {
		return bad("no magic")
	}
	r = r[len(metadataMagic):]
	if r[0] != metadataVersion {
		return bad("unknown version")
	}
	for name, code := range backendCodes {
		if code == r[1] {
			backend = name
		}
	}
	if backend == "" {
		return bad("unknown backend")
	}
	nameLen = int(r[2])
	r = r[3:]
	if nameLen == 0 || len(r) < nameLen+2 {
		return bad("name")
	}
	connLen := int(binary.BigEndian.Uint16(r[nameLen:]))
	if connLen == 0 || connLen > maxConnBytes || len(r)-nameLen-2 != connLen {
		return bad("connection info")
	}
	return backend, nameLen, nil
}

// validName: agent names are 1..255 bytes with no NUL.
func validName(name string) error {
	if len(name) == 0 || len(name) > maxNameBytes || strings.IndexByte(name, 0) >= 0 {
		return fmt.Errorf("xfer: agent name must be 1..%d bytes without NUL, got %q: %w", maxNameBytes, name, ErrInvalidParam)
	}
	return nil
}

// PeerMetadata is what an agent's metadata (LocalMetadata) says about the
// agent: its backend, its name, and where it is reached: "host:port" for
// tcp, the Registry's id for loopback.
type PeerMetadata struct {
	// Backend is the agent's backend: BackendTCP or BackendLoopback.
	Backend string
	// Name is the agent's name (Options.Name), 1..255 bytes without NUL.
	Name string
	// Address is where the agent is reached: "host:port" in canonical form
	// (CanonicalAddress) for tcp, the Registry's id for loopback.
	Address string
}

// ParseMetadata decodes metadata without loading it into an agent, so a
// caller can decide whether it may reach the peer at all before
// CreateWriteTo, CreateReadFrom or LoadRemoteMetadata (the engine's
// trusted consumer agents, CONTRACT SE-3). Errors wrap ErrInvalidParam, as
// LoadRemoteMetadata's do, for bytes that are not agent metadata (a tcp
// address not in its canonical form included, CanonicalAddress).
func ParseMetadata(md []byte) (PeerMetadata, error) {
	p, err := decodeMetadata(md)
	if err != nil {
		return PeerMetadata{}, err
	}
	return PeerMetadata{Backend: p.backend, Name: p.name, Address: p.conn}, nil
}

// CheckMetadata reports what ParseMetadata would of md: nil when it
// accepts md, else the same error, without decoding md into strings (a
// caller that only checks metadata before using it; the simulator's
// producer checks each transfer request's).
func CheckMetadata(md []byte) error {
	backend, nameLen, err := checkMetadataLayout(md)
	if err != nil {
		return err
	}
	if backend == BackendTCP {
		if err := CanonicalAddress(string(md[len(metadataMagic)+3+nameLen+2:])); err != nil {
			return fmt.Errorf("xfer: malformed agent metadata: %w", err)
		}
	}
	return nil
}

// MetadataAddress returns the connection info an agent's metadata carries
// ("host:port" for tcp, the registry id for loopback): where peers reach
// it (ParseMetadata's Address). Errors: ErrInvalidParam for bytes that are
// not agent metadata.
func MetadataAddress(md []byte) (string, error) {
	p, err := ParseMetadata(md)
	return p.Address, err
}
