package devcert

import (
	"crypto/x509"
	"os"
	"testing"
)

// TestIssuedCertificatesVerify: a leaf verifies against its CA for both
// server (127.0.0.1, localhost, extra names) and client use, its key file
// is private, a self-signed one does not verify, and tokens are 128 bits.
func TestIssuedCertificatesVerify(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA(dir, "t")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue("engine", "engine.internal", "10.0.0.7")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(leaf.Pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"127.0.0.1", "localhost", "engine.internal", "10.0.0.7"} {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool, DNSName: name}); err != nil {
			t.Errorf("verify for %s: %v", name, err)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("verify as a client certificate: %v", err)
	}
	if fi, err := os.Stat(leaf.KeyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, %v; want 0600", fi.Mode(), err)
	}
	self, err := SelfSigned("stranger")
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := x509.ParseCertificate(self.Certificate[0])
	if _, err := sc.Verify(x509.VerifyOptions{Roots: ca.Pool}); err == nil {
		t.Error("a self-signed certificate verifies against the CA")
	}
	_, tok, err := Token(dir, "op")
	if err != nil || len(tok) != 32 {
		t.Errorf("Token = %q, %v; want 32 hex digits", tok, err)
	}
}
