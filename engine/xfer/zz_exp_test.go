package xfer

import (
	"io"
	"net"
	"slices"
	"testing"
	"time"
)

func rawPair(t *testing.T, size int, deadlines, rtt bool) func() time.Duration {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	done := make(chan error)
	go func() {
		c, _ := ln.Accept()
		rdst := make([]byte, size)
		var b [64]byte
		for {
			if rtt {
				io.ReadFull(c, b[:40])
				c.Write(b[:1])
			}
			var err error
			if deadlines {
				for off := 0; off < size; off += 1 << 20 {
					c.SetReadDeadline(time.Now().Add(10 * time.Second))
					_, err = io.ReadFull(c, rdst[off:min(off+1<<20, size)])
				}
			} else {
				_, err = io.ReadFull(c, rdst)
			}
			if rtt {
				c.Write(b[:1])
			}
			done <- err
		}
	}()
	raw, _ := net.Dial("tcp", ln.Addr().String())
	src := randomBytes(2, size)
	return func() time.Duration {
		t0 := time.Now()
		var b [64]byte
		if rtt {
			raw.Write(b[:40])
			io.ReadFull(raw, b[:1])
		}
		raw.Write(src)
		if rtt {
			io.ReadFull(raw, b[:1])
		}
		<-done
		return time.Since(t0)
	}
}

func TestExp(t *testing.T) {
	size := 8 << 20
	cons, _ := NewTCP(TCPOptions{Options: Options{Name: "consumer"}})
	defer cons.Close()
	prod, _ := NewTCP(TCPOptions{Options: Options{Name: "producer"}})
	defer prod.Close()
	md, _ := cons.LocalMetadata()
	peer, _ := prod.LoadRemoteMetadata(md)
	dst, src := make([]byte, size), randomBytes(1, size)
	creg, _ := cons.RegisterMemory([][]byte{dst})
	preg, _ := prod.RegisterMemory([][]byte{src})
	req, _ := prod.CreateWrite(preg.Descriptors, peer, creg.Descriptors)
	variants := map[string]func() time.Duration{
		"raw":          rawPair(t, size, false, false),
		"raw+deadline": rawPair(t, size, true, false),
		"raw+rtt":      rawPair(t, size, false, true),
		"xfer": func() time.Duration {
			t0 := time.Now()
			prod.Post(req)
			<-req.Done()
			return time.Since(t0)
		},
	}
	names := []string{"raw", "raw+deadline", "raw+rtt", "xfer"}
	res := map[string][]time.Duration{}
	for i := 0; i < 150; i++ {
		for _, n := range names {
			res[n] = append(res[n], variants[n]())
		}
	}
	for _, n := range names {
		xs := res[n]
		slices.Sort(xs)
		var sum time.Duration
		for _, x := range xs {
			sum += x
		}
		t.Logf("%-14s p10 %v p50 %v mean %v", n, xs[15], xs[75], sum/time.Duration(len(xs)))
	}
}
