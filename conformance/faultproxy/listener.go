package faultproxy

import (
	"fmt"
	"net"
	"sync"
)

// trackingListener remembers every accepted connection by its remote address
// so that FaultCutConnection can close the caller's connection from inside a
// handler (gRPC gives handlers no way to reset their own transport), and
// can stop listening for a while (refuse) without the gRPC server noticing:
// while it refuses, the port is unbound and every connection attempt is
// refused by the kernel.
type trackingListener struct {
	addr     net.Addr
	accepted chan net.Conn
	done     chan struct{}
	doneOnce sync.Once

	mu    sync.Mutex
	raw   net.Listener // nil while refusing
	conns map[string]net.Conn
}

func newTrackingListener(l net.Listener) *trackingListener {
	t := &trackingListener{addr: l.Addr(), accepted: make(chan net.Conn), done: make(chan struct{}), conns: map[string]net.Conn{}, raw: l}
	go t.feed(l)
	return t
}

// feed accepts from one raw listener until it is closed.
func (l *trackingListener) feed(raw net.Listener) {
	for {
		c, err := raw.Accept()
		if err != nil {
			return
		}
		tc := &trackedConn{Conn: c, l: l, key: c.RemoteAddr().String()}
		l.mu.Lock()
		l.conns[tc.key] = tc
		l.mu.Unlock()
		select {
		case l.accepted <- tc:
		case <-l.done:
			tc.Close()
			return
		}
	}
}

// Accept returns the next connection; it fails only after Close.
func (l *trackingListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.accepted:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Addr is the address the listener serves on, refusing or not.
func (l *trackingListener) Addr() net.Addr { return l.addr }

// Close stops listening for good.
func (l *trackingListener) Close() error {
	l.doneOnce.Do(func() { close(l.done) })
	l.mu.Lock()
	raw := l.raw
	l.raw = nil
	l.mu.Unlock()
	if raw != nil {
		return raw.Close()
	}
	return nil
}

// cut closes the connection whose remote address is key; it reports whether
// one was found.
func (l *trackingListener) cut(key string) bool {
	l.mu.Lock()
	c, ok := l.conns[key]
	l.mu.Unlock()
	if ok {
		c.Close()
	}
	return ok
}

// cutAll closes every caller connection.
func (l *trackingListener) cutAll() {
	l.mu.Lock()
	conns := make([]net.Conn, 0, len(l.conns))
	for _, c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// refuse unbinds the port (connections are refused) and closes every
// caller connection; listen binds it again.
func (l *trackingListener) refuse() {
	l.mu.Lock()
	raw := l.raw
	l.raw = nil
	l.mu.Unlock()
	if raw != nil {
		raw.Close()
	}
	l.cutAll()
}

// listen binds the port again after refuse; a no-op while listening.
func (l *trackingListener) listen() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.done:
		return net.ErrClosed
	default:
	}
	if l.raw != nil {
		return nil
	}
	raw, err := net.Listen("tcp", l.addr.String())
	if err != nil {
		return fmt.Errorf("faultproxy: listen again on %s: %w", l.addr, err)
	}
	l.raw = raw
	go l.feed(raw)
	return nil
}

type trackedConn struct {
	net.Conn
	l    *trackingListener
	key  string
	once sync.Once
}

// Close closes the connection once and forgets it.
func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		if c.l.conns[c.key] == net.Conn(c) {
			delete(c.l.conns, c.key)
		}
		c.l.mu.Unlock()
	})
	return err
}
