package target

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc/credentials"
)

// TLS is the profile's `tls:` block: how the harness reaches a target that
// serves gRPC over TLS. Absent (Config.TLS nil) means plaintext; present,
// even empty, means TLS verified against the system roots.
type TLS struct {
	// CAFile is a PEM bundle of the CAs that sign the target's certificates
	// ("" = the system roots).
	CAFile string `yaml:"ca_file" json:"ca_file,omitempty"`
	// CertFile and KeyFile are the harness's client certificate and key (PEM)
	// for targets that require mutual TLS; both or neither.
	CertFile string `yaml:"cert_file" json:"cert_file,omitempty"`
	// KeyFile is the PEM private key of CertFile.
	KeyFile string `yaml:"key_file" json:"key_file,omitempty"`
	// ServerName overrides the name checked against the target's certificate
	// ("" = the endpoint's host).
	ServerName string `yaml:"server_name" json:"server_name,omitempty"`
	// InsecureSkipVerify accepts any server certificate (testing only; it
	// cannot be combined with CAFile).
	InsecureSkipVerify bool `yaml:"insecure_skip_verify" json:"insecure_skip_verify,omitempty"`
	// ClientAuth declares that every listener requires a client certificate
	// (mutual TLS): SE-1 then checks that a peer without a valid one is
	// refused before any handler runs. It needs CertFile and KeyFile (the
	// harness's own certificate).
	ClientAuth bool `yaml:"client_auth" json:"client_auth,omitempty"`
	// Listeners are the target's listeners besides its gRPC endpoints
	// (metrics, transfer agents) that SE-1 checks serve TLS.
	Listeners []Listener `yaml:"listeners" json:"listeners,omitempty"`
}

// Listener is one non-gRPC listener of a target (CONTRACT SE-1: "every
// listener (gRPC, metrics, transfer agent)").
type Listener struct {
	// Role is the endpoint whose process owns the listener (producer, ...).
	Role Role `yaml:"role" json:"role"`
	// Kind is ListenerMetrics (HTTPS, GET /metrics) or ListenerTransfer
	// (a transfer agent's data connections: any protocol over TLS).
	Kind string `yaml:"kind" json:"kind"`
	// Address is its host:port.
	Address string `yaml:"address" json:"address"`
}

// Kinds of Listener.
const (
	ListenerMetrics  = "metrics"
	ListenerTransfer = "transfer"
)

// String is the listener as BATON_TLS_LISTENERS writes it:
// "role/kind=host:port".
func (l Listener) String() string { return string(l.Role) + "/" + l.Kind + "=" + l.Address }

// ParseListener parses "role/kind=host:port" (BATON_TLS_LISTENERS).
// Errors wrap ErrBadTLS.
func ParseListener(s string) (Listener, error) {
	rk, addr, ok := strings.Cut(strings.TrimSpace(s), "=")
	role, kind, ok2 := strings.Cut(rk, "/")
	if !ok || !ok2 {
		return Listener{}, fmt.Errorf("%w: listener %q: want role/kind=host:port", ErrBadTLS, s)
	}
	l := Listener{Role: Role(role), Kind: kind, Address: addr}
	return l, l.check()
}

func (l Listener) check() error {
	switch l.Role {
	case RoleProducer, RoleConsumer, RolePrefill, RoleDecode, RoleBaseline:
	default:
		return fmt.Errorf("%w: tls.listeners: role %q (want producer, consumer, prefill, decode or baseline)", ErrBadTLS, l.Role)
	}
	if l.Kind != ListenerMetrics && l.Kind != ListenerTransfer {
		return fmt.Errorf("%w: tls.listeners: kind %q (want %s or %s)", ErrBadTLS, l.Kind, ListenerMetrics, ListenerTransfer)
	}
	if _, _, err := net.SplitHostPort(l.Address); err != nil {
		return fmt.Errorf("%w: tls.listeners: address %q: %v", ErrBadTLS, l.Address, err)
	}
	return nil
}

// ErrBadTLS is wrapped by every error of a profile's TLS settings: a
// certificate without its key (or the reverse), insecure_skip_verify with a
// CA file, a file that cannot be read, a CA file with no certificate, a key
// pair that does not load.
var ErrBadTLS = errors.New("target: bad tls settings")

// check validates the settings without reading any file.
func (t *TLS) check() error {
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		return fmt.Errorf("%w: tls.cert_file %q without tls.key_file", ErrBadTLS, t.CertFile)
	case t.KeyFile != "" && t.CertFile == "":
		return fmt.Errorf("%w: tls.key_file %q without tls.cert_file", ErrBadTLS, t.KeyFile)
	case t.InsecureSkipVerify && t.CAFile != "":
		return fmt.Errorf("%w: tls.insecure_skip_verify with tls.ca_file %q: choose one", ErrBadTLS, t.CAFile)
	case t.ClientAuth && t.CertFile == "":
		return fmt.Errorf("%w: tls.client_auth needs tls.cert_file and tls.key_file (the harness's client certificate)", ErrBadTLS)
	}
	for _, l := range t.Listeners {
		if err := l.check(); err != nil {
			return err
		}
	}
	return nil
}

