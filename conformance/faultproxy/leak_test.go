package faultproxy

import (
	"context"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestCloseEndsCallsAndLeavesNoGoroutines: Close ends held calls (their
// callers see UNAVAILABLE), is idempotent, and once the test's own client
// and upstream are closed the goroutine count returns to where it started.
func TestCloseEndsCallsAndLeavesNoGoroutines(t *testing.T) {
	base := runtime.NumGoroutine()
	t.Run("session", func(t *testing.T) {
		_, up := startUpstream(t)
		p, err := New(up, Options{Plan: Plan{Rules: map[string]Rule{
			methodBlock: {Sequence: []Step{{Fault: FaultDropRequest}}},
			methodUnary: {Sequence: []Step{{}, {Fault: FaultDropReply}, {Fault: FaultDelay, Delay: time.Hour}}},
		}}})
		if err != nil {
			t.Fatal(err)
		}
		cc := dial(t, p.Addr())
		ctx := context.Background() // no deadline: only Close ends the held calls
		if _, err := callUnary(ctx, cc, methodUnary, "plain"); err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 3)
		for _, c := range []struct{ method, payload string }{{methodBlock, "x"}, {methodUnary, "dropped"}, {methodUnary, "delayed"}} {
			go func() {
				_, err := callUnary(ctx, cc, c.method, c.payload)
				errc <- err
			}()
		}
		waitRecorded(t, p, methodBlock, 1)
		waitRecorded(t, p, methodUnary, 3)
		p.Close()
		p.Close()
		for range 3 {
			if err := <-errc; status.Code(err) != codes.Unavailable {
				t.Errorf("held call after Close: %v, want UNAVAILABLE", err)
			}
		}
		for _, m := range []string{methodBlock, methodUnary} {
			for _, r := range p.Calls(m) {
				if !r.Done {
					t.Errorf("record not done after Close: %+v", r)
				}
			}
		}
	})
	deadline := time.Now().Add(testWait)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after Close, %d before:\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}
