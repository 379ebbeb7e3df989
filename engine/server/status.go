package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"regexp"
	"strconv"

	"github.com/baton-dev/baton/engine/handoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var errModelNotFound = errors.New("server: model not found")

// status maps an error to its gRPC status through handoff's one rejection
// table (rule ID and code) and maps anything unexpected to INTERNAL. The
// returned error remembers the rule (a *rejection); the interceptor logs
// every RPC that ends non-OK with that rule, its request_id and trace_id,
// and counts it (observe.go endCall).
func (e *Engine) status(err error) error {
	if err == nil {
		return nil
	}
	var code codes.Code
	rule, c := handoff.Classify(err)
	switch {
	case c != handoff.CodeInternal:
		code = codes.Code(c)
		if rule == "" {
			rule = wrapSiteRule(err.Error())
		}
	case errors.Is(err, errPermissionDenied):
		code, rule = codes.PermissionDenied, "SE-2"
	case errors.Is(err, errUnauthenticated):
		code, rule = codes.Unauthenticated, "SE-2"
	case errors.Is(err, errDecodeBudget):
		code, rule = codes.ResourceExhausted, "SE-4"
	case errors.Is(err, errModelNotFound):
		code = codes.NotFound
	case errors.Is(err, errDuplicateRequest):
		code = codes.AlreadyExists
	case errors.Is(err, errKVTransferFailed):
		code = codes.Unavailable
	case errors.Is(err, errAfterClaim):
		code, rule = codes.Unavailable, "Q-3" // never INVALID_ARGUMENT after the claim
	case errors.Is(err, errEncoderFailed):
		code, rule = codes.Internal, "C-6" // the engine stays READY (testhooks.go)
	case errors.Is(err, errCancelled), errors.Is(err, context.Canceled), status.Code(err) == codes.Canceled:
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	default:
		code = codes.Internal
	}
	return &rejection{st: status.New(code, err.Error()), rule: rule}
}

// rejection is a gRPC status plus the CONTRACT rule that decided it ("" when
// none did). gRPC sends it as the status it carries (GRPCStatus).
type rejection struct {
	st   *status.Status
	rule string
}

// Error implements error.
func (r *rejection) Error() string { return r.st.Err().Error() }

// GRPCStatus is the status gRPC sends.
func (r *rejection) GRPCStatus() *status.Status { return r.st }

// ruleIDPattern matches a rule ID of CONTRACT section 3 (SU-2, L-6, Q-4,
// SE-3...).
var ruleIDPattern = regexp.MustCompile(`\b(SU|SE|Q|C|R|H|L|N|S|B|X)-[0-9]+\b`)

// wrapSiteRule is the first rule ID in msg: the rule a wrap site named for a
// sentinel that claims none (handoff.ErrBadRequest), or "".
func wrapSiteRule(msg string) string {
	return ruleIDPattern.FindString(msg)
}

func mustRandomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

func splitHostPort(addr string) (string, uint32) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	p, _ := strconv.ParseUint(port, 10, 16)
	return host, uint32(p)
}
