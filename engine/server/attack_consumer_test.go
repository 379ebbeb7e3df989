package server

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/baton-dev/baton/engine/xfer"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// Regression tests for the attack report's consumer-side findings (A1,
// A2, A5, A6): requests from a client that is neither operator nor
// configured peer must end in the contract's codes and leave every engine
// READY with nothing quarantined (CONTRACT SE-4).

// padToMessage returns the consume request for ref with
// producer_endpoint.protocol padded so that the whole GenerateRequest is
// exactly size bytes on the wire (the attack report's A1).
func padToMessage(t *testing.T, ref *pb.EncoderCacheRef, size int) *pb.GenerateRequest {
	t.Helper()
	forged := proto.Clone(ref).(*pb.EncoderCacheRef)
	pad := size - proto.Size(consumeReq(ref)) - 16
	for range 3 { // the length prefixes grow with the padding: converge
		forged.ProducerEndpoint.Protocol = strings.Repeat("g", pad)
		pad += size - proto.Size(consumeReq(forged))
	}
	forged.ProducerEndpoint.Protocol = strings.Repeat("g", pad)
	req := consumeReq(forged)
	if n := proto.Size(req); n != size {
		t.Fatalf("padded request is %d bytes, want %d", n, size)
	}
	return req
}

// TestA1OversizeEndpointFieldsRejectedBeforeDial: a consume whose
// reference names the trusted producer but pads producer_endpoint.protocol
// (up to just under the consumer's own receive limit, so that the request
// the consumer would forward is larger than the producer's) is
// INVALID_ARGUMENT (SU-4) before the consumer dials anything; the consumer
// stays READY with nothing quarantined (SE-4), and the genuine reference
// is still consumable.
func TestA1OversizeEndpointFieldsRejectedBeforeDial(t *testing.T) {
	prodSrv, producer := startEngine(t, Config{Role: RoleEncoder, Backend: BackendTCP})
	consSrv, consumer := startEngine(t, Config{Role: RolePD, AcceptBackends: []string{BackendTCP}})
	ctx := context.Background()
	pub, err := producer.Generate(ctx, mediaPublish(imageItem(t, "video-001.png")))
	if err != nil || pub.Code() != codes.OK {
		t.Fatalf("publish: %v %v", pub.Status, err)
	}
	ref := pub.EncoderReady().GetRef()
	for _, c := range []struct {
		name string
		req  *pb.GenerateRequest
	}{
		{"protocol of 1 KiB", padToMessage(t, ref, proto.Size(consumeReq(ref))+1<<10)},
		{"the whole request 8 bytes under the consumer's receive limit", padToMessage(t, ref, MaxMessageBytes-8)},
		{"host of 300 bytes", func() *pb.GenerateRequest {
			r := proto.Clone(ref).(*pb.EncoderCacheRef)
			r.ProducerEndpoint.Host = strings.Repeat("h", 300)
			return consumeReq(r)
		}()},
		{"port 65536+port", func() *pb.GenerateRequest {
			r := proto.Clone(ref).(*pb.EncoderCacheRef)
			r.ProducerEndpoint.Port += 65536
			return consumeReq(r)
		}()},
	} {
		res, err := consumer.Generate(ctx, c.req)
		if err != nil {
			t.Fatal(err)
		}
		if res.Code() != codes.InvalidArgument || !strings.Contains(res.Status.Message(), "SU-4") || len(res.Status.Message()) > 1000 {
			t.Errorf("%s: consume = %v %.300q; want INVALID_ARGUMENT naming SU-4 (a short message)", c.name, res.Code(), res.Status.Message())
		}
		expectCalm(t, "consumer after "+c.name, consSrv)
		expectCalm(t, "producer after "+c.name, prodSrv)
	}
	res, err := consumer.Generate(ctx, consumeReq(ref))
	if err != nil || res.Code() != codes.OK {
		t.Errorf("the genuine reference after the forged ones = %v %v; want OK", res.Status, err)
	}
}

// TestA1TransferRequestBoundedBeforeSend: a consumer never sends a
// TransferEncoderCacheRequest larger than it knows its producer accepts
// (Config.MaxTransferRequestBytes): over it, the consume is the client's
// error, INVALID_ARGUMENT, before anything is sent, and never an uncertain
// outcome; the consumer stays READY and the reference, never sent, is
// consumed by a consumer with the default bound. Both transfer backends.
func TestA1TransferRequestBoundedBeforeSend(t *testing.T) {
	for _, backend := range []string{BackendTCP, BackendCUDAIPC} {
		t.Run(backend, func(t *testing.T) {
			fake := xfer.NewFakeIPC()
			prod := Config{Role: RoleEncoder, Backend: backend}
			cons := func(limit int, dev int) Config {
				c := Config{Role: RolePD, AcceptBackends: []string{backend}, MaxTransferRequestBytes: limit}
				if backend == BackendCUDAIPC {
					prod.IPCDevice, c.IPCDevice = fake.Device(0), fake.Device(dev)
				}
				return c
			}
			smallCfg, defaultCfg := cons(256, 1), cons(0, 2)
			prodSrv, producer := startEngine(t, prod)
			smallSrv, small := startEngine(t, smallCfg)
			_, consumer := startEngine(t, defaultCfg)
			ctx := context.Background()
			pub, err := producer.Generate(ctx, mediaPublish(imageItem(t, "video-001.png")))
			if err != nil || pub.Code() != codes.OK {
				t.Fatalf("publish: %v %v", pub.Status, err)
			}
			ref := pub.EncoderReady().GetRef()
			res, err := small.Generate(ctx, consumeReq(ref))
			if err != nil {
				t.Fatal(err)
			}
			if res.Code() != codes.InvalidArgument || !strings.Contains(res.Status.Message(), "256") {
				t.Errorf("consume whose transfer request exceeds the consumer's bound = %v; want INVALID_ARGUMENT naming the bound", res.Status)
			}
			expectCalm(t, "consumer with a 256-byte bound", smallSrv)
			expectCalm(t, "producer", prodSrv)
			if res, err := consumer.Generate(ctx, consumeReq(ref)); err != nil || res.Code() != codes.OK {
				t.Errorf("the same reference on a consumer with the default bound = %v %v; want OK (it was never sent)", res.Status, err)
			}
		})
	}
}

// TestA1ConfigRejectsTransferRequestBound: Config.MaxTransferRequestBytes
// outside 1..MaxMessageBytes is a configuration error.
func TestA1ConfigRejectsTransferRequestBound(t *testing.T) {
	for _, n := range []int{-1, MaxMessageBytes + 1} {
		if _, err := New(Config{Role: RolePD, Preset: "tiny", AcceptBackends: []string{BackendTCP}, MaxTransferRequestBytes: n}, nil); !errors.Is(err, ErrConfig) {
			t.Errorf("MaxTransferRequestBytes %d: New = %v; want ErrConfig", n, err)
		}
	}
}
