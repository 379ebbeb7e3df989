// Package progress shows how far a long run has got: `baton check` (cases),
// `baton sim` (seeds), `baton fuzz` (runs). On a terminal it redraws one line,
//
//	[=========>          ] 12/29 cases  8.1s  SU-4 malformed reference is rejected
//
// and without one (CI logs) it prints plain lines, at most one per Interval:
//
//	progress: 12/29 cases done, 0 failed, 8.1s
//
// The caller reports each unit of work; the package never reads results
// itself:
//
//	p := progress.New(os.Stderr, progress.Options{Unit: "cases"})
//	p.Start(len(cases))
//	for _, c := range cases {
//		p.Begin(c.Name)             // optional: show what is running
//		p.Done(c.Name, run(c))      // outcome: "passed", "failed", "error", ...
//	}
//	p.Finish()
//
// A nil *Reporter does nothing, so callers can pass nil for "no progress".
// Methods are safe for concurrent use.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// Mode selects how progress is shown.
type Mode int

// Modes.
const (
	// Auto picks Bar when the writer is a terminal and Lines otherwise.
	Auto Mode = iota
	// Bar redraws a single line with a bar (terminals).
	Bar
	// Lines prints a plain line at most once per Interval (CI logs).
	Lines
	// Off shows nothing.
	Off
)

// String returns the mode's flag value ("auto", "bar", "lines", "off").
func (m Mode) String() string {
	switch m {
	case Bar:
		return "bar"
	case Lines:
		return "lines"
	case Off:
		return "off"
	default:
		return "auto"
	}
}

// ParseMode reads a --progress flag value: auto, bar, lines or off.
// Errors: an unknown value, naming the ones it wants.
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return Auto, nil
	case "bar":
		return Bar, nil
	case "lines":
		return Lines, nil
	case "off", "none":
		return Off, nil
	}
	return Auto, fmt.Errorf("progress: mode %q (want auto, bar, lines or off)", s)
}

// Outcomes Done counts specially; any other string counts as done only.
const (
	// OutcomeFailed is counted in the "failed" figure.
	OutcomeFailed = "failed"
	// OutcomeError is counted in the "errors" figure (shown when non-zero).
	OutcomeError = "error"
)

// Defaults of Options.
const (
	// DefaultInterval is the least time between two lines in Lines mode.
	DefaultInterval = 5 * time.Second
	// DefaultBarRefresh is how often Bar mode redraws by itself (elapsed time).
	DefaultBarRefresh = time.Second
	// DefaultWidth is the bar line's width in columns when the terminal's is unknown.
	DefaultWidth = 80
	// barCells is the number of cells between the bar's brackets.
	barCells = 20
)

