package xfer

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
)

// The cuda_ipc backend (CONTRACT S-3) moves device memory between two
// processes on one machine with CUDA IPC memory handles, the way the seeds'
// engines hand over encoder outputs: the producer keeps an entry's tensors
// in one device allocation and, when a consumer's TransferEncoderCache
// claims the entry, lends it: the response's tensor_layout is an IPCLoan
// (the allocation's IPC handle, its size, one segment per item). The
// consumer opens the handle (cuIpcOpenMemHandle), copies device-to-device
// into its own receive buffer, closes the mapping and gives the loan back
// with Abort(encoder_cache = the same reference), which answers
// ALREADY_FINISHED (the entry was consumed, SU-3) and frees the source.
//
// Unlike loopback and tcp the producer writes nothing into the consumer's
// memory, so the consumer's TransferEncoderCacheRequest.targets only
// describe what it will receive: one MemoryRegion per item with
// memory_kind "cuda", address 0, the item's length and the consumer's
// device ordinal, and consumer_agent is an IPCPeer.
//
// The quarantine rules hold as for tcp: an uncertain outcome of the call
// quarantines the consumer's receive buffer until the control
// connections that may have carried it have closed; a failed copy keeps the
// buffer and the mapping unless Synchronize proves the device idle;
// a failure of the producer after the claim quarantines the source.
// A lent allocation is freed only when its loan comes back, never by a
// timer (the consumer may still map it).

// BackendCUDAIPC is the wire name of the backend (EncoderCacheRef.backend).
const BackendCUDAIPC = "cuda_ipc"

// IPCHandleBytes is the size of a CUDA IPC memory handle (CU_IPC_HANDLE_SIZE).
const IPCHandleBytes = 64

// MaxIPCLoanBytes bounds an encoded IPCLoan or IPCPeer on input (4 KiB: a
// loan has one small segment per item, at most 64 items).
const MaxIPCLoanBytes = 4096

// MaxIPCSegments bounds IPCLoan.Segments (the reference's item limit).
const MaxIPCSegments = 64

// ipcLoanVersion is the "v" field of an encoded loan or peer.
const ipcLoanVersion = 1

// IPCSegment is one item's bytes inside the lent allocation.
type IPCSegment struct {
	// Offset from the allocation's start, in bytes.
	Offset uint64 `json:"off"`
	// Length in bytes, at least 1.
	Length uint64 `json:"len"`
}

// IPCLoan is what a cuda_ipc producer answers in
// TransferEncoderCacheResponse.tensor_layout: the IPC handle of one device
// allocation of Bytes bytes holding the entry's items, item i at
// Segments[i] (float32, row-major, as the tcp backend's bytes).
type IPCLoan struct {
	// Handle is the CUDA IPC handle of the lent allocation.
	Handle [IPCHandleBytes]byte
	// Bytes is the allocation's size in bytes; Open maps exactly this many.
	Bytes uint64
	// Segments holds one segment per item of the entry, in item order.
	Segments []IPCSegment
}

type wireIPCLoan struct {
	Version  *int         `json:"v"`
	Backend  *string      `json:"backend"`
	Handle   *string      `json:"handle"`
	Bytes    *uint64      `json:"bytes"`
	Segments []IPCSegment `json:"segments"`
}

// Marshal encodes the loan as JSON: {"v":1,"backend":"cuda_ipc","handle":
// 128 lowercase hex digits,"bytes":N,"segments":[{"off":..,"len":..},..]}.
func (l IPCLoan) Marshal() []byte {
	v, b, h, n := ipcLoanVersion, BackendCUDAIPC, hex.EncodeToString(l.Handle[:]), l.Bytes
	out, _ := json.Marshal(wireIPCLoan{Version: &v, Backend: &b, Handle: &h, Bytes: &n, Segments: l.Segments})
	return out
}

