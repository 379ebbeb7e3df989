package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"strconv"

	"github.com/baton-dev/baton/engine/handoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var errModelNotFound = errors.New("server: model not found")

// status maps an error to its gRPC status through handoff's one rejection
// table (rule ID and code), logs expected rejections with their rule ID, and
// maps anything unexpected to INTERNAL.
func (e *Engine) status(err error) error {
	if err == nil {
		return nil
	}
	var code codes.Code
	rule, c := handoff.Classify(err)
	switch {
	case c != handoff.CodeInternal:
		code = codes.Code(c)
	case errors.Is(err, errModelNotFound):
		code = codes.NotFound
	case errors.Is(err, errDuplicateRequest):
		code = codes.AlreadyExists
	case errors.Is(err, errCancelled), errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	default:
		code = codes.Internal
	}
	if code == codes.Internal {
		e.log.Error("request failed", "err", err)
	} else {
		e.log.Info("request rejected", "rule", rule, "code", code.String(), "err", err)
	}
	return status.Error(code, err.Error())
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