// Options configure a Reporter. The zero value is usable.
type Options struct {
	// Mode: Auto (default), Bar, Lines or Off.
	Mode Mode
	// Unit names what is counted ("cases" by default; "seeds", "runs").
	Unit string
	// Interval is the least time between two lines in Lines mode (default 5s).
	Interval time.Duration
	// Refresh is how often the reporter wakes by itself between Start and
	// Finish: Bar mode redraws (the elapsed time moves), Lines mode prints a
	// line if none was printed for Interval, so a long case still shows life
	// in a CI log. 0 picks DefaultBarRefresh or Interval; negative turns it
	// off (tests drive the clock themselves).
	Refresh time.Duration
	// Width is the bar line's width in columns (0 = the terminal's, else 80).
	Width int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Reporter shows the progress of one run. Create it with New.
type Reporter struct {
	w    io.Writer
	mode Mode
	opts Options

	mu       sync.Mutex
	started  time.Time
	total    int // 0 = unknown
	done     int
	failed   int
	errors   int
	current  string // what runs now (Begin) or finished last (Done)
	running  bool
	lastLine time.Time // Lines: when the last line was printed
	lastDone int       // Lines: done at the last line (-1 = none printed)
	drawn    bool      // Bar: a line is on screen
	stop     chan struct{}
	stopped  chan struct{}
}

// New returns a Reporter writing to w. With Mode Auto it draws a bar when w
// is a terminal (IsTerminal) and prints plain lines otherwise.
func New(w io.Writer, opts Options) *Reporter {
	if w == nil {
		w = io.Discard
	}
	if opts.Unit == "" {
		opts.Unit = "cases"
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	mode := opts.Mode
	if mode == Auto {
		mode = Lines
		if IsTerminal(w) {
			mode = Bar
		}
	}
	if opts.Refresh == 0 {
		opts.Refresh = opts.Interval
		if mode == Bar {
			opts.Refresh = DefaultBarRefresh
		}
	}
	if opts.Width <= 0 {
		opts.Width = DefaultWidth
		if f, ok := w.(*os.File); ok && mode == Bar {
			if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 20 {
				opts.Width = cols
			}
		}
	}
	return &Reporter{w: w, mode: mode, opts: opts, lastDone: -1}
}

// IsTerminal reports whether w is a terminal (an *os.File on a TTY).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Mode is the resolved mode: Bar, Lines or Off (never Auto).
func (r *Reporter) Mode() Mode {
	if r == nil {
		return Off
	}
	return r.mode
}

// Start begins a run of total units (0 = unknown) and starts the clock.
// Lines mode prints `progress: 29 cases to run`.
func (r *Reporter) Start(total int) {
	if r == nil || r.mode == Off {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = r.opts.Now()
	r.total, r.done, r.failed, r.errors = max(total, 0), 0, 0, 0
	r.current, r.running = "", false
	switch r.mode {
	case Lines:
		if r.total > 0 {
			fmt.Fprintf(r.w, "progress: %d %s to run\n", r.total, r.opts.Unit)
		} else {
			fmt.Fprintf(r.w, "progress: started\n")
		}
		r.lastLine, r.lastDone = r.started, 0
	case Bar:
		r.draw()
	}
	if r.opts.Refresh > 0 && r.stop == nil {
		r.stop, r.stopped = make(chan struct{}), make(chan struct{})
		go r.refresh(r.stop, r.stopped)
	}
}

// Begin notes that the unit name started (shown on the bar, and in a
// heartbeat line while it runs). Optional.
func (r *Reporter) Begin(name string) {
	if r == nil || r.mode == Off {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.current, r.running = name, true
	if r.mode == Bar {
		r.draw()
	}
}

// Done counts one finished unit with its outcome ("passed", "failed",
// "error", "not applicable", "not verifiable", or the caller's own words;
// OutcomeFailed and OutcomeError are counted). Lines mode prints a line if
// Interval has passed since the last one.
func (r *Reporter) Done(name, outcome string) {
	if r == nil || r.mode == Off {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done++
	switch outcome {
	case OutcomeFailed:
		r.failed++
	case OutcomeError:
		r.errors++
	}
	r.current, r.running = name, false
	switch r.mode {
	case Bar:
		r.draw()
	case Lines:
		if now := r.opts.Now(); now.Sub(r.lastLine) >= r.opts.Interval {
			r.line(now)
		}
	}
}

// Finish ends the run: the bar is drawn complete and the line ended; Lines
// mode prints the final count unless the last line already showed it. It
// stops the refresh goroutine. Calling it twice is harmless.
func (r *Reporter) Finish() {
	if r == nil || r.mode == Off {
		return
	}
	r.mu.Lock()
	stop, stopped := r.stop, r.stopped
	r.stop, r.stopped = nil, nil
	r.mu.Unlock()
	if stop != nil {
		close(stop)
		<-stopped
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running = false
	switch r.mode {
	case Bar:
		if r.drawn {
			r.current = ""
			r.draw()
			fmt.Fprint(r.w, "\n")
			r.drawn = false
		}
	case Lines:
		if r.lastDone != r.done {
			r.line(r.opts.Now())
		}
	}
}

// refresh wakes every Refresh until stop closes.
func (r *Reporter) refresh(stop <-chan struct{}, stopped chan<- struct{}) {
	defer close(stopped)
	t := time.NewTicker(r.opts.Refresh)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			r.tick()
		}
	}
}

// tick is one wake-up of the refresh goroutine.
func (r *Reporter) tick() {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch r.mode {
	case Bar:
		r.draw()
	case Lines:
		if now := r.opts.Now(); now.Sub(r.lastLine) >= r.opts.Interval {
			r.line(now)
		}
	}
}

// line prints one Lines-mode line. Call with mu held.
func (r *Reporter) line(now time.Time) {
	var b strings.Builder
	b.WriteString("progress: ")
	if r.total > 0 {
		fmt.Fprintf(&b, "%d/%d %s done", r.done, r.total, r.opts.Unit)
	} else {
		fmt.Fprintf(&b, "%d %s done", r.done, r.opts.Unit)
	}
	fmt.Fprintf(&b, ", %d failed", r.failed)
	if r.errors > 0 {
		fmt.Fprintf(&b, ", %d errors", r.errors)
	}
	fmt.Fprintf(&b, ", %s", elapsed(now.Sub(r.started)))
	if r.running && r.current != "" {
		fmt.Fprintf(&b, " (running %s)", truncate(r.current, 60))
	}
	b.WriteString("\n")
	io.WriteString(r.w, b.String())
	r.lastLine, r.lastDone = now, r.done
}

// draw redraws the bar line in place. Call with mu held.
func (r *Reporter) draw() {
	var b strings.Builder
	if r.total > 0 {
		filled := barCells * min(r.done, r.total) / r.total
		b.WriteByte('[')
		switch {
		case filled >= barCells:
			b.WriteString(strings.Repeat("=", barCells))
		default:
			b.WriteString(strings.Repeat("=", filled))
			b.WriteByte('>')
			b.WriteString(strings.Repeat(" ", barCells-filled-1))
		}
		fmt.Fprintf(&b, "] %d/%d %s", r.done, r.total, r.opts.Unit)
	} else {
		fmt.Fprintf(&b, "%d %s", r.done, r.opts.Unit)
	}
	if r.failed > 0 {
		fmt.Fprintf(&b, "  %d failed", r.failed)
	}
	if r.errors > 0 {
		fmt.Fprintf(&b, "  %d errors", r.errors)
	}
	fmt.Fprintf(&b, "  %s", elapsed(r.opts.Now().Sub(r.started)))
	if r.current != "" {
		b.WriteString("  ")
		b.WriteString(r.current)
	}
	// One column short of the width, so the terminal never wraps the line.
	text := truncate(b.String(), r.opts.Width-1)
	io.WriteString(r.w, "\r"+text+"\x1b[K")
	r.drawn = true
}

// elapsed formats a duration to a tenth of a second: "8.1s", "2m3.4s".
func elapsed(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return d.Round(100 * time.Millisecond).String()
}

// truncate cuts s to at most n runes, ending in "..." when it cut.
func truncate(s string, n int) string {
	rs := []rune(s)
	if len(rs) <= n {
		return s
	}
	if n <= 3 {
		return string(rs[:max(n, 0)])
	}
	return string(rs[:n-3]) + "..."
}
