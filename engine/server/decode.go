package server

import (
	"context"
	"fmt"
	"sync"

	"github.com/baton-dev/baton/engine/handoff"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

// grpc-go answers a request that does not unmarshal (truncated protobuf,
// invalid UTF-8 in a string field, nesting past the protobuf limit) with
// INTERNAL before any handler runs. The contract wants INVALID_ARGUMENT for
// malformed input (CONTRACT SU-4: "never INTERNAL"). decodeGuard is the
// server's codec: it lets such a request through as an empty message,
// remembers that it failed, and the interceptors below answer
// INVALID_ARGUMENT for it before the handler sees it.
type decodeGuard struct {
	proto  encoding.CodecV2
	failed sync.Map // message pointer -> unmarshal error
}

func newDecodeGuard() *decodeGuard {
	return &decodeGuard{proto: encoding.GetCodecV2("proto")}
}

// Name is the codec's name, "proto", so the guard replaces grpc-go's protobuf
// codec.
func (g *decodeGuard) Name() string { return "proto" }

// Marshal encodes v with the protobuf codec.
func (g *decodeGuard) Marshal(v any) (mem.BufferSlice, error) { return g.proto.Marshal(v) }

// Unmarshal decodes data into v with the protobuf codec and never fails: an
// unmarshal error is recorded against v for check, which answers
// INVALID_ARGUMENT (CONTRACT SU-4) instead of grpc-go's INTERNAL.
func (g *decodeGuard) Unmarshal(data mem.BufferSlice, v any) error {
	if err := g.proto.Unmarshal(data, v); err != nil {
		g.failed.Store(v, err)
	}
	return nil
}

// check returns the unmarshal error recorded for msg, forgetting it.
func (g *decodeGuard) check(msg any) error {
	if err, ok := g.failed.LoadAndDelete(msg); ok {
		return fmt.Errorf("%w: SU-4 the request does not decode as protobuf: %v", handoff.ErrBadRequest, err)
	}
	return nil
}

// serverOptions installs the codec and the interceptors that turn a
// recorded unmarshal failure into INVALID_ARGUMENT.
func (g *decodeGuard) serverOptions(e *Engine) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(g),
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			if err := g.check(req); err != nil {
				return nil, e.status(err)
			}
			return handler(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			return handler(srv, &guardedStream{ServerStream: ss, guard: g, e: e})
		}),
	}
}

type guardedStream struct {
	grpc.ServerStream
	guard *decodeGuard
	e     *Engine
}

// RecvMsg receives the next message and answers INVALID_ARGUMENT (CONTRACT
// SU-4) if it did not unmarshal as protobuf; stream errors are returned
// unchanged.
func (s *guardedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if err := s.guard.check(m); err != nil {
		return s.e.status(err)
	}
	return nil
}
