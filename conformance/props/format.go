package props

import (
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/baton-dev/baton/conformance/target"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// maxTokens bounds every generation, to keep checks fast.
const maxTokens = 8

func isHexSHA256(s string) bool {
	if len(s) != 64 || strings.ToLower(s) != s {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

func equalIDs(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func containsCode(cs []codes.Code, c codes.Code) bool {
	for _, x := range cs {
		if x == c {
			return true
		}
	}
	return false
}

func codeNames(cs []codes.Code) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = codeName(c)
	}
	return strings.Join(names, " or ")
}

// codeName is the code's name as the gRPC spec writes it ("INVALID_ARGUMENT").
func codeName(c codes.Code) string {
	if c == codes.OK {
		return "OK"
	}
	var b strings.Builder
	for i, r := range c.String() {
		if r >= 'A' && r <= 'Z' && i > 0 {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}

func statusString(err error) string {
	if err == nil {
		return "OK"
	}
	st := status.Convert(err)
	return fmt.Sprintf("code %s (%q)", codeName(st.Code()), st.Message())
}

// describe renders a Generate result as the suite does: code, tokens, events.
// brief renders a Generate result for a failure message: its code, its
// token count and events, never the status message, whose ids change on
// every replay (rapid shrinks only while replays fail with one message).
func brief(res *target.GenerateResult) string {
	s := "code " + codeName(res.Code())
	if n := len(res.TokenIDs()); n > 0 {
		s += fmt.Sprintf(", %d tokens", n)
	}
	if res.EncoderReady() != nil {
		s += ", EncoderReady"
	}
	if e := res.EngineError(); e != nil {
		s += fmt.Sprintf(", EngineError %s", e.GetCode())
	}
	return s
}

// describe is brief with the engine's messages, for logs.
func describe(res *target.GenerateResult) string {
	s := brief(res)
	if e := res.EngineError(); e != nil {
		s += fmt.Sprintf(" %q", e.GetMessage())
	}
	if msg := res.Status.Message(); msg != "" {
		s += fmt.Sprintf(" (%q)", truncate(msg, 120))
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// refLabel names a reference by its size.
//
// The label carries no byte of the reference: failure messages must be
// the same on every replay of a check (rapid shrinks only while a replay
// fails with the same message), and opaque states differ on every run.
func refLabel(ref *pb.EncoderCacheRef) string {
	st := ref.GetOpaqueState()
	if len(st) == 0 {
		return "<empty>"
	}
	return fmt.Sprintf("<%d-byte reference>", len(st))
}

func consumeCall(ref *pb.EncoderCacheRef, note string) string {
	if note != "" {
		return fmt.Sprintf("Consume(ref=%s, %s)", refLabel(ref), note)
	}
	return fmt.Sprintf("Consume(ref=%s)", refLabel(ref))
}

func abortCall(ref *pb.EncoderCacheRef, note string) string {
	if note != "" {
		return fmt.Sprintf("Abort(encoder_cache=%s, %s)", refLabel(ref), note)
	}
	return fmt.Sprintf("Abort(encoder_cache=%s)", refLabel(ref))
}