// ParseIPCLoan decodes a loan and checks it against the lengths the
// consumer expects, item by item. Errors wrap ErrInvalidParam: more than
// MaxIPCLoanBytes, not the JSON of Marshal (unknown or missing fields,
// trailing data), another version or backend, a handle that is not 128
// lowercase hex digits, a segment count other than len(want), a segment
// whose length differs from want[i], that is empty, or that does not lie
// inside [0, Bytes).
func ParseIPCLoan(b []byte, want []uint64) (IPCLoan, error) {
	var l IPCLoan
	var w wireIPCLoan
	if err := decodeStrict(b, &w, "IPC loan"); err != nil {
		return l, err
	}
	if w.Version == nil || w.Backend == nil || w.Handle == nil || w.Bytes == nil || w.Segments == nil {
		return l, fmt.Errorf("xfer: IPC loan lacks a field (v, backend, handle, bytes, segments): %w", ErrInvalidParam)
	}
	if *w.Version != ipcLoanVersion || *w.Backend != BackendCUDAIPC {
		return l, fmt.Errorf("xfer: IPC loan version %d backend %.20q, want %d %s: %w", *w.Version, *w.Backend, ipcLoanVersion, BackendCUDAIPC, ErrInvalidParam)
	}
	h, err := ParseIPCHandle(*w.Handle)
	if err != nil {
		return l, err
	}
	if len(w.Segments) != len(want) || len(w.Segments) > MaxIPCSegments {
		return l, fmt.Errorf("xfer: IPC loan has %d segments, want %d: %w", len(w.Segments), len(want), ErrInvalidParam)
	}
	for i, s := range w.Segments {
		if s.Length == 0 || s.Length != want[i] || s.Offset > *w.Bytes || s.Length > *w.Bytes-s.Offset {
			return l, fmt.Errorf("xfer: IPC loan segment %d [%d, +%d) of a %d-byte allocation, want %d bytes: %w", i, s.Offset, s.Length, *w.Bytes, want[i], ErrInvalidParam)
		}
	}
	if *w.Bytes > math.MaxInt32*16 {
		return l, fmt.Errorf("xfer: IPC loan of %d bytes: %w", *w.Bytes, ErrInvalidParam)
	}
	return IPCLoan{Handle: h, Bytes: *w.Bytes, Segments: w.Segments}, nil
}

// ParseIPCHandle parses 128 lowercase hex digits. Errors wrap ErrInvalidParam.
func ParseIPCHandle(s string) ([IPCHandleBytes]byte, error) {
	var h [IPCHandleBytes]byte
	if len(s) != 2*IPCHandleBytes {
		return h, fmt.Errorf("xfer: IPC handle of %d characters, want %d hex digits: %w", len(s), 2*IPCHandleBytes, ErrInvalidParam)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return h, fmt.Errorf("xfer: IPC handle character %d is not a lowercase hex digit: %w", i, ErrInvalidParam)
		}
	}
	_, _ = hex.Decode(h[:], []byte(s))
	return h, nil
}

// IPCPeer is a cuda_ipc consumer's TransferEncoderCacheRequest.consumer_agent:
// its agent name (the engine's instance id) and CUDA device ordinal.
type IPCPeer struct {
	// Name is the consumer's agent name (the engine's instance id).
	Name string
	// Device is the consumer's CUDA device ordinal.
	Device uint32
}

type wireIPCPeer struct {
	Version *int    `json:"v"`
	Backend *string `json:"backend"`
	Name    *string `json:"name"`
	Device  *uint32 `json:"device"`
}

// Marshal encodes the peer as {"v":1,"backend":"cuda_ipc","name":..,"device":N}.
func (p IPCPeer) Marshal() []byte {
	v, b := ipcLoanVersion, BackendCUDAIPC
	out, _ := json.Marshal(wireIPCPeer{Version: &v, Backend: &b, Name: &p.Name, Device: &p.Device})
	return out
}

