package faultproxy

import (
	"net"
	"sync"
)

// trackingListener remembers every accepted connection by its remote address
// so that FaultCutConnection can close the caller's connection from inside a
// handler (gRPC gives handlers no way to reset their own transport).
type trackingListener struct {
	net.Listener
	mu    sync.Mutex
	conns map[string]net.Conn
}

func newTrackingListener(l net.Listener) *trackingListener {
	return &trackingListener{Listener: l, conns: map[string]net.Conn{}}
}

// Accept wraps the next connection so that closing it forgets it.
func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l, key: c.RemoteAddr().String()}
	l.mu.Lock()
	l.conns[tc.key] = tc
	l.mu.Unlock()
	return tc, nil
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
