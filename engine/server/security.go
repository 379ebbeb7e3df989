package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// Security turns on TLS on every listener and operator authorization
// (CONTRACT SE-1, SE-2). The zero value serves plaintext without
// authorization, as before.
//
// TLS: with CertFile and KeyFile set, the gRPC server, the metrics listener
// (ServeMetrics) and the tcp transfer agent serve TLS 1.2 or later with
// that certificate. With ClientCAFile set as well, every listener requires
// a client certificate signed by one of its CAs (mTLS): a peer without one
// fails the handshake, before any handler or frame parser runs.
//
// Peers: when the engine serves TLS (or PeerCAFile is set) it dials its
// peers (the producer's Control from a consumer, P's Control from D, and
// other transfer agents) over TLS too, verifying their certificates
// against PeerCAFile (default: ClientCAFile, else the system roots) and
// presenting its own certificate, so one certificate per engine with both
// server and client key usage serves a whole mTLS deployment.
//
// Authorization (on when OperatorTokenFile or OperatorIdentities is set):
// Shutdown and Abort(all_requests) are operator calls; anyone else gets
// PERMISSION_DENIED. The operator is the bearer of the token in
// OperatorTokenFile (gRPC metadata `authorization: Bearer <token>`) or a
// caller whose verified client certificate names one of OperatorIdentities
// (its subject common name, or a DNS, URI or e-mail subject alternative
// name). Abort(request_id) cancels only a request of the same caller: the
// caller is identified by its bearer token when it sends one, else by the
// subject of its verified client certificate; a request started by a caller
// with neither (anonymous) can be aborted only by the operator. Abort of
// another caller's running request answers PERMISSION_DENIED (request ids
// are chosen by clients and are no secret; the answer tells the caller why,
// where ALREADY_FINISHED would misreport a running request) and cancels
// nothing. Abort(encoder_cache) and Abort(kv_session) are not operator
// calls: the reference itself is the capability (SU-5).
type Security struct {
	// CertFile and KeyFile are the engine's certificate chain and key (PEM);
	// both or neither (--tls-cert, --tls-key).
	CertFile, KeyFile string
	// ClientCAFile is a PEM bundle of CAs for client certificates; set,
	// every listener requires one (--tls-client-ca). Needs CertFile.
	ClientCAFile string
	// PeerCAFile is a PEM bundle of CAs for the certificates of the peers
	// this engine dials (--tls-ca). Set without CertFile, peers are dialled
	// over TLS without a client certificate.
	PeerCAFile string
	// OperatorTokenFile holds the operator's bearer token (surrounding
	// white space is ignored; at least 16 bytes) (--operator-token-file).
	OperatorTokenFile string
	// OperatorIdentities are client-certificate names that are operators
	// (--operator-identity). Needs ClientCAFile.
	OperatorIdentities []string
}

// MinOperatorTokenBytes is the shortest operator token accepted (16 bytes:
// 128 bits when random, the same bar as a reference id, SU-5).
const MinOperatorTokenBytes = 16

// maxBearerTokenBytes bounds a bearer token in the authorization metadata.
const maxBearerTokenBytes = 4096

// authorizationOn reports whether Shutdown and Abort are authorized.
func (s Security) authorizationOn() bool {
	return s.OperatorTokenFile != "" || len(s.OperatorIdentities) > 0
}

// security is Security loaded: TLS configurations and the operator's
// credentials.
type security struct {
	server        *tls.Config // nil: plaintext listeners
	peer          *tls.Config // nil: peers dialled in plaintext
	authorization bool
	operatorToken []byte // SHA-256 of the operator token; nil if none
	operatorNames []string
}

// errSecurityConfig wraps every error of a Security New refuses.
var errSecurityConfig = errors.New("server: bad tls or authorization settings")

