package xfer

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestIPCLoanRoundTrip(t *testing.T) {
	var h [IPCHandleBytes]byte
	for i := range h {
		h[i] = byte(i * 7)
	}
	l := IPCLoan{Handle: h, Bytes: 300, Segments: []IPCSegment{{0, 100}, {100, 200}}}
	got, err := ParseIPCLoan(l.Marshal(), []uint64{100, 200})
	if err != nil {
		t.Fatal(err)
	}
	if got.Handle != h || got.Bytes != 300 || len(got.Segments) != 2 || got.Segments[1] != (IPCSegment{100, 200}) {
		t.Errorf("round trip = %+v, want %+v", got, l)
	}
	p := IPCPeer{Name: "consumer-1", Device: 3}
	gp, err := ParseIPCPeer(p.Marshal())
	if err != nil || gp != p {
		t.Errorf("peer round trip = %+v, %v; want %+v", gp, err, p)
	}
}

// TestParseIPCLoanMalformed: every malformed loan is ErrInvalidParam, never
// a panic or a loan that reaches outside its allocation.
func TestParseIPCLoanMalformed(t *testing.T) {
	hex := strings.Repeat("ab", IPCHandleBytes)
	good := `{"v":1,"backend":"cuda_ipc","handle":"` + hex + `","bytes":300,"segments":[{"off":0,"len":100},{"off":100,"len":200}]}`
	if _, err := ParseIPCLoan([]byte(good), []uint64{100, 200}); err != nil {
		t.Fatalf("the good loan: %v", err)
	}
	bad := map[string]string{
		"empty":              ``,
		"not json":           `\x00\x01`,
		"array":              `[]`,
		"trailing data":      good + `{}`,
		"unknown field":      strings.Replace(good, `"v":1`, `"v":1,"x":2`, 1),
		"missing handle":     strings.Replace(good, `"handle":"`+hex+`",`, ``, 1),
		"missing segments":   strings.Replace(good, `,"segments":[{"off":0,"len":100},{"off":100,"len":200}]`, ``, 1),
		"version 2":          strings.Replace(good, `"v":1`, `"v":2`, 1),
		"backend tcp":        strings.Replace(good, `"cuda_ipc"`, `"tcp"`, 1),
		"short handle":       strings.Replace(good, hex, hex[:126], 1),
		"upper-case handle":  strings.Replace(good, hex, strings.ToUpper(hex), 1),
		"non-hex handle":     strings.Replace(good, hex, "zz"+hex[2:], 1),
		"one segment":        strings.Replace(good, `,{"off":100,"len":200}`, ``, 1),
		"wrong length":       strings.Replace(good, `"len":200`, `"len":199`, 1),
		"past the end":       strings.Replace(good, `"off":100,`, `"off":101,`, 1),
		"offset overflow":    strings.Replace(good, `"off":100,`, `"off":18446744073709551615,`, 1),
		"negative offset":    strings.Replace(good, `"off":100,`, `"off":-1,`, 1),
		"string length":      strings.Replace(good, `"len":200`, `"len":"200"`, 1),
		"huge":               `{"v":1,"pad":"` + strings.Repeat("x", MaxIPCLoanBytes) + `"}`,
		"handle is a number": strings.Replace(good, `"`+hex+`"`, `7`, 1),
	}
	for name, in := range bad {
		if _, err := ParseIPCLoan([]byte(in), []uint64{100, 200}); !errors.Is(err, ErrInvalidParam) {
			t.Errorf("%s: ParseIPCLoan = %v, want ErrInvalidParam", name, err)
		}
	}
}

func TestParseIPCPeerMalformed(t *testing.T) {
	good := `{"v":1,"backend":"cuda_ipc","name":"c","device":0}`
	if _, err := ParseIPCPeer([]byte(good)); err != nil {
		t.Fatalf("the good peer: %v", err)
	}
	for name, in := range map[string]string{
		"empty":           ``,
		"tcp metadata":    `{"v":1,"backend":"tcp","name":"c","device":0}`,
		"no device":       `{"v":1,"backend":"cuda_ipc","name":"c"}`,
		"empty name":      `{"v":1,"backend":"cuda_ipc","name":"","device":0}`,
		"long name":       `{"v":1,"backend":"cuda_ipc","name":"` + strings.Repeat("n", 129) + `","device":0}`,
		"negative device": `{"v":1,"backend":"cuda_ipc","name":"c","device":-1}`,
		"extra field":     `{"v":1,"backend":"cuda_ipc","name":"c","device":0,"key":"x"}`,
		"binary":          string(bytes.Repeat([]byte{0xff}, 10)),
	} {
		if _, err := ParseIPCPeer([]byte(in)); !errors.Is(err, ErrInvalidParam) {
			t.Errorf("%s: ParseIPCPeer = %v, want ErrInvalidParam", name, err)
		}
	}
}

// TestFakeIPC checks the fake's CUDA-like rules the engine tests rely on.
func TestFakeIPC(t *testing.T) {
	f := NewFakeIPC()
	a, b := f.Device(0), f.Device(1)
	src, _ := a.Alloc(8)
	_ = a.Upload(src, 0, []byte("abcdefgh"))
	h, err := a.Export(src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Open(h, 8); err == nil {
		t.Error("opening a handle in the process that exported it succeeded (CUDA forbids it)")
	}
	if _, err := b.Open(h, 7); err == nil {
		t.Error("opening with the wrong size succeeded")
	}
	m, err := b.Open(h, 8)
	if err != nil {
		t.Fatal(err)
	}
	dst, _ := b.Alloc(8)
	f.SetFaults(true, false, false)
	if err := b.Copy(dst, 0, m, 0, 8); !errors.Is(err, ErrBackend) {
		t.Errorf("injected copy failure = %v, want ErrBackend", err)
	}
	if err := b.Copy(dst, 0, m, 0, 8); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 8)
	_ = b.Download(out, dst, 0)
	if string(out) != "abcdefgh" {
		t.Errorf("copied %q, want abcdefgh", out)
	}
	if err := b.Copy(dst, 4, m, 0, 8); !errors.Is(err, ErrInvalidParam) {
		t.Errorf("a copy past the end = %v, want ErrInvalidParam", err)
	}
	_ = b.Free(m)
	_ = a.Free(src)
	if _, err := b.Open(h, 8); !errors.Is(err, ErrNotFound) {
		t.Errorf("opening a freed allocation's handle = %v, want ErrNotFound", err)
	}
	if opened, live, _ := f.Counts(); opened != 0 || live != 1 {
		t.Errorf("counts open %d live %d, want 0 and 1 (dst)", opened, live)
	}
}
