package target

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// selfSigned writes a self-signed CA certificate for 127.0.0.1 and
// "engine.test" and its key to dir as ca.pem and key.pem.
func selfSigned(t *testing.T, dir string) (certPath, keyPath string, pair tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "engine.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"engine.test"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	certPath, keyPath = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certPath, certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	pair, err = tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return certPath, keyPath, pair
}

type infoServer struct {
	pb.UnimplementedControlServer
}

func (infoServer) GetServerInfo(context.Context, *pb.GetServerInfoRequest) (*pb.ServerInfo, error) {
	return &pb.ServerInfo{EngineName: "tls-fake", SchemaRevision: 1}, nil
}

// startTLSServer serves a fake Control over TLS; with clientCAs set it
// requires a client certificate signed by them.
func startTLSServer(t *testing.T, pair tls.Certificate, clientCAs *x509.CertPool) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if clientCAs != nil {
		cfg.ClientCAs, cfg.ClientAuth = clientCAs, tls.RequireAndVerifyClientCert
	}
	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(cfg)))
	pb.RegisterControlServer(gs, infoServer{})
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

func serverInfo(t *testing.T, c Config) (*pb.ServerInfo, error) {
	t.Helper()
	tg, err := Dial(c)
	if err != nil {
		return nil, err
	}
	defer tg.Close()
	e, _ := tg.Engine(RoleProducer)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return e.GetServerInfo(ctx)
}

func TestDialUsesTLSFromProfile(t *testing.T) {
	dir := t.TempDir()
	caPath, keyPath, pair := selfSigned(t, dir)
	addr := startTLSServer(t, pair, nil)
	pool := x509.NewCertPool()
	pool.AddCert(pair.Leaf)
	mtlsAddr := startTLSServer(t, pair, pool)

	tests := []struct {
		name     string
		addr     string
		tls      *TLS
		wantCode codes.Code
	}{
		{"verified against ca_file", addr, &TLS{CAFile: caPath}, codes.OK},
		{"server_name override", addr, &TLS{CAFile: caPath, ServerName: "engine.test"}, codes.OK},
		{"wrong server_name fails verification", addr, &TLS{CAFile: caPath, ServerName: "other.test"}, codes.Unavailable},
		{"system roots do not know a self-signed CA", addr, &TLS{}, codes.Unavailable},
		{"insecure_skip_verify", addr, &TLS{InsecureSkipVerify: true}, codes.OK},
		{"plaintext against a TLS server", addr, nil, codes.Unavailable},
		{"mutual TLS with a client certificate", mtlsAddr, &TLS{CAFile: caPath, CertFile: caPath, KeyFile: keyPath}, codes.OK},
		{"mutual TLS without a client certificate", mtlsAddr, &TLS{CAFile: caPath}, codes.Unavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{Endpoints: map[Role]string{RoleProducer: tt.addr}, Profile: Profile{TLS: tt.tls}}
			info, err := serverInfo(t, c)
			if got := status.Code(err); got != tt.wantCode {
				t.Fatalf("GetServerInfo over %+v = %v; want %v", tt.tls, err, tt.wantCode)
			}
			if tt.wantCode == codes.OK && info.GetEngineName() != "tls-fake" {
				t.Errorf("GetServerInfo = %v; want the fake's answer", info)
			}
		})
	}
}

func TestLoadConfigTLSErrors(t *testing.T) {
	dir := t.TempDir()
	caPath, keyPath, _ := selfSigned(t, dir)
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, tls, want string
	}{
		{"missing ca file", "{ca_file: nowhere.pem}", "tls.ca_file"},
		{"ca file without certificates", "{ca_file: " + notPEM + "}", "holds no PEM certificate"},
		{"key pair that does not load", "{cert_file: " + caPath + ", key_file: " + notPEM + "}", "cert_file/key_file"},
		{"cert without key", "{cert_file: " + caPath + "}", "without tls.key_file"},
		{"key without cert", "{key_file: " + keyPath + "}", "without tls.cert_file"},
		{"skip verify with ca", "{ca_file: " + caPath + ", insecure_skip_verify: true}", "choose one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeProfile(t, "endpoints: {producer: 127.0.0.1:1}\ntls: "+tt.tls+"\n")
			_, err := LoadConfigEnv(path, nil)
			if !errors.Is(err, ErrBadTLS) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("LoadConfigEnv(tls: %s) = %v; want ErrBadTLS mentioning %q", tt.tls, err, tt.want)
			}
		})
	}
	t.Run("DialEngine with unusable settings", func(t *testing.T) {
		_, err := DialEngine("127.0.0.1:1", WithTLS(&TLS{CAFile: notPEM}))
		if !errors.Is(err, ErrBadTLS) {
			t.Fatalf("DialEngine = %v; want ErrBadTLS", err)
		}
	})
}

func TestLoadConfigResolvesTLSPathsAgainstTheProfile(t *testing.T) {
	dir := t.TempDir()
	selfSigned(t, dir)
	path := filepath.Join(dir, "target.yaml")
	if err := os.WriteFile(path, []byte("endpoints: {producer: 127.0.0.1:1}\ntls: {ca_file: ca.pem}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfigEnv(path, nil)
	if err != nil || c.TLS.CAFile != filepath.Join(dir, "ca.pem") {
		t.Fatalf("LoadConfigEnv = %+v, %v; want ca_file resolved to %s", c.TLS, err, filepath.Join(dir, "ca.pem"))
	}
}
