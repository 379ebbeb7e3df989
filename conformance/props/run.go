package props

import (
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// newRequestID returns "<kind>-<16 hex>" (64 random bits).
func newRequestID(kind string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return kind + "-" + hex.EncodeToString(b[:])
}

// RunOptions configure Run.
type RunOptions struct {
	// Name is the property's name: rapid's fail files go to
	// testdata/rapid/<Name>/ under the working directory, and every fail
	// file kept there is replayed before new checks.
	Name string
	// Checks is the number of checks (rapid -rapid.checks); 0 keeps rapid's 100.
	Checks int
	// Steps is the average number of actions per check (-rapid.steps); 0 keeps 30.
	Steps int
	// Seed is rapid's base seed; 0 draws one (printed either way).
	Seed uint64
	// FailFile replays this fail file only (-rapid.failfile).
	FailFile string
	// NoFailFile: write no fail file on failure (-rapid.nofailfile).
	NoFailFile bool
	// ShrinkTime bounds the shrinking of a failure (0 keeps rapid's 30 s).
	ShrinkTime time.Duration
	// NoShrink reports the first failing check as found, unshrunk: with a
	// fixed Seed the counterexample (its actions, its length) is then the
	// same on every run, however fast the machine is (rapid's shrinking is
	// bounded by wall time). It overrides ShrinkTime.
	NoShrink bool
	// Out receives rapid's log and the failure; Reproduce is appended to
	// the reproduce line (the command that re-runs the property).
	Out       io.Writer
	Reproduce string
}

// Report is what Run found.
type Report struct {
	// Passed: no check failed.
	Passed bool
	// Seed is the base seed the run used.
	Seed uint64
	// Output is rapid's log, including the shrunk failing sequence.
	Output string
	// FailFile is the fail file rapid wrote or replayed ("" when passed).
	FailFile string
	// Elapsed is the run's wall time, shrinking included.
	Elapsed time.Duration
	// Found is the wall time until the first check failed (the time to
	// kill a mutant), before rapid shrinks it; 0 when passed.
	Found time.Duration
	// Actions is the length of the shrunk failing sequence (the actions
	// that ran in rapid's final replay); 0 when passed.
	Actions int
	// ChecksPassed is the number of checks that passed before the failing
	// one (rapid's "failed after N tests"); with a fixed Seed it is the same
	// on every run of a deterministic target.
	ChecksPassed int
	// Flaky: the failing check did not fail the same way when rapid ran it
	// again (the target's timing decided it).
	Flaky bool
}

var runMu sync.Mutex

// Run runs prop under rapid outside `go test` (baton fuzz): it sets
// rapid's flags from opts (rapid reads them from the flag.CommandLine it
// registers on), runs the checks in a goroutine with a TB of its own, and
// returns what happened. Runs are serialized (rapid's flags are global).
func Run(prop func(*rapid.T), opts RunOptions) Report {
	runMu.Lock()
	defer runMu.Unlock()
	initTesting()
	if opts.Seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		for _, x := range b {
			opts.Seed = opts.Seed<<8 | uint64(x)
		}
		opts.Seed >>= 1 // rapid's flag parses it as a uint64; keep it printable as int too
	}
	var restore [][2]string
	set := func(name, v string) {
		restore = append(restore, [2]string{name, flag.Lookup(name).Value.String()})
		_ = flag.Set(name, v)
	}
	defer func() {
		for _, kv := range restore {
			_ = flag.Set(kv[0], kv[1])
		}
	}()
	set("rapid.seed", strconv.FormatUint(opts.Seed, 10))
	set("rapid.failfile", opts.FailFile)
	set("rapid.nofailfile", strconv.FormatBool(opts.NoFailFile))
	if opts.Checks > 0 {
		set("rapid.checks", strconv.Itoa(opts.Checks))
	}
	if opts.Steps > 0 {
		set("rapid.steps", strconv.Itoa(opts.Steps))
	}
	if opts.ShrinkTime > 0 {
		set("rapid.shrinktime", opts.ShrinkTime.String())
	}
	if opts.NoShrink {
		set("rapid.shrinktime", time.Nanosecond.String())
	}
	tb := &runTB{name: opts.Name, out: opts.Out}
	start := time.Now()
	var found time.Duration
	check := func(t *rapid.T) {
		defer func() {
			if t.Failed() && found == 0 {
				found = time.Since(start) // the first failing check, before any shrinking
			}
		}()
		prop(t)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		rapid.Check(tb, check)
	}()
	<-done
	rep := Report{Passed: !tb.Failed(), Seed: opts.Seed, Output: tb.log.String(), Elapsed: time.Since(start), Found: found}
	if i := strings.Index(rep.Output, "-rapid.failfile=\""); i >= 0 {
		rest := rep.Output[i+len("-rapid.failfile=\""):]
		if j := strings.IndexByte(rest, '"'); j >= 0 {
			rep.FailFile = rest[:j]
		}
	}
	if !rep.Passed {
		if i := strings.LastIndex(rep.Output, "Failed test output:"); i >= 0 {
			rep.Actions = strings.Count(rep.Output[i:], stepPrefix)
		}
		for _, prefix := range []string{"[rapid] failed after ", "[rapid] panic after "} {
			if i := strings.Index(rep.Output, prefix); i >= 0 {
				fmt.Sscanf(rep.Output[i+len(prefix):], "%d", &rep.ChecksPassed)
			}
		}
		rep.Flaky = strings.Contains(rep.Output, "[rapid] flaky test")
	}
	return rep
}

var initOnce sync.Once

// initTesting makes rapid usable in a plain binary: it calls testing.Short,
// which panics before testing.Init and a flag.Parse (ARCHITECTURE.md
// "Conformance for any implementation").
func initTesting() {
	initOnce.Do(func() {
		if flag.Lookup("test.short") == nil {
			testing.Init()
		}
		if !flag.Parsed() {
			_ = flag.CommandLine.Parse(nil) // testing.Short panics before a Parse
		}
	})
}

// runTB is the rapid.TB of Run: it records the log and the failure;
// FailNow and SkipNow end the goroutine Run started, as testing does.
type runTB struct {
	name    string
	out     io.Writer
	mu      sync.Mutex
	log     strings.Builder
	failed  bool
	skipped bool
}

func (r *runTB) Helper()      {}
func (r *runTB) Name() string { return r.name }
func (r *runTB) Logf(format string, args ...any) {
	r.write(fmt.Sprintf(format, args...))
}
func (r *runTB) Log(args ...any) { r.write(fmt.Sprintln(args...)) }
func (r *runTB) write(s string) {
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log.WriteString(s)
	if r.out != nil {
		io.WriteString(r.out, s)
	}
}
func (r *runTB) Skipf(format string, args ...any) { r.Logf(format, args...); r.SkipNow() }
func (r *runTB) Skip(args ...any)                 { r.Log(args...); r.SkipNow() }
func (r *runTB) SkipNow() {
	r.mu.Lock()
	r.skipped = true
	r.mu.Unlock()
	runtime.Goexit()
}
func (r *runTB) Errorf(format string, args ...any) { r.Logf(format, args...); r.Fail() }
func (r *runTB) Error(args ...any)                 { r.Log(args...); r.Fail() }
func (r *runTB) Fatalf(format string, args ...any) { r.Logf(format, args...); r.FailNow() }
func (r *runTB) Fatal(args ...any)                 { r.Log(args...); r.FailNow() }
func (r *runTB) FailNow()                          { r.Fail(); runtime.Goexit() }
func (r *runTB) Fail() {
	r.mu.Lock()
	r.failed = true
	r.mu.Unlock()
}
func (r *runTB) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}
