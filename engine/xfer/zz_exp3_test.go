package xfer

import (
	"testing"
)

func TestExp3(t *testing.T) {
	size := 8 << 20
	cons, _ := NewTCP(TCPOptions{Options: Options{Name: "consumer"}})
	prod, _ := NewTCP(TCPOptions{Options: Options{Name: "producer"}})
	md, _ := cons.LocalMetadata()
	peer, _ := prod.LoadRemoteMetadata(md)
	dst, src := make([]byte, size), randomBytes(1, size)
	creg, _ := cons.RegisterMemory([][]byte{dst})
	preg, _ := prod.RegisterMemory([][]byte{src})
	req, _ := prod.CreateWrite(preg.Descriptors, peer, creg.Descriptors)
	for i := 0; i < 400; i++ {
		prod.Post(req)
		<-req.Done()
	}
}
