package faultproxy

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func randomPlan(seed uint64) Plan {
	return Plan{
		Seed: seed,
		Rules: map[string]Rule{
			methodUnary: {
				Sequence: []Step{{Fault: FaultDropReply}},
				Random: []Chance{
					{Step{Fault: FaultUnavailable}, 0.25},
					{Step{Fault: FaultDelay, Delay: time.Second}, 0.25},
					{Step{Fault: FaultCutConnection}, 0.1},
				},
			},
		},
		Default: Rule{Random: []Chance{{Step{Fault: FaultDropRequest}, 0.5}}},
	}
}

// TestDecideDeterministic: the same seed gives the same decisions, whatever
// order they are asked in; another seed gives others; the frequencies follow
// the probabilities.
func TestDecideDeterministic(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	a, b, other := randomPlan(seed), randomPlan(seed), randomPlan(seed+1)
	const n = 4000
	methods := []string{methodUnary, "/openengine.v1.Control/TransferEncoderCache"}
	counts := map[Step]int{}
	differ := 0
	for _, m := range methods {
		for i := n - 1; i >= 0; i-- { // reverse order: decisions are per index
			sa, ra := a.Decide(m, i)
			sb, rb := b.Decide(m, i)
			if sa != sb || ra != rb {
				t.Fatalf("seed %d: %s call %d: %v/%v vs %v/%v", seed, m, i, sa, ra, sb, rb)
			}
			if so, _ := other.Decide(m, i); so != sa {
				differ++
			}
			if m == methodUnary {
				counts[sa]++
			}
		}
	}
	if differ == 0 {
		t.Errorf("seed %d and %d gave identical decisions", seed, seed+1)
	}
	if s, r := a.Decide(methodUnary, 0); s.Fault != FaultDropReply || r {
		t.Errorf("call 0 = %v random %v, want the fixed drop-reply", s, r)
	}
	if s, r := a.Decide(methodUnary, -1); s != (Step{}) || r {
		t.Errorf("negative index = %v, %v; want none", s, r)
	}
	want := map[Step]float64{
		{Fault: FaultUnavailable}:               0.25,
		{Fault: FaultDelay, Delay: time.Second}: 0.25,
		{Fault: FaultCutConnection}:             0.1,
		{}:                                      0.4,
	}
	for s, p := range want {
		got := float64(counts[s]) / n
		if math.Abs(got-p) > 0.04 {
			t.Errorf("seed %d: %v chosen %.3f of calls, want %.2f", seed, s, got, p)
		}
	}
	if (Plan{}).Rules != nil {
		t.Fatal("zero plan has rules")
	}
	if s, r := (Plan{Seed: seed}).Decide(methodUnary, 7); s != (Step{}) || r {
		t.Errorf("zero plan decided %v, %v", s, r)
	}
}

// TestLiveDecisionsMatchPlan: two proxies with the same seed record the same
// decisions, and each is what Plan.Decide says for that call index.
func TestLiveDecisionsMatchPlan(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	plan := Plan{Seed: seed, Default: Rule{Random: []Chance{{Step{Fault: FaultUnavailable}, 0.5}}}}
	_, up := startUpstream(t)
	const calls = 16
	var runs [2][]CallRecord
	for k := range runs {
		p := startProxy(t, up, Options{Plan: plan})
		cc := dial(t, p.Addr())
		for i := range calls {
			ctx, cancel := context.WithTimeout(context.Background(), testWait)
			_, err := callUnary(ctx, cc, methodUnary, "x")
			cancel()
			step, _ := plan.Decide(methodUnary, i)
			if want := map[Fault]codes.Code{FaultNone: codes.OK, FaultUnavailable: codes.Unavailable}[step.Fault]; status.Code(err) != want {
				t.Errorf("seed %d run %d call %d: %v, want %v (%v)", seed, k, i, err, want, step)
			}
		}
		runs[k] = waitDone(t, p, methodUnary, calls)
	}
	for i := range calls {
		a, b := runs[0][i], runs[1][i]
		want, _ := plan.Decide(methodUnary, i)
		if a.Step != want || b.Step != want || !a.Random || a.Index != i || a.Seq != i {
			t.Errorf("seed %d call %d: recorded %+v and %+v, want step %v", seed, i, a, b, want)
		}
		if a.Forwarded != (want.Fault == FaultNone) {
			t.Errorf("seed %d call %d: forwarded %v for %v", seed, i, a.Forwarded, want)
		}
	}
}

