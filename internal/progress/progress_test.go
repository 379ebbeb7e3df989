package progress

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a manual clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// syncBuffer is a bytes.Buffer safe for concurrent writes; notify, when
// set, receives each write.
type syncBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	notify chan string
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.notify != nil {
		select {
		case b.notify <- string(p):
		default:
		}
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestLinesModeIsThrottled(t *testing.T) {
	clk := newClock()
	out := &syncBuffer{}
	p := New(out, Options{Mode: Lines, Interval: 5 * time.Second, Refresh: -1, Now: clk.Now})
	p.Start(29)
	steps := []struct {
		advance time.Duration
		outcome string
	}{
		{1 * time.Second, "passed"},         // 1.0s: too soon, no line
		{4500 * time.Millisecond, "passed"}, // 5.5s: line
		{500 * time.Millisecond, "failed"},  // 6.0s: too soon
		{1 * time.Second, "error"},          // 7.0s: too soon
	}
	for i, s := range steps {
		clk.Advance(s.advance)
		p.Done("case "+string(rune('A'+i)), s.outcome)
	}
	clk.Advance(1100 * time.Millisecond)
	p.Finish()
	want := "progress: 29 cases to run\n" +
		"progress: 2/29 cases done, 0 failed, 5.5s\n" +
		"progress: 4/29 cases done, 1 failed, 1 errors, 8.1s\n"
	if got := out.String(); got != want {
		t.Errorf("lines:\n%s\nwant:\n%s", got, want)
	}
	if strings.Contains(out.String(), "\r") || strings.Contains(out.String(), "\x1b") {
		t.Errorf("Lines mode wrote terminal control characters: %q", out.String())
	}
}

func TestLinesModeFinishDoesNotRepeatTheLastLine(t *testing.T) {
	clk := newClock()
	out := &syncBuffer{}
	p := New(out, Options{Mode: Lines, Interval: time.Second, Refresh: -1, Now: clk.Now, Unit: "seeds"})
	p.Start(0)
	clk.Advance(2 * time.Second)
	p.Done("seed 1", "passed")
	p.Finish()
	p.Finish()
	want := "progress: started\nprogress: 1 seeds done, 0 failed, 2s\n"
	if got := out.String(); got != want {
		t.Errorf("lines:\n%q\nwant:\n%q", got, want)
	}
}

func TestBarModeRedrawsOneLine(t *testing.T) {
	clk := newClock()
	out := &syncBuffer{}
	p := New(out, Options{Mode: Bar, Refresh: -1, Width: 80, Now: clk.Now})
	p.Start(30)
	for i := 0; i < 15; i++ {
		clk.Advance(100 * time.Millisecond)
		p.Done("case", "passed")
	}
	clk.Advance(600 * time.Millisecond)
	p.Begin("SU-4 malformed reference is rejected")
	frames := strings.Split(out.String(), "\r")
	last := strings.TrimSuffix(frames[len(frames)-1], "\x1b[K")
	want := "[==========>         ] 15/30 cases  2.1s  SU-4 malformed reference is rejected"
	if last != want {
		t.Errorf("bar frame:\n%q\nwant:\n%q", last, want)
	}
	if strings.Contains(out.String(), "\n") {
		t.Errorf("bar printed a newline before Finish: %q", out.String())
	}
	for i := 0; i < 15; i++ {
		p.Done("case", "failed")
	}
	p.Finish()
	s := out.String()
	if !strings.HasSuffix(s, "\n") || strings.Count(s, "\n") != 1 {
		t.Errorf("Finish should end the bar line with exactly one newline: %q", s)
	}
	frames = strings.Split(strings.TrimSuffix(s, "\n"), "\r")
	final := strings.TrimSuffix(frames[len(frames)-1], "\x1b[K")
	if !strings.HasPrefix(final, "[====================] 30/30 cases  15 failed") {
		t.Errorf("final frame %q; want a full bar with 15 failed", final)
	}
}

func TestBarModeFitsTheWidth(t *testing.T) {
	clk := newClock()
	out := &syncBuffer{}
	p := New(out, Options{Mode: Bar, Refresh: -1, Width: 40, Now: clk.Now})
	p.Start(0)
	p.Begin(strings.Repeat("very long case name ", 10))
	frames := strings.Split(out.String(), "\r")
	last := strings.TrimSuffix(frames[len(frames)-1], "\x1b[K")
	if n := len([]rune(last)); n != 39 || !strings.HasSuffix(last, "...") || !strings.HasPrefix(last, "0 cases  0s  very long") {
		t.Errorf("frame %q (%d runes); want 39 runes ending in ... for width 40", last, n)
	}
}

func TestAutoModeUsesLinesWithoutATerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, w := range []any{&syncBuffer{}, f} {
		var p *Reporter
		switch w := w.(type) {
		case *syncBuffer:
			p = New(w, Options{})
		case *os.File:
			if IsTerminal(w) {
				t.Fatalf("IsTerminal(regular file) = true")
			}
			p = New(w, Options{})
		}
		if p.Mode() != Lines {
			t.Errorf("Auto mode on %T = %v; want lines", w, p.Mode())
		}
	}
}

