package handoff

import (
	"errors"
	"strings"
	"testing"
)

// TestParseReferenceOuterFields: the fields of a reference outside its
// opaque state (backend, producer_instance_id, producer_endpoint) are
// bounded and well-formed before anything reads them further (SU-4,
// INVALID_ARGUMENT): the attack report's A1 padded producer_endpoint.protocol
// until the reference a consumer forwards to its producer was larger than
// the producer's receive limit. Ids that parse but could name something
// outside the producer's cache stay SU-5 (TestVerifyConfinement).
func TestParseReferenceOuterFields(t *testing.T) {
	opaque := sampleReference().Seal([]byte("k"))
	host253 := strings.Repeat(strings.Repeat("a", 62)+".", 4)[:252] + "b" // 253 bytes, labels of 62
	for _, c := range []struct {
		name     string
		backend  string
		producer string
		ep       Endpoint
		want     error // nil: parses
	}{
		{"the sample", "shared_dir", producerID, sampleEndpoint, nil},
		{"no endpoint", "shared_dir", producerID, Endpoint{}, nil},
		{"protocol empty", "tcp", producerID, Endpoint{"10.0.0.5", 50051, ""}, nil},
		{"a DNS name", "tcp", producerID, Endpoint{"encoder-0.example.internal", 50051, "grpc"}, nil},
		{"a DNS name with a trailing dot", "tcp", producerID, Endpoint{"encoder-0.example.internal.", 1, "grpc"}, nil},
		{"a name of 253 bytes", "tcp", producerID, Endpoint{host253, 65535, "grpc"}, nil},
		{"an IPv6 literal", "tcp", producerID, Endpoint{"::1", 7101, "grpc"}, nil},
		{"an upper-case UUID (SU-5, not SU-4)", "tcp", strings.ToUpper(producerID), sampleEndpoint, nil},
		{"a path as instance id (SU-5, not SU-4)", "tcp", "../../../../proc/self", sampleEndpoint, nil},
		{"an empty instance id (SU-5, not SU-4)", "shared_dir", "", sampleEndpoint, nil},
		{"an unknown backend (N-1, not SU-4)", "rdma", producerID, sampleEndpoint, nil},

		{"protocol of 64 MiB (A1)", "tcp", producerID, Endpoint{"10.0.0.5", 50051, strings.Repeat("g", 64<<20-4096)}, ErrMalformedReference},
		{"protocol of 33 bytes", "tcp", producerID, Endpoint{"10.0.0.5", 50051, strings.Repeat("g", MaxEndpointProtocolBytes+1)}, ErrMalformedReference},
		{"protocol with a space", "tcp", producerID, Endpoint{"10.0.0.5", 50051, "g rpc"}, ErrMalformedReference},
		{"protocol with a NUL", "tcp", producerID, Endpoint{"10.0.0.5", 50051, "grpc\x00"}, ErrMalformedReference},
		{"host of 254 bytes", "tcp", producerID, Endpoint{host253 + "c", 50051, "grpc"}, ErrMalformedReference},
		{"host of 1 MiB", "tcp", producerID, Endpoint{strings.Repeat("a", 1<<20), 50051, "grpc"}, ErrMalformedReference},
		{"host label of 64 bytes", "tcp", producerID, Endpoint{strings.Repeat("a", 64) + ".example", 50051, "grpc"}, ErrMalformedReference},
		{"host with an empty label", "tcp", producerID, Endpoint{"a..b", 50051, "grpc"}, ErrMalformedReference},
		{"host with a port", "tcp", producerID, Endpoint{"10.0.0.5:50051", 50051, "grpc"}, ErrMalformedReference},
		{"host in brackets", "tcp", producerID, Endpoint{"[::1]", 50051, "grpc"}, ErrMalformedReference},
		{"host with a slash", "tcp", producerID, Endpoint{"10.0.0.5/24", 50051, "grpc"}, ErrMalformedReference},
		{"host with a space", "tcp", producerID, Endpoint{"encoder 0", 50051, "grpc"}, ErrMalformedReference},
		{"host with non-ASCII", "tcp", producerID, Endpoint{"\xc3\xa9.example", 50051, "grpc"}, ErrMalformedReference},
		{"host label starting with a hyphen", "tcp", producerID, Endpoint{"-a.example", 50051, "grpc"}, ErrMalformedReference},
		{"port 0 with a host", "tcp", producerID, Endpoint{"10.0.0.5", 0, "grpc"}, ErrMalformedReference},
		{"port 65536", "tcp", producerID, Endpoint{"10.0.0.5", 65536, "grpc"}, ErrMalformedReference},
		{"port 2^32-1", "tcp", producerID, Endpoint{"10.0.0.5", 1<<32 - 1, "grpc"}, ErrMalformedReference},
		{"a port without a host", "tcp", producerID, Endpoint{"", 50051, "grpc"}, ErrMalformedReference},
		{"instance id of 1 MiB", "tcp", strings.Repeat("a", 1<<20), sampleEndpoint, ErrMalformedReference},
		{"instance id of 65 bytes", "tcp", strings.Repeat("a", MaxInstanceIDBytes+1), sampleEndpoint, ErrMalformedReference},
		{"instance id with a newline", "tcp", producerID + "\n", sampleEndpoint, ErrMalformedReference},
		{"backend of 1 MiB", strings.Repeat("t", 1<<20), producerID, sampleEndpoint, ErrMalformedReference},
		{"backend with a NUL", "tcp\x00", producerID, sampleEndpoint, ErrMalformedReference},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseReference(c.backend, c.producer, c.ep, opaque, 0)
			if c.want == nil {
				if err != nil {
					t.Fatalf("ParseReference = %v, want it to parse", err)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("ParseReference = %.200v, want %v", err, c.want)
			}
			if rule, code := Classify(err); rule != "SU-4" || code != CodeInvalidArgument {
				t.Errorf("Classify = %s %d, want SU-4 INVALID_ARGUMENT", rule, code)
			}
			if len(err.Error()) > 400 {
				t.Errorf("the error is %d bytes long; it must not echo the oversize field", len(err.Error()))
			}
		})
	}
}

