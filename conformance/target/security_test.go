package target

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// authServer records the authorization metadata of each GetServerInfo.
type authServer struct {
	pb.UnimplementedControlServer
	mu   sync.Mutex
	seen [][]string
}

func (s *authServer) GetServerInfo(ctx context.Context, _ *pb.GetServerInfoRequest) (*pb.ServerInfo, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	s.mu.Lock()
	s.seen = append(s.seen, md.Get("authorization"))
	s.mu.Unlock()
	return &pb.ServerInfo{EngineName: "auth-fake"}, nil
}

func (s *authServer) last() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[len(s.seen)-1]
}

// TestOperatorTokenAndOtherCallers: a profile's operator token rides on
// every call; WithCaller replaces it (or sends none) for SE-2's callers.
func TestOperatorTokenAndOtherCallers(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &authServer{}
	gs := grpc.NewServer()
	pb.RegisterControlServer(gs, srv)
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()
	tokenFile := filepath.Join(t.TempDir(), "op.token")
	if err := os.WriteFile(tokenFile, []byte(" operator-secret \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := Profile{Authorization: &Authorization{Operator: Credential{TokenFile: tokenFile}}}
	opts, err := p.DialOptions()
	if err != nil {
		t.Fatal(err)
	}
	e, err := DialEngine(lis.Addr().String(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	for _, c := range []struct {
		ctx  context.Context
		want string
	}{
		{ctx, "Bearer operator-secret"},
		{WithCaller(ctx, "alice"), "Bearer alice"},
		{WithCaller(ctx, ""), ""},
	} {
		if _, err := e.GetServerInfo(c.ctx); err != nil {
			t.Fatal(err)
		}
		got := strings.Join(srv.last(), ",")
		if got != c.want {
			t.Errorf("authorization metadata = %q; want %q", got, c.want)
		}
	}
	if Dialled(e) != e || Dialled(wrappedEngine{e}) != e || Dialled(nil) != nil {
		t.Error("Dialled does not find the *GRPCEngine through a wrapper")
	}
}

type wrappedEngine struct{ Engine }

func (w wrappedEngine) UnwrapEngine() Engine { return w.Engine }

// TestAuthorizationProfileErrors: an authorization block that cannot work
// is a configuration error (exit 3) before anything is dialled.
func TestAuthorizationProfileErrors(t *testing.T) {
	dir := t.TempDir()
	caPath, keyPath, _ := selfSigned(t, dir)
	for _, c := range []struct{ name, yaml, want string }{
		{"no credential", "authorization: {operator: {}}", "needs token_file"},
		{"token and certificate", "authorization: {operator: {token_file: t, cert_file: " + caPath + ", key_file: " + keyPath + "}}\ntls: {}", "not both"},
		{"certificate without tls", "authorization: {operator: {cert_file: " + caPath + ", key_file: " + keyPath + "}}", "needs a tls block"},
		{"missing token file", "authorization: {operator: {token_file: nowhere.token}}", "token_file"},
		{"client auth without a certificate", "tls: {client_auth: true}", "client_auth needs"},
		{"bad listener", "tls: {listeners: [{role: producer, kind: gopher, address: 'h:1'}]}", "kind"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeProfile(t, "endpoints: {producer: 127.0.0.1:1}\n"+c.yaml+"\n")
			_, err := LoadConfigEnv(path, nil)
			if !errors.Is(err, ErrBadTLS) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("LoadConfigEnv(%s) = %v; want ErrBadTLS mentioning %q", c.yaml, err, c.want)
			}
		})
	}
	lookup := func(k string) (string, bool) {
		v, ok := map[string]string{"BATON_TLS_LISTENERS": "producer/metrics=127.0.0.1:9, consumer/transfer=127.0.0.1:10",
			"BATON_AUTHORIZATION_OPERATOR_TOKEN_FILE": filepath.Join(dir, "op.token"), "BATON_TLS_CA_FILE": caPath}[k]
		return v, ok
	}
	if err := os.WriteFile(filepath.Join(dir, "op.token"), []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfigEnv(writeProfile(t, "endpoints: {producer: 127.0.0.1:1}\n"), lookup)
	if err != nil || c.TLS == nil || len(c.TLS.Listeners) != 2 || c.Authorization == nil {
		t.Fatalf("LoadConfigEnv with BATON_TLS_LISTENERS and an operator token = %+v, %v", c, err)
	}
}

// TestProbeTLS: a probe tells a served connection (an HTTP/2 SETTINGS
// answer) from one refused for want of a client certificate.
func TestProbeTLS(t *testing.T) {
	dir := t.TempDir()
	_, _, pair := selfSigned(t, dir)
	pool := x509.NewCertPool()
	pool.AddCert(pair.Leaf)
	addr := startTLSServer(t, pair, pool)
	base := &tls.Config{RootCAs: pool, ServerName: "engine.test", NextProtos: []string{"h2"}}
	withCert := base.Clone()
	withCert.Certificates = []tls.Certificate{pair}
	ctx := context.Background()
	p, err := ProbeTLS(ctx, addr, withCert, HTTP2Preface, 2*time.Second)
	if err != nil || !p.Accepted() || len(p.Answer) < 9 || p.Answer[3] != 0x4 {
		t.Errorf("probe with a client certificate = %s, %v; want an HTTP/2 SETTINGS answer", p, err)
	}
	if p, err := ProbeTLS(ctx, addr, base, HTTP2Preface, 2*time.Second); err != nil || p.Accepted() {
		t.Errorf("probe without a client certificate = %s, %v; want it refused", p, err)
	}
	if p, err := ProbePlain(ctx, addr, HTTP2Preface, 2*time.Second); err != nil || isSettings(p.Answer) {
		t.Errorf("plaintext probe = %s, %v; want no HTTP/2 answer", p, err)
	}
	if _, err := ProbeTLS(ctx, "127.0.0.1:1", base, nil, time.Second); err == nil {
		t.Error("probe of a closed port: no error")
	}
}

func isSettings(b []byte) bool { return len(b) >= 9 && b[3] == 0x4 }
