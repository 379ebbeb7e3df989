package xfer

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
)

// Fuzz targets of the transfer agent's untrusted parsers: peers' metadata
// (TransferEncoderCacheRequest.consumer_agent, KV session attributes), the
// tcp frame header every inbound connection starts with, and the cuda_ipc
// loan, peer and handle. The seeds (here and under testdata/fuzz/) run with
// `go test`; `make fuzz` fuzzes each for FUZZTIME.

// FuzzDecodeMetadata: decodeMetadata never panics, refuses with
// ErrInvalidParam (CheckMetadata with the same error), and what it accepts re-encodes to the same bytes; an
// accepted tcp address is canonical and bounded (CanonicalAddress).
func FuzzDecodeMetadata(f *testing.F) {
	f.Add(encodeMetadata(BackendTCP, "consumer", "127.0.0.1:7400"))
	f.Add(encodeMetadata(BackendLoopback, "p", "reg-1"))
	f.Add([]byte("BXMD\x01\x02\x00"))
	f.Add([]byte("BXMD\x01\x09\x01a\x00\x01b"))
	f.Add(encodeMetadata(BackendTCP, "c", "127.0.0.1:07400"))
	f.Add(encodeMetadata(BackendTCP, "c", "[::1]:7400"))
	f.Fuzz(func(t *testing.T, md []byte) {
		p, err := decodeMetadata(md)
		if cerr := CheckMetadata(md); (cerr == nil) != (err == nil) || (err != nil && cerr.Error() != err.Error()) {
			t.Fatalf("CheckMetadata(%q) = %v; decodeMetadata's error %v", md, cerr, err)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidParam) {
				t.Fatalf("error %v does not wrap ErrInvalidParam", err)
			}
			return
		}
		if again := encodeMetadata(p.backend, p.name, p.conn); !bytes.Equal(again, md) {
			t.Fatalf("accepted %q re-encodes to %q", md, again)
		}
		if addr, err := MetadataAddress(md); err != nil || addr != p.conn {
			t.Fatalf("MetadataAddress = %q, %v; want %q", addr, err, p.conn)
		}
		if p.backend == BackendTCP && (CanonicalAddress(p.conn) != nil || len(p.conn) > maxAddressBytes) {
			t.Fatalf("accepted tcp address %q is not canonical", p.conn)
		}
	})
}

// FuzzReadHeader: readHeader never panics on any byte stream an inbound
// connection may send; a refusal is errMalformedFrame, a cut-off stream
// io.ErrUnexpectedEOF (io.EOF only before the first byte); an accepted
// header is within the bounds it promises and re-encodes to the bytes it
// read.
func FuzzReadHeader(f *testing.F) {
	seg := Descriptor{Address: 4096, Length: 100, MemoryKind: MemoryHost, RemoteKey: []byte("key-0123")}
	f.Add(encodeHeader("producer", "consumer", []Descriptor{seg}))
	f.Add(encodeFrame(readMagic, "d", "p", []Descriptor{seg, seg}))
	f.Add([]byte("BXW1\x01a\x01b\x00\x00"))
	f.Add([]byte("BXW1\x01a\x01b\x04\x01\x40"))
	f.Add([]byte("BXR1"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bufio.NewReader(bytes.NewReader(b))
		from, target, segs, read, err := readHeader(r)
		if err != nil {
			if !errors.Is(err, errMalformedFrame) && !errors.Is(err, io.ErrUnexpectedEOF) && !(errors.Is(err, io.EOF) && len(b) == 0) {
				t.Fatalf("readHeader(%q) = %v; want errMalformedFrame or io.ErrUnexpectedEOF", b, err)
			}
			return
		}
		if from == "" || target == "" || len(segs) == 0 || len(segs) > MaxSegments {
			t.Fatalf("accepted a header with from %q, target %q, %d segments", from, target, len(segs))
		}
		var total uint64
		for _, s := range segs {
			if s.Length == 0 || len(s.RemoteKey) == 0 || len(s.RemoteKey) > maxRemoteKeyBytes || s.Length > 1<<63-total {
				t.Fatalf("accepted segment %+v", s)
			}
			total += s.Length
		}
		magic := frameMagic
		if read {
			magic = readMagic
		}
		enc := encodeFrame(magic, from, target, segs)
		if !bytes.HasPrefix(b, enc) {
			t.Fatalf("accepted header re-encodes to %q, not a prefix of the input %q", enc, b)
		}
	})
}

// FuzzParseIPC: the cuda_ipc loan, consumer peer and handle parsers never
// panic, refuse with ErrInvalidParam, and what they accept re-marshals to
// something they accept alike.
func FuzzParseIPC(f *testing.F) {
	var h [IPCHandleBytes]byte
	h[0], h[63] = 0xab, 0xcd
	loan := IPCLoan{Handle: h, Bytes: 4096, Segments: []IPCSegment{{Offset: 0, Length: 1024}, {Offset: 1024, Length: 3072}}}
	f.Add(loan.Marshal(), uint64(1024), uint64(3072))
	f.Add(IPCPeer{Name: "consumer", Device: 0}.Marshal(), uint64(0), uint64(0))
	f.Add([]byte(`{"v":1,"backend":"cuda_ipc","handle":"00","bytes":1,"segments":[]}`), uint64(1), uint64(1))
	f.Add([]byte(`{"v":1,"backend":"cuda_ipc","name":"x","device":4294967295} {}`), uint64(0), uint64(0))
	f.Fuzz(func(t *testing.T, b []byte, w0, w1 uint64) {
		for _, want := range [][]uint64{nil, {w0}, {w0, w1}} {
			l, err := ParseIPCLoan(b, want)
			if err != nil {
				if !errors.Is(err, ErrInvalidParam) {
					t.Fatalf("ParseIPCLoan error %v does not wrap ErrInvalidParam", err)
				}
				continue
			}
			if again, err := ParseIPCLoan(l.Marshal(), want); err != nil || again.Bytes != l.Bytes || again.Handle != l.Handle {
				t.Fatalf("accepted loan %+v does not round-trip: %+v, %v", l, again, err)
			}
		}
		p, err := ParseIPCPeer(b)
		if err != nil {
			if !errors.Is(err, ErrInvalidParam) {
				t.Fatalf("ParseIPCPeer error %v does not wrap ErrInvalidParam", err)
			}
		} else if again, err := ParseIPCPeer(p.Marshal()); err != nil || again != p {
			t.Fatalf("accepted peer %+v does not round-trip: %+v, %v", p, again, err)
		}
		if h, err := ParseIPCHandle(string(b)); err == nil && string(b) != hexString(h[:]) {
			t.Fatalf("ParseIPCHandle(%q) accepted a handle that prints as %s", b, hexString(h[:]))
		} else if err != nil && !errors.Is(err, ErrInvalidParam) {
			t.Fatalf("ParseIPCHandle error %v does not wrap ErrInvalidParam", err)
		}
	})
}

func hexString(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}