// TestParseReferenceOuterBeforeOpaque: a malformed outer field is SU-4
// even when the opaque state is also malformed, and an oversize opaque
// state is still L-1 first (CONTRACT precedence: L-1 -> SU-4 -> H-3).
func TestParseReferenceOuterBeforeOpaque(t *testing.T) {
	bad := Endpoint{"10.0.0.5", 50051, strings.Repeat("g", 1<<20)}
	hash := strings.Repeat("0f", 32)
	badHash := strings.Replace(string(sampleReference().Seal([]byte("k"))), hash, strings.ToUpper(hash), 1)
	if _, err := ParseReference("tcp", producerID, bad, []byte(badHash), 0); !errors.Is(err, ErrMalformedReference) {
		t.Errorf("a malformed endpoint and a malformed hash = %v; want SU-4 (before H-3)", err)
	}
	if _, err := ParseReference("tcp", producerID, bad, make([]byte, MaxOpaqueStateBytes+1), 0); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a malformed endpoint and an oversize opaque state = %v; want L-1 (before SU-4)", err)
	}
}

// TestValidHost is the malformed-input test of ValidHost: DNS names and IP
// literals as a producer advertises them, and what a forged reference might
// put there instead.
func TestValidHost(t *testing.T) {
	for _, c := range []struct {
		host string
		ok   bool
	}{
		{"localhost", true}, {"127.0.0.1", true}, {"10.0.0.5", true}, {"e0.internal", true}, {"E0.Internal.", true},
		{"encoder_0.svc", true}, {"::", true}, {"::1", true}, {"1::", true}, {"fe80::1", true}, {"::ffff:10.0.0.1", true},
		{"1:2:3:4:5:6:7:8", true}, {"1:2:3:4:5:6:7::", true}, {"2001:DB8::A", true},
		{"", false}, {".", false}, {"..", false}, {"a.", true}, {".a", false}, {"a-", false}, {"a-.b", false}, {"-a", false},
		{":::", false}, {"1::2::3", false}, {"1:2:3:4:5:6:7:8:9", false}, {"1:2:3:4:5:6:7:8::", false}, {"12345::", false},
		{"fe80::1%eth0", false}, {"[::1]", false}, {"1:", false}, {":1", false}, {"::1.2.3", false}, {"::1.2.3.256", false},
		{"a b", false}, {"a\x00b", false}, {"a/b", false}, {"a:b", false}, {"a@b", false}, {"\xff", false},
		{strings.Repeat("a", 63), true}, {strings.Repeat("a", 64), false},
	} {
		if got := ValidHost(c.host); got != c.ok {
			t.Errorf("ValidHost(%q) = %v, want %v", c.host, got, c.ok)
		}
	}
}