// loadSecurity reads the files of s. Errors wrap errSecurityConfig.
func loadSecurity(s Security, hooks Hooks) (*security, error) {
	bad := func(format string, args ...any) (*security, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{errSecurityConfig}, args...)...)
	}
	switch {
	case (s.CertFile == "") != (s.KeyFile == ""):
		return bad("--tls-cert and --tls-key go together")
	case s.ClientCAFile != "" && s.CertFile == "":
		return bad("--tls-client-ca needs --tls-cert and --tls-key (client authentication is part of TLS)")
	case len(s.OperatorIdentities) > 0 && s.ClientCAFile == "":
		return bad("--operator-identity needs --tls-client-ca (identities come from verified client certificates)")
	}
	sec := &security{authorization: s.authorizationOn()}
	for _, n := range s.OperatorIdentities {
		if n = strings.TrimSpace(n); n != "" {
			sec.operatorNames = append(sec.operatorNames, n)
		}
	}
	if s.OperatorTokenFile != "" {
		raw, err := os.ReadFile(s.OperatorTokenFile)
		if err != nil {
			return bad("--operator-token-file: %v", err)
		}
		tok := strings.TrimSpace(string(raw))
		if len(tok) < MinOperatorTokenBytes || len(tok) > maxBearerTokenBytes || !isToken68(tok) {
			return bad("--operator-token-file %s: want %d..%d bytes of [A-Za-z0-9-._~+/] (then optional '=')", s.OperatorTokenFile, MinOperatorTokenBytes, maxBearerTokenBytes)
		}
		h := sha256.Sum256([]byte(tok))
		sec.operatorToken = h[:]
	}
	var pair []tls.Certificate
	if s.CertFile != "" {
		p, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
		if err != nil {
			return bad("--tls-cert/--tls-key: %v", err)
		}
		pair = []tls.Certificate{p}
		sec.server = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: pair}
	}
	var clientCAs *x509.CertPool
	if s.ClientCAFile != "" {
		pool, err := loadPool(s.ClientCAFile)
		if err != nil {
			return bad("--tls-client-ca: %v", err)
		}
		clientCAs = pool
		sec.server.ClientCAs, sec.server.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	if sec.server != nil && hooks.ServerTLS != nil {
		hooks.ServerTLS(sec.server)
	}
	if s.CertFile != "" || s.PeerCAFile != "" {
		sec.peer = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: pair, RootCAs: clientCAs}
		if s.PeerCAFile != "" {
			pool, err := loadPool(s.PeerCAFile)
			if err != nil {
				return bad("--tls-ca: %v", err)
			}
			sec.peer.RootCAs = pool
		}
	}
	return sec, nil
}

func loadPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// peerCredentials are the transport credentials for dialling a peer's
// Control (TLS when the engine dials peers over TLS).
func (s *security) peerCredentials() credentials.TransportCredentials {
	if s == nil || s.peer == nil {
		return insecure.NewCredentials()
	}
	return credentials.NewTLS(s.peer)
}

// caller is who made an RPC, as authorization sees it.
type caller struct {
	// id identifies the caller for Abort(request_id): "token:<hex>" (a
	// hash of its bearer token), "x509:<subject>", or "" (anonymous).
	id string
	// operator: the caller holds the operator token or identity.
	operator bool
}

// Errors of authorization (CONTRACT SE-2).
var (
	// errPermissionDenied: an operator call by a non-operator, or an Abort
	// of another caller's request (PERMISSION_DENIED).
	errPermissionDenied = errors.New("server: permission denied")
	// errUnauthenticated: authorization metadata that is not one
	// `Bearer <token>` (UNAUTHENTICATED).
	errUnauthenticated = errors.New("server: malformed authorization metadata")
)

// ParseBearer parses one value of the `authorization` gRPC metadata: the
// scheme "Bearer" (any case), one or more spaces, and a token68 (RFC 6750:
// [A-Za-z0-9-._~+/]+ then '='*) of at most 4096 bytes. Errors wrap
// errUnauthenticated.
func ParseBearer(v string) (string, error) {
	scheme, tok, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", fmt.Errorf("%w: want \"Bearer <token>\"", errUnauthenticated)
	}
	tok = strings.TrimLeft(tok, " ")
	if tok == "" || len(tok) > maxBearerTokenBytes || !isToken68(tok) {
		return "", fmt.Errorf("%w: the bearer token is empty, longer than %d bytes, or not token68", errUnauthenticated, maxBearerTokenBytes)
	}
	return tok, nil
}

