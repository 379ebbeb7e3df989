package cuda

import (
	"encoding/hex"
	"fmt"
)

// IPCHandleBytes is the size of a CUDA IPC memory handle
// (CU_IPC_HANDLE_SIZE).
const IPCHandleBytes = 64

// IPCHandle is a CUipcMemHandle: an opaque 64-byte name for a device
// allocation that another process on the same machine can open. It is
// passed to cuIpcOpenMemHandle by value.
type IPCHandle struct {
	// Reserved is the handle's bytes, as CUipcMemHandle names its field.
	Reserved [IPCHandleBytes]byte
}

// String is the handle as 128 lowercase hex digits (the form baton puts in
// references).
func (h IPCHandle) String() string { return hex.EncodeToString(h.Reserved[:]) }

// ParseIPCHandle parses the 128-hex-digit form of String. Errors wrap
// ErrInvalidArgument (wrong length, non-hex characters, upper-case digits).
func ParseIPCHandle(s string) (IPCHandle, error) {
	var h IPCHandle
	if len(s) != 2*IPCHandleBytes {
		return h, fmt.Errorf("%w: IPC handle: %d characters, want %d hex digits", ErrInvalidArgument, len(s), 2*IPCHandleBytes)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return h, fmt.Errorf("%w: IPC handle: character %d (%q) is not a lowercase hex digit", ErrInvalidArgument, i, c)
		}
	}
	if _, err := hex.Decode(h.Reserved[:], []byte(s)); err != nil {
		return h, fmt.Errorf("%w: IPC handle: %v", ErrInvalidArgument, err)
	}
	return h, nil
}

// ExportIPC returns the IPC handle of b (cuIpcGetMemHandle). b must be a
// whole allocation from Alloc (not an imported buffer); it must stay
// allocated while importers use it. Errors: ErrInvalidArgument (an imported
// buffer), ErrClosed, *Error.
func (c *Context) ExportIPC(b *Buffer) (IPCHandle, error) {
	var h IPCHandle
	p, err := b.span("ExportIPC", 0, 0)
	if err != nil {
		return h, err
	}
	if b.imported {
		return h, fmt.Errorf("%w: ExportIPC: buffer was itself imported", ErrInvalidArgument)
	}
	err = c.Do(func() error { return drv.check("cuIpcGetMemHandle", drv.cuIpcGetMemHandle(&h, p)) })
	return h, err
}

// ipcLazyEnablePeerAccess is CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS.
const ipcLazyEnablePeerAccess = 1

// OpenIPC maps the allocation named by h, exported by another process, into
// this context (cuIpcOpenMemHandle_v2, lazy peer access) as a Buffer of
// bytes bytes (the exporter's size, which the handle does not carry). Free
// on the result closes the mapping (cuIpcCloseMemHandle); the exporter's
// memory is untouched. A handle from this same process fails
// (CUDA_ERROR_INVALID_CONTEXT or similar: CUDA forbids it). Errors:
// ErrInvalidArgument (bytes <= 0), ErrClosed, *Error.
func (c *Context) OpenIPC(h IPCHandle, bytes int) (*Buffer, error) {
	if bytes <= 0 {
		return nil, fmt.Errorf("%w: OpenIPC: size %d must be positive", ErrInvalidArgument, bytes)
	}
	var p uint64
	err := c.Do(func() error {
		return drv.check("cuIpcOpenMemHandle_v2", drv.cuIpcOpenMemHandle(&p, h, ipcLazyEnablePeerAccess))
	})
	if err != nil {
		return nil, err
	}
	return &Buffer{ctx: c, ptr: DevicePtr(p), bytes: bytes, imported: true}, nil
}
