package world

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
)

// TraceHeader is the first line of a JSONL trace: everything Replay needs.
type TraceHeader struct {
	Seed     uint64   `json:"seed"`
	Mutant   Mutant   `json:"mutant,omitempty"`
	Settings Settings `json:"settings"`
}

// traceWriter writes the JSONL trace and the -v status lines. Step lines are
// built by hand (no maps), so equal runs give byte-identical traces.
type traceWriter struct {
	out     io.Writer
	verbose io.Writer
	buf     []byte
}

func (t *traceWriter) header(seed uint64, m Mutant, s Settings) {
	if t.out == nil {
		return
	}
	b, _ := json.Marshal(TraceHeader{Seed: seed, Mutant: m, Settings: s})
	_, _ = t.out.Write(append(b, '\n'))
}

func (t *traceWriter) step(n int64, ev Event, note string) {
	if t.out != nil {
		b := t.buf[:0]
		b = append(b, `{"step":`...)
		b = strconv.AppendInt(b, n, 10)
		b = append(b, `,"tick":`...)
		b = strconv.AppendInt(b, ev.Tick, 10)
		b = append(b, `,"seq":`...)
		b = strconv.AppendUint(b, ev.seq, 10)
		b = append(b, `,"ev":"`...)
		b = append(b, ev.Kind.String()...)
		b = append(b, '"')
		b = ev.appendSlots(b)
		if note != "" {
			b = append(b, `,"note":`...)
			b = strconv.AppendQuote(b, note)
		}
		b = append(b, "}\n"...)
		t.buf = b
		_, _ = t.out.Write(b)
	}
	if t.verbose != nil {
		h, c := ev.verboseSlots()
		fmt.Fprintf(t.verbose, "t=%-6d #%-5d %-20s h=%-3d c=%d %s\n", ev.Tick, n, ev.Kind, h, c, note)
	}
}

func (t *traceWriter) verdict(r Result) {
	if t.out == nil {
		return
	}
	b, _ := json.Marshal(struct {
		Verdict string `json:"verdict"`
		Rule    string `json:"rule,omitempty"`
		Failure string `json:"failure,omitempty"`
		Ticks   int64  `json:"ticks"`
		Events  int64  `json:"events"`
	}{r.Verdict.String(), r.Rule, r.Failure, r.Ticks, r.Events})
	_, _ = t.out.Write(append(b, '\n'))
}

// ReadTraceHeader reads the first line of a trace. Errors wrap ErrBadSettings:
// an empty file, a first line that is not a header, invalid settings.
func ReadTraceHeader(r io.Reader) (TraceHeader, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return TraceHeader{}, fmt.Errorf("%w: trace header: %v", ErrBadSettings, err)
		}
		return TraceHeader{}, fmt.Errorf("%w: empty trace", ErrBadSettings)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
		return TraceHeader{}, fmt.Errorf("%w: trace header is not JSON: %v", ErrBadSettings, err)
	}
	if _, ok := raw["seed"]; !ok {
		return TraceHeader{}, fmt.Errorf("%w: trace header has no seed", ErrBadSettings)
	}
	if _, ok := raw["settings"]; !ok {
		return TraceHeader{}, fmt.Errorf("%w: trace header has no settings", ErrBadSettings)
	}
	var h TraceHeader
	dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return TraceHeader{}, fmt.Errorf("%w: trace header: %v", ErrBadSettings, err)
	}
	if _, err := ParseMutant(string(h.Mutant)); err != nil {
		return TraceHeader{}, err
	}
	if err := h.Settings.Validate(); err != nil {
		return TraceHeader{}, err
	}
	return h, nil
}

// ReadTraceFile reads the header of the trace at path (ReadTraceHeader).
func ReadTraceFile(path string) (TraceHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		return TraceHeader{}, err
	}
	defer f.Close()
	return ReadTraceHeader(f)
}

// Replay re-runs the trace at path with the seed, mutant and settings of its
// header; opts.Mutant is ignored. Errors: those of ReadTraceFile.
func Replay(path string, opts Options) (Result, error) {
	h, err := ReadTraceFile(path)
	if err != nil {
		return Result{}, err
	}
	opts.Mutant = h.Mutant
	return Run(h.Seed, h.Settings, opts), nil
}