// isToken68 reports whether s is an RFC 7235 token68.
func isToken68(s string) bool {
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("-._~+/", c) >= 0) {
			break
		}
	}
	if i == 0 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] != '=' {
			return false
		}
	}
	return true
}

// callerOf identifies the caller of an RPC from its bearer token and its
// verified client certificate. Errors wrap errUnauthenticated (more than
// one authorization value, or one that is not a bearer token).
func (e *Engine) callerOf(ctx context.Context) (caller, error) {
	var c caller
	md, _ := metadata.FromIncomingContext(ctx)
	switch vals := md.Get("authorization"); len(vals) {
	case 0:
	case 1:
		tok, err := ParseBearer(vals[0])
		if err != nil {
			return caller{}, err
		}
		h := sha256.Sum256([]byte(tok))
		c.id = "token:" + hex.EncodeToString(h[:16])
		if e.sec.operatorToken != nil && subtle.ConstantTimeCompare(h[:], e.sec.operatorToken) == 1 {
			c.operator = true
		}
	default:
		return caller{}, fmt.Errorf("%w: %d authorization values, want one", errUnauthenticated, len(vals))
	}
	if leaf := verifiedLeaf(ctx); leaf != nil {
		if c.id == "" {
			c.id = "x509:" + leaf.Subject.String()
		}
		if !c.operator && len(e.sec.operatorNames) > 0 {
			c.operator = slices.ContainsFunc(certificateNames(leaf), func(n string) bool { return slices.Contains(e.sec.operatorNames, n) })
		}
	}
	return c, nil
}

// verifiedLeaf is the caller's client certificate when the TLS handshake
// verified it, else nil.
func verifiedLeaf(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return nil
	}
	return info.State.VerifiedChains[0][0]
}

// certificateNames are the names an operator identity is matched against:
// the subject common name and the DNS, URI and e-mail alternative names.
func certificateNames(c *x509.Certificate) []string {
	names := []string{}
	if c.Subject.CommonName != "" {
		names = append(names, c.Subject.CommonName)
	}
	names = append(names, c.DNSNames...)
	for _, u := range c.URIs {
		names = append(names, u.String())
	}
	return append(names, c.EmailAddresses...)
}

// authorizeOperator answers nil when authorization is off or the caller is
// the operator, else PERMISSION_DENIED naming the call (SE-2).
func (e *Engine) authorizeOperator(ctx context.Context, call string) error {
	if !e.sec.authorization {
		return nil
	}
	c, err := e.callerOf(ctx)
	if err != nil {
		return err
	}
	allowed := c.operator
	if e.cfg.Hooks.AuthorizeOperator != nil {
		allowed = e.cfg.Hooks.AuthorizeOperator(call, c.operator)
	}
	if !allowed {
		return fmt.Errorf("%w: SE-2 %s is an operator call", errPermissionDenied, call)
	}
	return nil
}

// authorizeAbort decides whether the caller may cancel a request started
// by owner ("" = anonymous): with authorization off anyone may; with it on
// the operator or the same identified caller (SE-2).
func (e *Engine) authorizeAbort(ctx context.Context, requestID, owner string) error {
	if !e.sec.authorization {
		return nil
	}
	c, err := e.callerOf(ctx)
	if err != nil {
		return err
	}
	allowed := c.operator || (c.id != "" && c.id == owner)
	if e.cfg.Hooks.AbortOwner != nil {
		allowed = e.cfg.Hooks.AbortOwner(owner, c.id, c.operator)
	}
	if !allowed {
		return fmt.Errorf("%w: SE-2 request %.80q was started by another caller", errPermissionDenied, requestID)
	}
	return nil
}

// ownerOf is the id Abort(request_id) matches a new request's caller
// against ("" when the caller cannot be identified).
func (e *Engine) ownerOf(ctx context.Context) string {
	c, err := e.callerOf(ctx)
	if err != nil {
		return ""
	}
	return c.id
}

// ServerTLS returns the TLS configuration the engine's listeners serve, or
// nil when it serves plaintext. The caller must not modify it.
func (e *Engine) ServerTLS() *tls.Config { return e.sec.server }