// resolve makes relative file paths relative to dir (the profile file's
// directory). It does nothing on a nil receiver.
func (t *TLS) resolve(dir string) {
	if t == nil {
		return
	}
	for _, p := range []*string{&t.CAFile, &t.CertFile, &t.KeyFile} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
}

// ClientConfig loads the files and returns the client-side TLS
// configuration (TLS 1.2 or later). Errors wrap ErrBadTLS.
func (t *TLS) ClientConfig() (*tls.Config, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // opt-in, documented as testing only
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: tls.ca_file: %v", ErrBadTLS, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: tls.ca_file %q holds no PEM certificate", ErrBadTLS, t.CAFile)
		}
		cfg.RootCAs = pool
	}
	if t.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: tls.cert_file/key_file: %v", ErrBadTLS, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// credentials returns gRPC transport credentials for the settings.
func (t *TLS) credentials() (credentials.TransportCredentials, error) {
	cfg, err := t.ClientConfig()
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(cfg), nil
}

// Authorization is the profile's `authorization:` block: the target
// authorizes operator calls (CONTRACT SE-2 applies) and this is the
// operator's credential. Every connection of the harness presents it, so
// destructive cases (an accepted Shutdown) can run; SE-2's cases call as
// other callers explicitly (WithCaller).
//
// Callers other than the operator are identified by bearer tokens the
// harness draws at random: the target must treat the bearer of a token as
// one caller (for Abort(request_id), "the same caller").
type Authorization struct {
	// Operator is the operator's credential: a bearer token file, or a
	// client certificate that replaces tls.cert_file/key_file on the
	// harness's connections.
	Operator Credential `yaml:"operator" json:"operator"`
}

// Credential is one caller's credential: TokenFile (sent as gRPC metadata
// `authorization: Bearer <token>`), or CertFile and KeyFile (a client
// certificate; needs a tls block). Exactly one of the two.
type Credential struct {
	// TokenFile holds the bearer token (surrounding white space ignored).
	TokenFile string `yaml:"token_file" json:"token_file,omitempty"`
	// CertFile and KeyFile are a client certificate and its key (PEM).
	CertFile string `yaml:"cert_file" json:"cert_file,omitempty"`
	// KeyFile is the PEM private key of CertFile.
	KeyFile string `yaml:"key_file" json:"key_file,omitempty"`
}

// check validates the block without reading files.
func (a *Authorization) check(t *TLS) error {
	o := a.Operator
	switch {
	case o.TokenFile == "" && o.CertFile == "":
		return fmt.Errorf("%w: authorization.operator needs token_file, or cert_file and key_file", ErrBadTLS)
	case o.TokenFile != "" && o.CertFile != "":
		return fmt.Errorf("%w: authorization.operator: token_file or cert_file, not both", ErrBadTLS)
	case (o.CertFile == "") != (o.KeyFile == ""):
		return fmt.Errorf("%w: authorization.operator: cert_file and key_file go together", ErrBadTLS)
	case o.CertFile != "" && t == nil:
		return fmt.Errorf("%w: authorization.operator.cert_file needs a tls block (client certificates are TLS)", ErrBadTLS)
	}
	return nil
}

// resolve makes relative paths relative to dir; nothing on nil.
func (a *Authorization) resolve(dir string) {
	if a == nil {
		return
	}
	for _, p := range []*string{&a.Operator.TokenFile, &a.Operator.CertFile, &a.Operator.KeyFile} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
}

// load reads the credential's token ("" for a certificate credential).
// Errors wrap ErrBadTLS.
func (c Credential) load() (string, error) {
	if c.TokenFile == "" {
		return "", nil
	}
	raw, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return "", fmt.Errorf("%w: authorization token_file: %v", ErrBadTLS, err)
	}
	tok := strings.TrimSpace(string(raw))
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("%w: authorization token_file %s holds no single token", ErrBadTLS, c.TokenFile)
	}
	return tok, nil
}

// DialOptions are the options DialEngine needs to reach the profile's
// target: TLS with the tls block (the operator's certificate instead of
// tls.cert_file when the operator is a certificate), and the operator's
// bearer token on every call. Errors: ErrBadTLS.
func (p Profile) DialOptions() ([]DialOption, error) {
	var opts []DialOption
	if p.TLS != nil {
		t := *p.TLS
		if a := p.Authorization; a != nil && a.Operator.CertFile != "" {
			t.CertFile, t.KeyFile = a.Operator.CertFile, a.Operator.KeyFile
		}
		creds, err := t.credentials()
		if err != nil {
			return nil, err
		}
		opts = append(opts, withCredentials(creds))
	}
	if p.Authorization != nil {
		tok, err := p.Authorization.Operator.load()
		if err != nil {
			return nil, err
		}
		if tok != "" {
			opts = append(opts, WithBearerToken(tok))
		}
	}
	return opts, nil
}

