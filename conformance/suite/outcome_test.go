package suite

import (
	"strings"
	"testing"

	"github.com/baton-dev/baton/conformance/target"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// runFunc runs f on Record's TB in its own goroutine.
func runFunc(f func(TB)) *recorder {
	r := &recordingTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return &recorder{failed: r.failed, skipped: r.skipped, msgs: r.msgs}
}

func TestOutcomeHelpers(t *testing.T) {
	tests := []struct {
		name     string
		f        func(TB)
		want     Outcome
		wantMsg  string
		reaching bool // code after the helper runs
	}{
		{"not applicable", func(t TB) { NotApplicable(t, "no D") }, OutcomeNotApplicable, "not applicable: no D", false},
		{"not verifiable", func(t TB) { NotVerifiable(t, "no observables") }, OutcomeNotVerifiable, "not verifiable: no observables", false},
		{"harness error", func(t TB) { HarnessError(t, "dial %s", "x:1") }, OutcomeError, "harness error: dial x:1", false},
		{"passed", func(t TB) {}, OutcomePassed, "", true},
		{"failed", func(t TB) { t.Errorf("Consume = code OK") }, OutcomeFailed, "Consume = code OK", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reached := false
			r := runFunc(func(tb TB) { tt.f(tb); reached = true })
			if got := r.outcome(); got != tt.want {
				t.Errorf("outcome = %s; want %s", r, tt.want)
			}
			if tt.wantMsg != "" && (len(r.msgs) != 1 || r.msgs[0] != tt.wantMsg) {
				t.Errorf("messages = %q; want [%q]", r.msgs, tt.wantMsg)
			}
			if reached != tt.reaching {
				t.Errorf("code after the helper reached = %v; want %v", reached, tt.reaching)
			}
		})
	}
}

func TestOutcomeOf(t *testing.T) {
	tests := []struct {
		failed, skipped bool
		msgs            []string
		want            Outcome
	}{
		{false, false, nil, OutcomePassed},
		{true, false, nil, OutcomeFailed},
		{true, false, []string{"Consume(ref=ab..) = code OK, 16 tokens; want INVALID_ARGUMENT before any token"}, OutcomeFailed},
		{true, false, []string{"harness error: dial"}, OutcomeError},
		{true, false, []string{"harness error: dial", "Consume = code OK"}, OutcomeFailed},
		{true, true, []string{"Consume = code OK", "not applicable: no D"}, OutcomeFailed},
		{false, true, []string{"not applicable: no D"}, OutcomeNotApplicable},
		{false, true, []string{"  not applicable: padded"}, OutcomeNotApplicable},
		{false, true, []string{"not verifiable: no quota"}, OutcomeNotVerifiable},
		{false, true, []string{"skipped for another reason"}, OutcomeNotVerifiable},
		{false, true, nil, OutcomeNotVerifiable},
	}
	for _, tt := range tests {
		if got := OutcomeOf(tt.failed, tt.skipped, tt.msgs...); got != tt.want {
			t.Errorf("OutcomeOf(%v, %v, %q) = %s; want %s", tt.failed, tt.skipped, tt.msgs, got, tt.want)
		}
	}
}

func result(c codes.Code, msg string, tokens int, events ...*pb.GenerateResponse) *target.GenerateResult {
	res := &target.GenerateResult{Status: status.New(c, msg)}
	if tokens > 0 {
		var toks []*pb.TokenInfo
		for i := range tokens {
			toks = append(toks, &pb.TokenInfo{TokenId: uint32(i)})
		}
		res.Responses = append(res.Responses, &pb.GenerateResponse{Event: &pb.GenerateResponse_Token{Token: &pb.TokenOutput{Tokens: toks}}})
	}
	res.Responses = append(res.Responses, events...)
	return res
}

var finished = &pb.GenerateResponse{Event: &pb.GenerateResponse_Finished{Finished: &pb.GenerationFinished{}}}

