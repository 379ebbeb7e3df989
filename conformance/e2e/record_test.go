package e2e

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/baton-dev/baton/conformance/suite"
	"github.com/baton-dev/baton/conformance/target"
)

// recordingTB is a suite.TB that records instead of failing the Go test, so
// the kill table can expect a case to fail against a mutant.
type recordingTB struct {
	mu       sync.Mutex
	failed   bool
	skipped  bool
	messages []string
}

func (r *recordingTB) Helper()             {}
func (r *recordingTB) Logf(string, ...any) {}
func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	r.messages = append(r.messages, fmt.Sprintf(format, args...))
}
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}
func (r *recordingTB) Skipf(format string, args ...any) {
	r.mu.Lock()
	r.skipped = true
	r.messages = append(r.messages, fmt.Sprintf(format, args...))
	r.mu.Unlock()
	runtime.Goexit()
}
func (r *recordingTB) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// runRecorded runs one case in its own goroutine (Fatalf and Skipf end it
// with runtime.Goexit) and returns what it recorded.
func runRecorded(c suite.Case, tg target.Target, timeout time.Duration) *recordingTB {
	rec := &recordingTB{}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Execute(ctx, rec, tg)
	}()
	<-done
	return rec
}

func (r *recordingTB) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.messages, "; ")
}
