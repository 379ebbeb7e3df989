package props

import (
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
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
	// testdata/rapid/<Name>/ under StateDir (else the working directory),
	// and every fail file kept there is replayed before new checks.
	Name string
	// StateDir, when set, is where fail files are kept and replayed from
	// (created if missing): `baton fuzz --state-dir`, one per target, so a
	// fail file is never replayed against another target. rapid names fail
	// files relative to the working directory, so Run changes into StateDir
	// while it runs (runs are serialized, and nothing else in the process
	// may depend on the working directory meanwhile); Report.FailFile is
	// absolute.
	StateDir string
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
	// Out receives rapid's log and the failure.
	Out io.Writer
	// Reproduce, when set, replaces rapid's reproduce line ("To reproduce,
	// specify -run=... -rapid.failfile=..."), which names go test flags, with
	// "To reproduce: " and the command it returns for the fail file (absolute;
	// "" when none was written) and seed (0 when unknown).
	Reproduce func(failFile string, seed uint64) string
	// Progress, when set, is told the number of checks, each check that
	// passed before the first failure, "shrinking the failure" while rapid
	// shrinks, and the end (internal/progress).
	Progress Progress
}

// Progress is what Run reports its progress to (internal/progress's
// Reporter implements it).
type Progress interface {
	Start(total int)
	Begin(name string)
	Done(name, outcome string)
	Finish()
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
	// FailSeed is rapid's seed of the failing check: `--checks 1 --seed
	// FailSeed` runs it again (0 when rapid named none).
	FailSeed uint64
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
	stateDir := ""
	if opts.StateDir != "" {
		stateDir = absStateDir(opts.StateDir)
		if opts.FailFile != "" {
			opts.FailFile = absStateDir(opts.FailFile) // named from the caller's working directory
		}
	}
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
	if stateDir != "" {
		back, err := enterStateDir(stateDir)
		if err != nil {
			return Report{Seed: opts.Seed, Output: err.Error() + "\n"}
		}
		defer back()
	}
	tb := &runTB{name: opts.Name, out: opts.Out, reproduce: opts.Reproduce}
	start := time.Now()
	var found time.Duration
	checks := 0
	prog := opts.Progress
	if prog != nil {
		prog.Start(opts.Checks)
		defer prog.Finish()
	}
	check := func(t *rapid.T) {
		defer func() {
			switch {
			case t.Failed() && found == 0:
				found = time.Since(start) // the first failing check, before any shrinking
				if prog != nil {
					prog.Done(fmt.Sprintf("check %d", checks+1), "failed")
					prog.Begin("shrinking the failure")
				}
			case found == 0 && prog != nil:
				checks++
				prog.Done(fmt.Sprintf("check %d", checks), "passed")
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
	f, failSeed := tb.failFile()
	rep.FailSeed = failSeed
	if f != "" {
		rep.FailFile = f
		if stateDir != "" && !filepath.IsAbs(f) {
			rep.FailFile = filepath.Join(stateDir, f)
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

// enterStateDir changes into dir (created if missing) and returns the
// change back.
func enterStateDir(dir string) (func(), error) {
	prev, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("props: working directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("props: state directory: %w", err)
	}
	if err := os.Chdir(dir); err != nil {
		return nil, fmt.Errorf("props: state directory: %w", err)
	}
	return func() { _ = os.Chdir(prev) }, nil
}

// absStateDir is dir made absolute against the working directory Run
// returned to.
func absStateDir(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return dir
	}
	return abs
}

// rapidReproduceRE matches rapid's reproduce line; its groups are the fail
// file and the seed when rapid names them.
var rapidReproduceRE = regexp.MustCompile(`To (?:try to )?reproduce, specify -run="[^"]*"(?: -rapid\.failfile="([^"]*)")?(?: \(or)?(?: -rapid\.seed=(\d+))?\)?`)

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
	name      string
	out       io.Writer
	reproduce func(failFile string, seed uint64) string
	mu        sync.Mutex
	log       strings.Builder
	failed    bool
	skipped   bool
	failPath  string // the fail file rapid named, as it named it
	seed      uint64
}

// failFile is the fail file and seed of rapid's reproduce line, if it
// printed one.
func (r *runTB) failFile() (string, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failPath, r.seed
}

// Helper does nothing: the log carries no file positions.
func (r *runTB) Helper() {}

// Name is the property's name (RunOptions.Name).
func (r *runTB) Name() string { return r.name }

// Logf formats a line into the log (Report.Output) and RunOptions.Out; with
// RunOptions.Reproduce set, rapid's reproduce line is replaced by the command
// it returns for the fail file.
func (r *runTB) Logf(format string, args ...any) {
	r.write(fmt.Sprintf(format, args...))
}

// Log is Logf with fmt.Sprintln formatting.
func (r *runTB) Log(args ...any) { r.write(fmt.Sprintln(args...)) }
func (r *runTB) write(s string) {
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if m := rapidReproduceRE.FindStringSubmatchIndex(s); m != nil {
		sub := rapidReproduceRE.FindStringSubmatch(s)
		if sub[1] != "" {
			r.failPath = sub[1]
		}
		if sub[2] != "" {
			r.seed, _ = strconv.ParseUint(sub[2], 10, 64)
		}
		if r.reproduce != nil {
			path := r.failPath
			if path != "" && !filepath.IsAbs(path) {
				path = absStateDir(path) // the working directory is the state directory now
			}
			s = s[:m[0]] + "To reproduce: " + r.reproduce(path, r.seed) + s[m[1]:]
		}
	}
	r.log.WriteString(s)
	if r.out != nil {
		io.WriteString(r.out, s)
	}
}

// Skipf logs the line and ends the check as skipped (SkipNow).
func (r *runTB) Skipf(format string, args ...any) { r.Logf(format, args...); r.SkipNow() }

// Skip logs the line and ends the check as skipped (SkipNow).
func (r *runTB) Skip(args ...any) { r.Log(args...); r.SkipNow() }

// SkipNow marks the check skipped and ends the calling goroutine
// (runtime.Goexit), as testing does.
func (r *runTB) SkipNow() {
	r.mu.Lock()
	r.skipped = true
	r.mu.Unlock()
	runtime.Goexit()
}

// Errorf logs the line and marks the check failed; the check goes on.
func (r *runTB) Errorf(format string, args ...any) { r.Logf(format, args...); r.Fail() }

// Error logs the line and marks the check failed; the check goes on.
func (r *runTB) Error(args ...any) { r.Log(args...); r.Fail() }

// Fatalf logs the line, marks the check failed and ends it (FailNow).
func (r *runTB) Fatalf(format string, args ...any) { r.Logf(format, args...); r.FailNow() }

// Fatal logs the line, marks the check failed and ends it (FailNow).
func (r *runTB) Fatal(args ...any) { r.Log(args...); r.FailNow() }

// FailNow marks the check failed and ends the calling goroutine
// (runtime.Goexit).
func (r *runTB) FailNow() { r.Fail(); runtime.Goexit() }

// Fail marks the check failed; safe for concurrent use.
func (r *runTB) Fail() {
	r.mu.Lock()
	r.failed = true
	r.mu.Unlock()
}

// Failed reports whether the check was marked failed.
func (r *runTB) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}
