package suite

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/baton-dev/baton/conformance/target"
)

// Recorded is what one case reported when run by Record: its failure and
// skip messages in order, and its outcome (OutcomeOf).
type Recorded struct {
	// Outcome is the case's outcome.
	Outcome Outcome
	// Failed and Skipped are the flags OutcomeOf reads.
	Failed, Skipped bool
	// Messages are the failure messages, or the skip message.
	Messages []string
	// Logs are the case's Logf lines.
	Logs []string
}

// Record runs c against tg through Case.Execute with a TB that records
// instead of failing a test, in a goroutine of its own (Fatalf and Skipf
// end it with runtime.Goexit, as *testing.T does), and returns what the
// case reported once it ended: for a harness that judges outcomes itself
// (a kill table, a test of the cases). ctx bounds the case.
func Record(ctx context.Context, c Case, tg target.Target) Recorded {
	r := &recordingTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Execute(ctx, r, tg)
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	return Recorded{Outcome: OutcomeOf(r.failed, r.skipped, r.msgs...), Failed: r.failed, Skipped: r.skipped,
		Messages: append([]string(nil), r.msgs...), Logs: append([]string(nil), r.logs...)}
}

// recordingTB is Record's TB.
type recordingTB struct {
	mu              sync.Mutex
	failed, skipped bool
	msgs, logs      []string
}

// Helper does nothing: recorded messages carry no file positions.
func (r *recordingTB) Helper() {}

// Logf appends a formatted line to Recorded.Logs.
func (r *recordingTB) Logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

// Errorf marks the case failed and appends the formatted message to
// Recorded.Messages; the case goes on.
func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

// Fatalf is Errorf, then ends the case's goroutine (runtime.Goexit).
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

// Skipf marks the case skipped, appends the formatted reason to
// Recorded.Messages and ends the case's goroutine (runtime.Goexit).
func (r *recordingTB) Skipf(format string, args ...any) {
	r.mu.Lock()
	r.skipped = true
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
	r.mu.Unlock()
	runtime.Goexit()
}

// Failed reports whether Errorf or Fatalf was called.
func (r *recordingTB) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}
