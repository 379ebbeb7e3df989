package server

import (
	"context"
	"strings"
	"testing"

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
