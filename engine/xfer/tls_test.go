package xfer

import (
	"bytes"
	"crypto/tls"
	"testing"

	"github.com/baton-dev/baton/internal/devcert"
)

// TestTCPOverTLS: two tcp agents on a TLSNetwork with client
// authentication WRITE and READ as over plain TCP; a writer whose
// certificate the target's CA did not sign fails (uncertain, as any broken
// connection after the dial) and lands no byte (CONTRACT SE-1).
func TestTCPOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := devcert.NewCA(dir, "xfer")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue("agent")
	if err != nil {
		t.Fatal(err)
	}
	other, err := devcert.NewCA(t.TempDir(), "other")
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := other.Issue("stranger")
	if err != nil {
		t.Fatal(err)
	}
	server := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{leaf.Pair}, ClientCAs: ca.Pool, ClientAuth: tls.RequireAndVerifyClientCert}
	client := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{leaf.Pair}, RootCAs: ca.Pool}
	net := TLSNetwork{Server: server, Client: client}

	cons, _, dst, reg, _ := tcpConsumer(t, TCPOptions{Network: net}, 4096)
	md, err := cons.LocalMetadata()
	if err != nil {
		t.Fatal(err)
	}
	newProducer := func(name string, n Network) (Agent, []Descriptor, []byte) {
		p, err := NewTCP(TCPOptions{Options: Options{Name: name}, Network: n})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		src := randomBytes(testSeed(t), 4096)
		return p, register(t, p, src).Descriptors, src
	}
	prod, local, src := newProducer("producer", net)
	peer, err := prod.LoadRemoteMetadata(md)
	if err != nil {
		t.Fatal(err)
	}
	if err := write(t, prod, local, peer, reg.Descriptors); err != nil {
		t.Fatalf("WRITE over TLS = %v", err)
	}
	if !bytes.Equal(dst, src) {
		t.Fatal("WRITE over TLS landed other bytes")
	}

	copy(dst, filled(len(dst), canary))
	badClient := client.Clone()
	badClient.Certificates = []tls.Certificate{stranger.Pair}
	bad, badLocal, _ := newProducer("stranger", TLSNetwork{Server: server, Client: badClient})
	bpeer, err := bad.LoadRemoteMetadata(md)
	if err != nil {
		t.Fatal(err)
	}
	if err := write(t, bad, badLocal, bpeer, reg.Descriptors); err == nil {
		t.Fatal("a WRITE with a certificate of another CA succeeded; want it refused")
	}
	if !allCanary(dst) {
		t.Error("a refused peer's WRITE landed bytes")
	}
	if err := cons.Deregister(reg); err != nil {
		t.Errorf("Deregister after the refused WRITE = %v", err)
	}
}