// TestSetPlanRestartsIndex: SetPlan restarts call indices and records; an
// invalid plan is refused and the old one kept.
func TestSetPlanRestartsIndex(t *testing.T) {
	_, up := startUpstream(t)
	p := startProxy(t, up, Options{})
	cc := dial(t, p.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	for range 2 {
		if _, err := callUnary(ctx, cc, methodUnary, "x"); err != nil {
			t.Fatal(err)
		}
	}
	waitDone(t, p, methodUnary, 2)
	if err := p.SetPlan(Plan{Rules: map[string]Rule{methodUnary: {Sequence: []Step{{Fault: FaultUnavailable}}}}}); err != nil {
		t.Fatal(err)
	}
	if got := p.Calls(methodUnary); len(got) != 0 {
		t.Errorf("records after SetPlan = %+v, want none", got)
	}
	bad := Plan{Rules: map[string]Rule{"no-slash": {}}}
	if err := p.SetPlan(bad); !errors.Is(err, ErrInvalidPlan) {
		t.Errorf("SetPlan(invalid) = %v, want ErrInvalidPlan", err)
	}
	if _, err := callUnary(ctx, cc, methodUnary, "x"); status.Code(err) != codes.Unavailable {
		t.Errorf("first call under the new plan: %v, want UNAVAILABLE", err)
	}
	recs := waitDone(t, p, methodUnary, 1)
	if len(recs) != 1 || recs[0].Index != 0 || recs[0].Step.Fault != FaultUnavailable {
		t.Errorf("records = %+v, want one at index 0 with unavailable", recs)
	}
	if all := p.AllCalls(); len(all) != 1 || all[0].Seq != 0 {
		t.Errorf("AllCalls = %+v", all)
	}
	// The proxy copied the plan: editing the caller's copy changes nothing.
	plan := Plan{Rules: map[string]Rule{methodUnary: {Sequence: []Step{{}}}}}
	if err := p.SetPlan(plan); err != nil {
		t.Fatal(err)
	}
	plan.Rules[methodUnary].Sequence[0] = Step{Fault: FaultUnavailable}
	if _, err := callUnary(ctx, cc, methodUnary, "x"); err != nil {
		t.Errorf("call after editing the caller's plan: %v, want OK", err)
	}
}

func TestPlanValidateRejectsMalformed(t *testing.T) {
	step := func(f Fault, d time.Duration) Rule { return Rule{Sequence: []Step{{Fault: f, Delay: d}}} }
	chance := func(p ...float64) Rule {
		var cs []Chance
		for _, x := range p {
			cs = append(cs, Chance{Step{Fault: FaultUnavailable}, x})
		}
		return Rule{Random: cs}
	}
	cases := []struct {
		name string
		plan Plan
	}{
		{"empty method", Plan{Rules: map[string]Rule{"": {}}}},
		{"no leading slash", Plan{Rules: map[string]Rule{"svc/M": {}}}},
		{"service only", Plan{Rules: map[string]Rule{"/svc": {}}}},
		{"empty method name", Plan{Rules: map[string]Rule{"/svc/": {}}}},
		{"empty service", Plan{Rules: map[string]Rule{"//M": {}}}},
		{"three parts", Plan{Rules: map[string]Rule{"/a/b/c": {}}}},
		{"unknown fault", Plan{Rules: map[string]Rule{methodUnary: step(faultCount, 0)}}},
		{"negative fault", Plan{Rules: map[string]Rule{methodUnary: step(-1, 0)}}},
		{"delay without duration", Plan{Rules: map[string]Rule{methodUnary: step(FaultDelay, 0)}}},
		{"negative delay", Plan{Rules: map[string]Rule{methodUnary: step(FaultDropReply, -time.Second)}}},
		{"negative probability", Plan{Rules: map[string]Rule{methodUnary: chance(-0.1)}}},
		{"probability above 1", Plan{Rules: map[string]Rule{methodUnary: chance(1.5)}}},
		{"NaN probability", Plan{Rules: map[string]Rule{methodUnary: chance(math.NaN())}}},
		{"probabilities sum above 1", Plan{Rules: map[string]Rule{methodUnary: chance(0.6, 0.6)}}},
		{"bad chance step", Plan{Rules: map[string]Rule{methodUnary: {Random: []Chance{{Step{Fault: FaultDelay}, 0.5}}}}}},
		{"bad default", Plan{Default: step(99, 0)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.plan.Validate()
			if !errors.Is(err, ErrInvalidPlan) {
				t.Fatalf("Validate = %v, want ErrInvalidPlan", err)
			}
			if _, err := New("127.0.0.1:1", Options{Plan: c.plan}); !errors.Is(err, ErrInvalidPlan) {
				t.Errorf("New = %v, want ErrInvalidPlan", err)
			}
		})
	}
	ok := Plan{Rules: map[string]Rule{methodUnary: {Sequence: []Step{{Fault: FaultDelay, Delay: time.Millisecond}}, Random: []Chance{{Step{}, 0.5}, {Step{Fault: FaultCutConnection}, 0.5}}}}}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid plan: %v", err)
	}
}