// NonOperatorTLS is the TLS a non-operator caller dials with (SE-2): the
// tls block as written (its own client certificate, or none), without the
// operator's certificate. nil when the profile has no tls block.
func (p Profile) NonOperatorTLS() *TLS {
	if p.TLS == nil {
		return nil
	}
	t := *p.TLS
	return &t
}

// Dialled returns the *GRPCEngine under e, looking through wrappers
// (EngineWrapper, as Capability does), or nil when e is not reached over
// gRPC.
func Dialled(e Engine) *GRPCEngine {
	g, _ := Capability[*GRPCEngine](e)
	return g
}

// ListenerProbe is what one TLS connection to a listener saw (SE-1).
type ListenerProbe struct {
	// Handshake is the client's TLS handshake error; nil when it completed.
	Handshake error
	// Answer holds the first bytes (at most 64) the server sent after the
	// handshake and the client's hello; empty when it sent none.
	Answer []byte
	// Waiting: the server neither answered nor closed within the wait: it
	// accepted the connection and waits for more.
	Waiting bool
	// ReadErr is how the first read ended when the server closed or sent
	// an alert (a TLS 1.3 server refuses a client certificate after the
	// client's side of the handshake completed).
	ReadErr error
}

// Accepted reports whether the server accepted the connection: the
// handshake completed and the server answered or waits for more.
func (p ListenerProbe) Accepted() bool {
	return p.Handshake == nil && (len(p.Answer) > 0 || p.Waiting)
}

// String says what happened, for a failure message.
func (p ListenerProbe) String() string {
	switch {
	case p.Handshake != nil:
		return "handshake failed: " + p.Handshake.Error()
	case len(p.Answer) > 0:
		return fmt.Sprintf("answered %q", p.Answer)
	case p.Waiting:
		return "accepted the connection and waited for more"
	default:
		return fmt.Sprintf("closed the connection (%v)", p.ReadErr)
	}
}

// ProbeTLS opens one TLS connection to address with cfg (its ServerName
// defaults to the address's host), sends hello (may be empty) and reads the
// first answer for at most wait. Errors of the TCP dial are returned as
// the error: the listener did not answer at all.
func ProbeTLS(ctx context.Context, address string, cfg *tls.Config, hello []byte, wait time.Duration) (ListenerProbe, error) {
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: wait}, Config: cfg}
	raw, err := (&net.Dialer{Timeout: wait}).DialContext(ctx, "tcp", address)
	if err != nil {
		return ListenerProbe{}, err
	}
	raw.Close()
	hctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	conn, err := d.DialContext(hctx, "tcp", address)
	if err != nil {
		return ListenerProbe{Handshake: err}, nil
	}
	defer conn.Close()
	return readAnswer(conn, hello, wait), nil
}

// ProbePlain opens a plain TCP connection to address, sends hello and
// reads the first answer for at most wait.
func ProbePlain(ctx context.Context, address string, hello []byte, wait time.Duration) (ListenerProbe, error) {
	conn, err := (&net.Dialer{Timeout: wait}).DialContext(ctx, "tcp", address)
	if err != nil {
		return ListenerProbe{}, err
	}
	defer conn.Close()
	return readAnswer(conn, hello, wait), nil
}

func readAnswer(conn net.Conn, hello []byte, wait time.Duration) ListenerProbe {
	_ = conn.SetDeadline(time.Now().Add(wait))
	if len(hello) > 0 {
		if _, err := conn.Write(hello); err != nil {
			return ListenerProbe{ReadErr: err}
		}
	}
	buf := make([]byte, 64)
	n, err := io.ReadAtLeast(conn, buf, 1)
	var ne net.Error
	switch {
	case n > 0:
		return ListenerProbe{Answer: buf[:n]}
	case errors.As(err, &ne) && ne.Timeout():
		return ListenerProbe{Waiting: true}
	default:
		return ListenerProbe{ReadErr: err}
	}
}

// HTTP2Preface is the client connection preface of HTTP/2 (RFC 9113
// section 3.4) followed by an empty SETTINGS frame: a gRPC server that
// accepts the connection answers it with its own SETTINGS frame.
var HTTP2Preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")

// MetricsRequest is an HTTP/1.1 GET /metrics, the hello to a metrics
// listener.
var MetricsRequest = []byte("GET /metrics HTTP/1.1\r\nHost: baton\r\nConnection: close\r\n\r\n")
