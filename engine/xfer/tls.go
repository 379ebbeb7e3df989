package xfer

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"time"
)

// TLSNetwork is a Network whose connections are TLS (CONTRACT SE-1): the
// listener serves TLS with Server, and Dial opens TLS with Client. With
// Server.ClientAuth = tls.RequireAndVerifyClientCert a peer without a valid
// certificate fails the handshake, which the agent runs before it reads a
// frame header, so no frame of such a peer is ever parsed. The handshake of
// an inbound connection runs on its first read, under the agent's idle
// timeout; an outbound one under the dial deadline.
type TLSNetwork struct {
	// Inner is the transport below TLS; nil means TCPNetwork.
	Inner Network
	// Server is the listener's configuration (certificate, client CAs,
	// client authentication); nil refuses Listen.
	Server *tls.Config
	// Client is the dialer's configuration (root CAs, client certificate);
	// nil refuses Dial. Its ServerName, when empty, is the dialled host.
	Client *tls.Config
}

// errNoTLSConfig is returned by Listen or Dial of a TLSNetwork without the
// configuration for that side.
var errNoTLSConfig = errors.New("xfer: TLSNetwork without a configuration for this side")

func (n TLSNetwork) inner() Network {
	if n.Inner == nil {
		return TCPNetwork{}
	}
	return n.Inner
}

// Listen opens the inner listener and serves TLS on it.
func (n TLSNetwork) Listen(address string) (net.Listener, error) {
	if n.Server == nil {
		return nil, errNoTLSConfig
	}
	ln, err := n.inner().Listen(address)
	if err != nil {
		return nil, err
	}
	return tls.NewListener(ln, n.Server), nil
}

// Dial connects through the inner network and completes the TLS handshake
// before it returns (by deadline, or when ctx ends).
func (n TLSNetwork) Dial(ctx context.Context, address string, deadline time.Time) (net.Conn, error) {
	if n.Client == nil {
		return nil, errNoTLSConfig
	}
	raw, err := n.inner().Dial(ctx, address, deadline)
	if err != nil {
		return nil, err
	}
	cfg := n.Client.Clone()
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			raw.Close()
			return nil, err
		}
		cfg.ServerName = host
	}
	conn := tls.Client(raw, cfg)
	hctx := ctx
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		hctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	if err := conn.HandshakeContext(hctx); err != nil {
		raw.Close()
		return nil, err
	}
	return conn, nil
}