// ParseIPCPeer decodes consumer_agent for cuda_ipc. Errors wrap
// ErrInvalidParam: oversize, not the JSON of Marshal, another version or
// backend, a name that is empty or longer than 128 bytes.
func ParseIPCPeer(b []byte) (IPCPeer, error) {
	var w wireIPCPeer
	if err := decodeStrict(b, &w, "cuda_ipc consumer agent"); err != nil {
		return IPCPeer{}, err
	}
	if w.Version == nil || w.Backend == nil || w.Name == nil || w.Device == nil {
		return IPCPeer{}, fmt.Errorf("xfer: cuda_ipc consumer agent lacks a field (v, backend, name, device): %w", ErrInvalidParam)
	}
	if *w.Version != ipcLoanVersion || *w.Backend != BackendCUDAIPC {
		return IPCPeer{}, fmt.Errorf("xfer: consumer agent version %d backend %.20q, want %d %s: %w", *w.Version, *w.Backend, ipcLoanVersion, BackendCUDAIPC, ErrInvalidParam)
	}
	if *w.Name == "" || len(*w.Name) > 128 {
		return IPCPeer{}, fmt.Errorf("xfer: consumer agent name of %d bytes, want 1..128: %w", len(*w.Name), ErrInvalidParam)
	}
	return IPCPeer{Name: *w.Name, Device: *w.Device}, nil
}

// decodeStrict decodes one JSON object of at most MaxIPCLoanBytes into v,
// refusing unknown fields and trailing data.
func decodeStrict(b []byte, v any, what string) error {
	if len(b) == 0 || len(b) > MaxIPCLoanBytes {
		return fmt.Errorf("xfer: %s of %d bytes, want 1..%d: %w", what, len(b), MaxIPCLoanBytes, ErrInvalidParam)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("xfer: %s: %v: %w", what, err, ErrInvalidParam)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("xfer: %s has trailing data: %w", what, ErrInvalidParam)
	}
	return nil
}

// DeviceBuffer is one device allocation, or one mapping of another
// process's allocation (IPCDevice.Open).
type DeviceBuffer interface {
	// Bytes is its size in bytes.
	Bytes() int
}

// IPCDevice is the device side of the cuda_ipc backend: the CUDA driver
// calls the engine needs, behind an interface so the engine's quarantine
// and shutdown logic runs in tests without a GPU (a fake device) and on
// the GPU (OpenCUDADevice). Copies are synchronous: they return once the
// bytes are in place, or with the error of the copy.
type IPCDevice interface {
	// Ordinal is the CUDA device ordinal.
	Ordinal() int
	// Alloc allocates bytes of device memory (bytes >= 1).
	Alloc(bytes int) (DeviceBuffer, error)
	// Upload copies src into dst at offset.
	Upload(dst DeviceBuffer, offset int, src []byte) error
	// Download copies len(dst) bytes of src at offset into dst.
	Download(dst []byte, src DeviceBuffer, offset int) error
	// Copy copies n bytes device-to-device.
	Copy(dst DeviceBuffer, dstOffset int, src DeviceBuffer, srcOffset, n int) error
	// Export returns the IPC handle of an allocation from Alloc.
	Export(b DeviceBuffer) ([IPCHandleBytes]byte, error)
	// Open maps the allocation another process exported as h, of bytes bytes.
	Open(h [IPCHandleBytes]byte, bytes int) (DeviceBuffer, error)
	// Free frees an allocation, or closes a mapping from Open.
	Free(b DeviceBuffer) error
	// Synchronize waits until every operation this process started on
	// the device has ended (cuCtxSynchronize): after it returns nil,
	// nothing writes any buffer of this process any more, so a buffer a
	// failed copy targeted may be freed (CONTRACT Q-6). An error means
	// the device cannot say so (a sticky fault): keep the buffers.
	Synchronize() error
	// Close waits for the device and releases the context; buffers must be
	// freed first.
	Close() error
}
