package xfer

import (
	"slices"
	"testing"
	"time"
)

func TestExp2(t *testing.T) {
	size := 8 << 20
	mk := func(name string) (Agent, Agent, *Request) {
		cons, _ := NewTCP(TCPOptions{Options: Options{Name: "consumer"}})
		prod, _ := NewTCP(TCPOptions{Options: Options{Name: "producer"}})
		md, _ := cons.LocalMetadata()
		peer, _ := prod.LoadRemoteMetadata(md)
		dst, src := make([]byte, size), randomBytes(1, size)
		creg, _ := cons.RegisterMemory([][]byte{dst})
		preg, _ := prod.RegisterMemory([][]byte{src})
		req, _ := prod.CreateWrite(preg.Descriptors, peer, creg.Descriptors)
		return cons, prod, req
	}
	_, prod, req := mk("a")
	raw := rawPair(t, size, false, false)
	type v struct {
		name   string
		nt, ni bool
	}
	vs := []v{{"xfer", false, false}, {"xfer-nt", true, false}, {"xfer-nt-ni", true, true}, {"raw", false, false}}
	res := map[string][]time.Duration{}
	for i := 0; i < 150; i++ {
		for _, x := range vs {
			if x.name == "raw" {
				res[x.name] = append(res[x.name], raw())
				continue
			}
			expNoTargetDeadline, expNoInitDeadline = x.nt, x.ni
			t0 := time.Now()
			prod.Post(req)
			<-req.Done()
			res[x.name] = append(res[x.name], time.Since(t0))
		}
	}
	for _, x := range vs {
		xs := res[x.name]
		slices.Sort(xs)
		var sum time.Duration
		for _, d := range xs {
			sum += d
		}
		t.Logf("%-12s p10 %v p50 %v mean %v", x.name, xs[15], xs[75], sum/time.Duration(len(xs)))
	}
}
