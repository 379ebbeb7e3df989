package world

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Fuzz targets of the simulator's inputs: trace files (`baton sim replay`
// reads one it is given) and scenario scripts (testdata/scenarios). The
// seeds (here, the committed scenarios, and testdata/fuzz/) run with `go
// test`; `make fuzz` fuzzes each for FUZZTIME.

// FuzzReadTraceHeader: the trace header parser never panics; it refuses
// with ErrBadSettings (or a mutant error), and a header it accepts has
// valid settings.
func FuzzReadTraceHeader(f *testing.F) {
	var buf bytes.Buffer
	tw := &traceWriter{out: &buf}
	tw.header(7, "", DrawSettings(7))
	f.Add(buf.Bytes())
	f.Add([]byte(`{"seed":1,"settings":{}}`))
	f.Add([]byte(`{"seed":1,"mutant":"no-such","settings":{"consumers":-1}}` + "\n{}"))
	f.Add([]byte("\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ReadTraceHeader(bytes.NewReader(b))
		if err != nil {
			return
		}
		if err := h.Settings.Validate(); err != nil {
			t.Fatalf("accepted a header whose settings are invalid: %v", err)
		}
		if _, err := ParseMutant(string(h.Mutant)); err != nil {
			t.Fatalf("accepted mutant %q: %v", h.Mutant, err)
		}
	})
}

// maxFuzzCommands bounds one scenario execution.
const maxFuzzCommands = 24

// FuzzScenario: a scenario script (one command a line, key=value
// arguments, as the datadriven files hold) never crashes the interpreter
// (Do recovers a panic into a "CRASH:" line, which fails here) whatever
// its commands and values.
func FuzzScenario(f *testing.F) {
	paths, _ := filepath.Glob("testdata/scenarios/*.txt")
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		var cmds []string
		for _, block := range strings.Split(string(raw), "\n\n") {
			line := strings.TrimSpace(strings.SplitN(block, "\n", 2)[0])
			if line != "" && !strings.HasPrefix(line, "#") && line != "----" {
				cmds = append(cmds, line)
			}
		}
		f.Add(strings.Join(cmds, "\n"))
	}
	f.Add("new consumers=0\npublish h=-1\nclaim h=0 pd=9\ndeliver n=-5\nexpect")
	f.Add("publish h=0")
	f.Add("new\ndelay kind=nope ms=1\ndelay kind=remove-done ms=-1\npublish h=0\ndelay kind=publish-arrive ms=99999999999\nfinish max=99999999\ncrash-producer\ncrash-producer\nshutdown\nfinish max=x\nfinish\nfinish")
	f.Fuzz(func(t *testing.T, script string) {
		sc := NewScenario()
		for i, line := range strings.Split(script, "\n") {
			if i >= maxFuzzCommands {
				break
			}
			fields := strings.Fields(line)
			if len(fields) == 0 {
				continue
			}
			args := map[string]string{}
			for _, a := range fields[1:] {
				k, v, _ := strings.Cut(a, "=")
				args[k] = v
			}
			if out := sc.Do(fields[0], args); strings.Contains(out, "CRASH:") {
				t.Fatalf("command %q crashed the scenario:\n%s", line, out)
			}
		}
	})
}
