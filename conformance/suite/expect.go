package suite

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/baton-dev/baton/conformance/target"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Failure text reads like grpc-go's interop client:
//
//	Consume(ref=3f2a.., tag altered) = code OK, 12 tokens; want INVALID_ARGUMENT before any token

// expectRejected reports (Errorf) unless res failed with gRPC code want
// before any token or EncoderReady; call names the request. It returns
// whether res was as wanted.
func expectRejected(t TB, call string, res *target.GenerateResult, want codes.Code) bool {
	t.Helper()
	if res.Code() == want && len(res.TokenIDs()) == 0 && res.EncoderReady() == nil && !hasPrefillReady(res) {
		return true
	}
	t.Errorf("%s = %s; want %s before any token", call, describe(res), codeName(want))
	return false
}

// expectTokens reports (Errorf) unless res closed OK with at least one
// token, a GenerationFinished and no EngineError; it returns whether res
// was as wanted.
func expectTokens(t TB, call string, res *target.GenerateResult) bool {
	t.Helper()
	if res.Code() == codes.OK && len(res.TokenIDs()) > 0 && res.Finished() != nil && res.EngineError() == nil && res.EncoderReady() == nil {
		return true
	}
	t.Errorf("%s = %s; want OK with tokens and GenerationFinished", call, describe(res))
	return false
}

// describe summarises a Generate result: "code OK, 12 tokens",
// `code INVALID_ARGUMENT ("SU-2 spent"), 0 tokens`, plus the notable events
// (EncoderReady, PrefillReady, EngineError, missing GenerationFinished).
func describe(res *target.GenerateResult) string {
	var b strings.Builder
	b.WriteString("code ")
	b.WriteString(codeName(res.Code()))
	if msg := res.Status.Message(); msg != "" && res.Code() != codes.OK {
		fmt.Fprintf(&b, " (%q)", truncate(msg, 120))
	}
	fmt.Fprintf(&b, ", %d tokens", len(res.TokenIDs()))
	if res.EncoderReady() != nil {
		b.WriteString(", EncoderReady")
	}
	if hasPrefillReady(res) {
		b.WriteString(", PrefillReady")
	}
	if e := res.EngineError(); e != nil {
		fmt.Fprintf(&b, ", EngineError %s (%q)", e.GetCode(), truncate(e.GetMessage(), 120))
	}
	if res.Code() == codes.OK && res.Finished() == nil && res.EncoderReady() == nil && !hasPrefillReady(res) && res.EngineError() == nil {
		b.WriteString(", no GenerationFinished")
	}
	return b.String()
}

// hasPrefillReady reports whether res carries a PrefillReady event.
func hasPrefillReady(res *target.GenerateResult) bool {
	return prefillReady(res) != nil
}

// prefillReady returns the PrefillReady event of res, or nil.
func prefillReady(res *target.GenerateResult) *pb.PrefillReady {
	for _, r := range res.Responses {
		if p := r.GetPrefillReady(); p != nil {
			return p
		}
	}
	return nil
}

// consumeCall names a consume: "Consume(ref=3f2a..)" or "Consume(ref=3f2a.., note)".
func consumeCall(ref *pb.EncoderCacheRef, note string) string {
	return callName("Consume", "ref="+refLabel(ref), note)
}

// abortCall names an Abort: "Abort(encoder_cache=3f2a..)" or with a note.
func abortCall(ref *pb.EncoderCacheRef, note string) string {
	return callName("Abort", "encoder_cache="+refLabel(ref), note)
}

func callName(verb, arg, note string) string {
	if note == "" {
		return fmt.Sprintf("%s(%s)", verb, arg)
	}
	return fmt.Sprintf("%s(%s, %s)", verb, arg, note)
}

// refLabel is a short name of a reference for messages: the first 4 hex
// digits of its baton-json-v1 id (read loosely, so an altered copy keeps
// its original's label), else of the SHA-256 of its opaque state,
// followed by "..".
func refLabel(ref *pb.EncoderCacheRef) string {
	op := ref.GetOpaqueState()
	if id, ok := refIDLoose(op); ok && hexPrefix.MatchString(id) {
		return id[:4] + ".."
	}
	if len(op) == 0 {
		return "<empty>"
	}
	sum := sha256.Sum256(op)
	return hex.EncodeToString(sum[:2]) + ".."
}

// hexPrefix matches an id whose first 4 characters are lowercase hex.
var hexPrefix = regexp.MustCompile(`^[0-9a-f]{4}`)

// codeNames spells gRPC codes as the contract does.
var codeNames = map[codes.Code]string{
	codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN",
	codes.InvalidArgument: "INVALID_ARGUMENT", codes.DeadlineExceeded: "DEADLINE_EXCEEDED",
	codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
	codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED",
	codes.OutOfRange: "OUT_OF_RANGE", codes.Unimplemented: "UNIMPLEMENTED",
	codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE", codes.DataLoss: "DATA_LOSS",
	codes.Unauthenticated: "UNAUTHENTICATED",
}

// codeName spells c as the contract does ("INVALID_ARGUMENT").
func codeName(c codes.Code) string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return fmt.Sprintf("CODE(%d)", uint32(c))
}

// statusString describes a unary RPC error: `code FAILED_PRECONDITION ("...")`.
func statusString(err error) string {
	s := status.Convert(err)
	if s.Message() == "" {
		return "code " + codeName(s.Code())
	}
	return fmt.Sprintf("code %s (%q)", codeName(s.Code()), truncate(s.Message(), 120))
}

// abortName spells an AbortStatus without its enum prefix ("ALREADY_FINISHED").
func abortName(s pb.AbortStatus) string {
	return strings.TrimPrefix(s.String(), "ABORT_STATUS_")
}

// shutdownName spells a ShutdownStatus without its enum prefix ("ACCEPTED").
func shutdownName(s pb.ShutdownStatus) string {
	return strings.TrimPrefix(s.String(), "SHUTDOWN_STATUS_")
}

// usageString formats a Usage as "prompt=12 completion=16 total=28".
func usageString(u *pb.Usage) string {
	if u == nil {
		return "<none>"
	}
	return fmt.Sprintf("prompt=%d completion=%d total=%d", u.GetPromptTokens(), u.GetCompletionTokens(), u.GetTotalTokens())
}

// healthChecks formats the non-READY checks of resp: " [encoder_cache NOT_READY: reason]".
func healthChecks(resp *pb.HealthResponse) string {
	var parts []string
	for _, c := range resp.GetChecks() {
		if c.GetState() != pb.HealthState_HEALTH_STATE_READY {
			parts = append(parts, fmt.Sprintf("%s %s: %s", c.GetName(), strings.TrimPrefix(c.GetState().String(), "HEALTH_STATE_"), c.GetMessage()))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " [" + strings.Join(parts, "; ") + "]"
}

// tokensString formats token ids for messages, at most 8 shown.
func tokensString(ids []uint32) string {
	if len(ids) <= 8 {
		return fmt.Sprint(ids)
	}
	return fmt.Sprintf("%v..(%d)", ids[:8], len(ids))
}

// sameAnswer reports whether two results have equal token ids.
func sameAnswer(a, b *target.GenerateResult) bool { return slices.Equal(a.TokenIDs(), b.TokenIDs()) }

// sameUsage reports whether two usages have equal prompt, completion and total tokens.
func sameUsage(a, b *pb.Usage) bool {
	return a.GetPromptTokens() == b.GetPromptTokens() && a.GetCompletionTokens() == b.GetCompletionTokens() && a.GetTotalTokens() == b.GetTotalTokens()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func sortedStrings(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