func TestNewRejectsMalformedOptions(t *testing.T) {
	if _, err := New("127.0.0.1:1", Options{MaxMessageBytes: -1}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("negative MaxMessageBytes: %v, want ErrInvalidOptions", err)
	}
	if _, err := New("127.0.0.1:1", Options{ListenAddr: "not-an-address"}); err == nil {
		t.Error("bad listen address accepted")
	}
	if _, err := New("dns://a:b:c/%zz", Options{}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("unparsable upstream: %v, want ErrInvalidOptions", err)
	}
	p := startProxy(t, "", Options{})
	if err := p.SetUpstream("dns://a:b:c/%zz"); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("SetUpstream(unparsable): %v, want ErrInvalidOptions", err)
	}
}

func TestFaultAndStepStrings(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{FaultNone.String(), "none"},
		{FaultDropRequest.String(), "drop-request"},
		{FaultDropReply.String(), "drop-reply"},
		{FaultDelay.String(), "delay"},
		{FaultCutConnection.String(), "cut-connection"},
		{FaultUnavailable.String(), "unavailable"},
		{Fault(42).String(), "fault(42)"},
		{Step{Fault: FaultDelay, Delay: 250 * time.Millisecond}.String(), "delay(250ms)"},
		{Step{Fault: FaultDropReply, Delay: time.Second}.String(), "drop-reply"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	for f, want := range map[Fault]bool{FaultNone: true, FaultDropRequest: false, FaultDropReply: true, FaultDelay: true, FaultCutConnection: true, FaultUnavailable: false} {
		if f.Reached() != want {
			t.Errorf("%v.Reached() = %v, want %v", f, f.Reached(), want)
		}
	}
}

func TestRawCodecRejectsOtherTypes(t *testing.T) {
	var c rawCodec
	if _, err := c.Marshal("not a frame"); err == nil {
		t.Error("Marshal(string) accepted")
	}
	var s string
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte("x"))}, &s); err == nil {
		t.Error("Unmarshal into *string accepted")
	}
	f := new(frame)
	src := []byte{1, 2, 3}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(src)}, f); err != nil || string(f.payload) != string(src) {
		t.Fatalf("Unmarshal = %v, %v", f.payload, err)
	}
	src[0] = 9
	if f.payload[0] != 1 {
		t.Error("Unmarshal did not copy")
	}
	out, err := c.Marshal(&frame{payload: []byte("ab")})
	if err != nil || string(out.Materialize()) != "ab" {
		t.Errorf("Marshal = %q, %v", out.Materialize(), err)
	}
}

func TestMetadataFiltering(t *testing.T) {
	in := metadata.MD{
		":authority":              {"x"},
		"content-type":            {"application/grpc+baton-raw"},
		"user-agent":              {"ua"},
		"te":                      {"trailers"},
		"grpc-accept-encoding":    {"gzip"},
		"grpc-status-details-bin": {"d"},
		"baton-transfer-rejected": {"before-write"},
		"x-blob-bin":              {"\x00\x01"},
		"x-multi":                 {"a", "b"},
	}
	got := forwardable(in)
	want := metadata.MD{"baton-transfer-rejected": {"before-write"}, "x-blob-bin": {"\x00\x01"}, "x-multi": {"a", "b"}}
	if len(got) != len(want) {
		t.Fatalf("forwardable = %v, want %v", got, want)
	}
	for k, v := range want {
		if joined(got, k) != joined(v2md(k, v), k) {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	got["x-multi"][0] = "changed"
	if in["x-multi"][0] != "a" {
		t.Error("forwardable shares slices with its input")
	}
	for _, c := range []struct{ ct, want string }{
		{"application/grpc", ""},
		{"application/grpc+proto", "proto"},
		{"application/grpc;baton-raw", "baton-raw"},
		{"Application/GRPC+JSON", "json"},
		{"text/plain", ""},
		{"application/grpc+", ""},
	} {
		if got := contentSubtype(metadata.Pairs("content-type", c.ct)); got != c.want {
			t.Errorf("contentSubtype(%q) = %q, want %q", c.ct, got, c.want)
		}
	}
	if got := contentSubtype(nil); got != "" {
		t.Errorf("contentSubtype(nil) = %q", got)
	}
}

func v2md(k string, v []string) metadata.MD { return metadata.MD{k: v} }
