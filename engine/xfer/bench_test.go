package xfer

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// BenchmarkTCPWriteVsRaw measures the tcp backend's bandwidth for one write
// of 8 MiB and of 64 MiB (dial, header, acceptance, body, acknowledgement:
// Post until Done) next to a plain net.Conn copy of the same size over one
// already-open loopback connection, timed until the reader has every byte.
// Both run in the same iterations, alternating which goes first. Metrics:
// xfer-MB/s, raw-MB/s (10^6 bytes per second) and xfer/raw (issue 4 target:
// >= 0.70).
func BenchmarkTCPWriteVsRaw(b *testing.B) {
	for _, size := range []int{8 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			cons, err := NewTCP(TCPOptions{Options: Options{Name: "consumer"}})
			if err != nil {
				b.Fatal(err)
			}
			defer cons.Close()
			prod, err := NewTCP(TCPOptions{Options: Options{Name: "producer"}})
			if err != nil {
				b.Fatal(err)
			}
			defer prod.Close()
			md, _ := cons.LocalMetadata()
			peer, _ := prod.LoadRemoteMetadata(md)
			dst, src := make([]byte, size), randomBytes(1, size)
			creg, _ := cons.RegisterMemory([][]byte{dst})
			preg, _ := prod.RegisterMemory([][]byte{src})
			req, err := prod.CreateWrite(preg.Descriptors, peer, creg.Descriptors)
			if err != nil {
				b.Fatal(err)
			}
			defer prod.Release(req)

			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			rawDone := make(chan error)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					rawDone <- err
					return
				}
				defer c.Close()
				rdst := make([]byte, size)
				for {
					_, err := io.ReadFull(c, rdst)
					rawDone <- err
					if err != nil {
						return
					}
				}
			}()
			raw, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer raw.Close()

			runXfer := func() time.Duration {
				t0 := time.Now()
				if _, err := prod.Post(req); err != nil {
					b.Fatal(err)
				}
				<-req.Done()
				d := time.Since(t0)
				if st, err := prod.Status(req); st != StatusDone || err != nil {
					b.Fatalf("Status = %v, %v", st, err)
				}
				return d
			}
			runRaw := func() time.Duration {
				t0 := time.Now()
				if _, err := raw.Write(src); err != nil {
					b.Fatal(err)
				}
				if err := <-rawDone; err != nil {
					b.Fatal(err)
				}
				return time.Since(t0)
			}
			var xferD, rawD time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i%2 == 0 {
					xferD += runXfer()
					rawD += runRaw()
				} else {
					rawD += runRaw()
					xferD += runXfer()
				}
			}
			b.StopTimer()
			mbps := func(d time.Duration) float64 { return float64(size) * float64(b.N) / d.Seconds() / 1e6 }
			b.ReportMetric(mbps(xferD), "xfer-MB/s")
			b.ReportMetric(mbps(rawD), "raw-MB/s")
			b.ReportMetric(mbps(xferD)/mbps(rawD), "xfer/raw")
		})
	}
}