func TestOffAndNilPrintNothing(t *testing.T) {
	out := &syncBuffer{}
	p := New(out, Options{Mode: Off})
	var nilp *Reporter
	for _, r := range []*Reporter{p, nilp} {
		r.Start(3)
		r.Begin("a")
		r.Done("a", "failed")
		r.Finish()
	}
	if out.String() != "" || nilp.Mode() != Off {
		t.Errorf("Off/nil reporter wrote %q (mode %v)", out.String(), nilp.Mode())
	}
}

// TestLinesModeHeartbeat: with nothing finishing, the refresh goroutine still
// prints a line naming the running case, so CI sees life.
func TestLinesModeHeartbeat(t *testing.T) {
	out := &syncBuffer{notify: make(chan string, 16)}
	p := New(out, Options{Mode: Lines, Interval: time.Millisecond, Refresh: time.Millisecond})
	p.Start(2)
	p.Begin("S-2 drain releases unconsumed outputs")
	deadline := time.After(10 * time.Second)
	for {
		select {
		case s := <-out.notify:
			if strings.Contains(s, "0/2 cases done, 0 failed") && strings.Contains(s, "(running S-2 drain releases unconsumed outputs)") {
				p.Finish()
				return
			}
		case <-deadline:
			p.Finish()
			t.Fatalf("no heartbeat line within 10s; output:\n%s", out.String())
		}
	}
}

func TestConcurrentDoneCountsEveryUnit(t *testing.T) {
	clk := newClock()
	out := &syncBuffer{}
	p := New(out, Options{Mode: Lines, Interval: time.Hour, Refresh: -1, Now: clk.Now})
	p.Start(100)
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			outcome := "passed"
			if i%10 == 0 {
				outcome = "failed"
			}
			p.Done("case", outcome)
		}(i)
	}
	wg.Wait()
	p.Finish()
	if !strings.HasSuffix(out.String(), "progress: 100/100 cases done, 10 failed, 0s\n") {
		t.Errorf("final line wrong:\n%s", out.String())
	}
}

func TestParseMode(t *testing.T) {
	tests := []struct {
		in      string
		want    Mode
		wantErr bool
	}{
		{"", Auto, false}, {"auto", Auto, false}, {"BAR", Bar, false}, {"lines", Lines, false},
		{"off", Off, false}, {"none", Off, false}, {"fancy", Auto, true}, {"1", Auto, true},
	}
	for _, tt := range tests {
		got, err := ParseMode(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ParseMode(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err == nil && tt.in != "" && tt.in != "none" && !strings.EqualFold(got.String(), tt.in) {
			t.Errorf("Mode(%q).String() = %q", tt.in, got.String())
		}
	}
}