func TestFailureTextReadsLikeGRPCGo(t *testing.T) {
	ref := &pb.EncoderCacheRef{OpaqueState: []byte(`{"v":1,"id":"3f2a0000000000000000000000000000","exp":1,"items":[],"tag":"00"}`)}
	r := runFunc(func(tb TB) {
		expectRejected(tb, consumeCall(ref, ""), result(codes.OK, "", 12, finished), codes.InvalidArgument)
	})
	want := "Consume(ref=3f2a..) = code OK, 12 tokens; want INVALID_ARGUMENT before any token"
	if len(r.msgs) != 1 || r.msgs[0] != want {
		t.Errorf("failure text = %q; want %q", r.msgs, want)
	}
}

func TestExpectRejectedAndTokens(t *testing.T) {
	ready := &pb.GenerateResponse{Event: &pb.GenerateResponse_EncoderReady{EncoderReady: &pb.EncoderReady{}}}
	engineErr := &pb.GenerateResponse{Event: &pb.GenerateResponse_Error{Error: &pb.EngineError{Code: pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT}}}
	tests := []struct {
		name         string
		res          *target.GenerateResult
		rejectedOK   bool // expectRejected(INVALID_ARGUMENT) passes
		tokensOK     bool // expectTokens passes
		wantFragment string
	}{
		{"clean rejection", result(codes.InvalidArgument, "SU-2 spent", 0), true, false, `code INVALID_ARGUMENT ("SU-2 spent"), 0 tokens`},
		{"wrong code", result(codes.Internal, "boom", 0), false, false, "code INTERNAL"},
		{"right code after tokens", result(codes.InvalidArgument, "late", 3), false, false, "3 tokens"},
		{"EngineError closing OK", result(codes.OK, "", 0, engineErr), false, false, "EngineError ERROR_CODE_INVALID_ARGUMENT"},
		{"publish answered", result(codes.InvalidArgument, "", 0, ready), false, false, "EncoderReady"},
		{"tokens", result(codes.OK, "", 16, finished), false, true, "code OK, 16 tokens"},
		{"tokens without finish", result(codes.OK, "", 16), false, false, "no GenerationFinished"},
		{"no tokens", result(codes.OK, "", 0, finished), false, false, "0 tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotRej, gotTok bool
			r := runFunc(func(tb TB) {
				gotRej = expectRejected(tb, "Call()", tt.res, codes.InvalidArgument)
				gotTok = expectTokens(tb, "Call()", tt.res)
			})
			if gotRej != tt.rejectedOK || gotTok != tt.tokensOK {
				t.Errorf("expectRejected = %v, expectTokens = %v; want %v, %v (%s)", gotRej, gotTok, tt.rejectedOK, tt.tokensOK, r)
			}
			if d := describe(tt.res); !strings.Contains(d, tt.wantFragment) {
				t.Errorf("describe = %q; want it to contain %q", d, tt.wantFragment)
			}
		})
	}
}

func TestCodeNames(t *testing.T) {
	for c, want := range map[codes.Code]string{
		codes.OK: "OK", codes.InvalidArgument: "INVALID_ARGUMENT", codes.FailedPrecondition: "FAILED_PRECONDITION",
		codes.ResourceExhausted: "RESOURCE_EXHAUSTED", codes.Unimplemented: "UNIMPLEMENTED", codes.Canceled: "CANCELLED",
		codes.Code(99): "CODE(99)",
	} {
		if got := codeName(c); got != want {
			t.Errorf("codeName(%d) = %q; want %q", c, got, want)
		}
	}
	if got := abortName(pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED); got != "ALREADY_FINISHED" {
		t.Errorf("abortName = %q", got)
	}
	if got := statusString(status.Error(codes.FailedPrecondition, "N-1")); got != `code FAILED_PRECONDITION ("N-1")` {
		t.Errorf("statusString = %q", got)
	}
}

