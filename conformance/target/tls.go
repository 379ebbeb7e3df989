package target

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"

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
	KeyFile  string `yaml:"key_file" json:"key_file,omitempty"`
	// ServerName overrides the name checked against the target's certificate
	// ("" = the endpoint's host).
	ServerName string `yaml:"server_name" json:"server_name,omitempty"`
	// InsecureSkipVerify accepts any server certificate (testing only; it
	// cannot be combined with CAFile).
	InsecureSkipVerify bool `yaml:"insecure_skip_verify" json:"insecure_skip_verify,omitempty"`
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
