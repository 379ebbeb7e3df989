// Package devcert generates short-lived certificates at run time for
// tests and `baton demo` (CONTRACT SE-1, SE-2): a throw-away CA and leaf
// certificates it signs, written as PEM files into a directory. No key is
// ever committed; every run makes new ones. Not for production use.
package devcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Lifetime is how long generated certificates are valid (from an hour
// before their creation, to tolerate clock skew).
const Lifetime = 24 * time.Hour

// CA is a generated certificate authority.
type CA struct {
	// CertFile is its certificate (PEM), the file peers trust.
	CertFile string
	// Pool holds its certificate.
	Pool *x509.CertPool
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// Leaf is a generated certificate and its key.
type Leaf struct {
	// CertFile and KeyFile are the PEM files.
	CertFile, KeyFile string
	// Pair is the loaded key pair.
	Pair tls.Certificate
}

// NewCA generates a CA named name and writes its certificate to
// dir/<name>-ca.pem. Errors: key generation or file writes.
func NewCA(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name + " test CA", Organization: []string{"baton devcert"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(Lifetime),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, name+"-ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{CertFile: path, Pool: pool, dir: dir, cert: cert, key: key}, nil
}

// Issue generates a leaf certificate with common name cn for both server
// and client authentication, valid for 127.0.0.1, ::1, localhost and the
// given extra host names or IPs, and writes dir/<cn>.pem and
// dir/<cn>-key.pem (0600).
func (ca *CA) Issue(cn string, hosts ...string) (Leaf, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Leaf{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: cn, Organization: []string{"baton devcert"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(Lifetime),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return Leaf{}, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Leaf{}, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
	l := Leaf{CertFile: filepath.Join(ca.dir, cn+".pem"), KeyFile: filepath.Join(ca.dir, cn+"-key.pem")}
	if err := os.WriteFile(l.CertFile, certPEM, 0o644); err != nil {
		return Leaf{}, err
	}
	if err := os.WriteFile(l.KeyFile, keyPEM, 0o600); err != nil {
		return Leaf{}, err
	}
	if l.Pair, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return Leaf{}, err
	}
	return l, nil
}

// Token writes a random bearer token (32 hex digits, 128 bits) to
// dir/<name>.token (0600) and returns the path and the token.
func Token(dir, name string) (path, token string, err error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", err
	}
	token = hex.EncodeToString(b[:])
	path = filepath.Join(dir, name+".token")
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", "", fmt.Errorf("devcert: %w", err)
	}
	return path, token, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return n
}

// SelfSigned generates, in memory, a self-signed certificate for cn with
// client and server key usage: a certificate no target's CA signed (SE-1's
// "a peer without a valid certificate").
func SelfSigned(cn string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(Lifetime),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
