package cuda

import (
	"fmt"
	"os"
	"testing"
)

// initializedAtStart records Initialized() before any test ran: importing
// the package must not initialize CUDA.
var initializedAtStart bool

func TestMain(m *testing.M) {
	initializedAtStart = Initialized()
	if mode := os.Getenv(ipcChildEnv); mode != "" {
		// Helper process of TestIPCAcrossProcesses / TestBenchCopyAndIPC.
		if err := ipcChild(mode); err != nil {
			fmt.Fprintln(os.Stderr, "ipc child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// openOrSkip opens device 0, or skips the test when the machine has no
// NVIDIA driver or no GPU (CI), saying which.
func openOrSkip(t testing.TB) *Context {
	t.Helper()
	c, err := Open(0)
	if NoGPU(err) {
		t.Skipf("no GPU here, skipping: %v", err)
	}
	if err != nil {
		t.Fatalf("Open(0): %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func streamOrFail(t testing.TB, c *Context) *Stream {
	t.Helper()
	s, err := c.NewStream()
	if err != nil {
		t.Fatalf("NewStream: %v", err)
	}
	t.Cleanup(func() { _ = s.Destroy() })
	return s
}

func allocOrFail(t testing.TB, c *Context, bytes int) *Buffer {
	t.Helper()
	b, err := c.Alloc(bytes)
	if err != nil {
		t.Fatalf("Alloc(%d): %v", bytes, err)
	}
	t.Cleanup(func() { _ = b.Free() })
	return b
}