func TestRefLabel(t *testing.T) {
	tests := []struct {
		opaque []byte
		want   string
	}{
		{[]byte(`{"id":"abcd1234"}`), "abcd.."},
		{nil, "<empty>"},
		{[]byte("garbage"), ""}, // a hash prefix: 4 hex + ".."
	}
	for _, tt := range tests {
		got := refLabel(&pb.EncoderCacheRef{OpaqueState: tt.opaque})
		if tt.want != "" && got != tt.want {
			t.Errorf("refLabel(%q) = %q; want %q", tt.opaque, got, tt.want)
		}
		if tt.want == "" && (len(got) != 6 || !strings.HasSuffix(got, "..")) {
			t.Errorf("refLabel(%q) = %q; want 4 hex digits and ..", tt.opaque, got)
		}
	}
}

func TestCountersOf(t *testing.T) {
	all := map[string]any{}
	for i, k := range Observables() {
		all[k] = float64(i)
	}
	full, _ := structpb.NewStruct(all)
	c, err := countersOf(&pb.LoadInfo{Attributes: full})
	if err != nil || c[ObservableExportsBytes] != 1 || len(c) != len(Observables()) {
		t.Errorf("countersOf(full) = %v, %v; want every key", c, err)
	}

	missing := map[string]any{}
	for k, v := range all {
		missing[k] = v
	}
	delete(missing, ObservableCleanupPending)
	s, _ := structpb.NewStruct(missing)
	if _, err := countersOf(&pb.LoadInfo{Attributes: s}); err == nil || !strings.Contains(err.Error(), ObservableCleanupPending) {
		t.Errorf("countersOf(missing key) = %v; want an error naming %s", err, ObservableCleanupPending)
	}

	wrongType := map[string]any{}
	for k, v := range all {
		wrongType[k] = v
	}
	wrongType[ObservableExportsEntries] = "three"
	s, _ = structpb.NewStruct(wrongType)
	if _, err := countersOf(&pb.LoadInfo{Attributes: s}); err == nil {
		t.Errorf("countersOf(string value) = nil error; want one")
	}
	if _, err := countersOf(&pb.LoadInfo{}); err == nil {
		t.Errorf("countersOf(no attributes) = nil error; want one")
	}

	a := counters{ObservableExportsEntries: 1, ObservableExportsBytes: 512}
	b := counters{ObservableExportsEntries: 2, ObservableExportsBytes: 512}
	if d := a.diff(b); len(d) != 1 || d[0] != "encoder.exports.entries 1->2" {
		t.Errorf("diff = %q; want [encoder.exports.entries 1->2]", d)
	}
	if d := a.diff(b, ObservableExportsBytes); len(d) != 0 {
		t.Errorf("diff(bytes only) = %q; want none", d)
	}
}

func TestNewUUIDAndRequestID(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		u := newUUID()
		if !fakeUUIDPattern.MatchString(u) || u[14] != '4' {
			t.Fatalf("newUUID() = %q; want a lowercase version-4 UUID", u)
		}
		if seen[u] {
			t.Fatalf("newUUID() repeated %q", u)
		}
		seen[u] = true
	}
	if id := newRequestID("consume"); !matches(`^baton-consume-[0-9a-f]{16}$`, id) {
		t.Errorf("newRequestID = %q", id)
	}
}

func TestPseudoBytesDeterministic(t *testing.T) {
	a, b := pseudoBytes("x", 100), pseudoBytes("x", 100)
	if string(a) != string(b) || len(a) != 100 {
		t.Errorf("pseudoBytes not deterministic or wrong length")
	}
	if string(pseudoBytes("y", 100)) == string(a) {
		t.Errorf("pseudoBytes ignores its label")
	}
	if len(pseudoBytes("x", 0)) != 0 || len(pseudoBytes("x", 65537)) != 65537 {
		t.Errorf("pseudoBytes length wrong")
	}
}
