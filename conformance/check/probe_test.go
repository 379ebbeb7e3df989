package check

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeEngine answers GetServerInfo and GetModelInfo from fixed values; every
// other method is unused by Probe.
type fakeEngine struct {
	target.Engine // nil: any other call panics, proving Probe does not make it
	serverInfo    *pb.ServerInfo
	modelInfo     *pb.ModelInfo
	err           error // returned by both calls when set
	block         bool  // wait for the context to end
	gotModel      string
}

func (f *fakeEngine) GetServerInfo(ctx context.Context) (*pb.ServerInfo, error) {
	if f.block {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if f.err != nil {
		return nil, f.err
	}
	return f.serverInfo, nil
}

func (f *fakeEngine) GetModelInfo(ctx context.Context, model string) (*pb.ModelInfo, error) {
	f.gotModel = model
	if f.err != nil {
		return nil, f.err
	}
	return f.modelInfo, nil
}

// Generate answers UNIMPLEMENTED: the preflight's publishes find nothing
// to check on these fakes (preflight_test.go has engines that publish).
func (f *fakeEngine) Generate(context.Context, *pb.GenerateRequest) (*target.GenerateResult, error) {
	return &target.GenerateResult{Status: status.New(codes.Unimplemented, "fake")}, nil
}

func engineWith(role pb.EncoderRole) *fakeEngine {
	return &fakeEngine{
		serverInfo: &pb.ServerInfo{EngineName: "fake", SchemaRevision: 1},
		modelInfo:  &pb.ModelInfo{ModelId: "tiny", Encoder: &pb.EncoderCapabilities{Role: role, Backends: []string{"shared_dir"}}},
	}
}

func good() map[target.Role]target.Engine {
	return map[target.Role]target.Engine{
		target.RoleProducer: engineWith(pb.EncoderRole_ENCODER_ROLE_PRODUCER),
		target.RoleConsumer: engineWith(pb.EncoderRole_ENCODER_ROLE_CONSUMER),
		target.RoleBaseline: &fakeEngine{serverInfo: &pb.ServerInfo{SchemaRevision: 1}}, // no encoder extension needed
	}
}

func TestProbe(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(map[target.Role]target.Engine)
		wantErr error
		wantIn  []string // substrings of the error
	}{
		{name: "a baton.encoder.v1 target passes", edit: func(map[target.Role]target.Engine) {}},
		{
			name: "producer without ModelInfo.encoder",
			edit: func(m map[target.Role]target.Engine) {
				m[target.RoleProducer].(*fakeEngine).modelInfo.Encoder = nil
			},
			wantErr: ErrNotEncoderTarget,
			wantIn:  []string{"producer endpoint", "ModelInfo.encoder", "missing"},
		},
		{
			name: "consumer advertising the producer role",
			edit: func(m map[target.Role]target.Engine) {
				m[target.RoleConsumer] = engineWith(pb.EncoderRole_ENCODER_ROLE_PRODUCER)
			},
			wantErr: ErrProfileMismatch,
			wantIn:  []string{"endpoints.consumer", "ENCODER_ROLE_PRODUCER", "is ENGINE_ROLE_AGGREGATED and ENCODER_ROLE_CONSUMER", "pointed at the wrong process"},
		},
		{
			name: "producer advertising no role",
			edit: func(m map[target.Role]target.Engine) {
				m[target.RoleProducer] = engineWith(pb.EncoderRole_ENCODER_ROLE_UNSPECIFIED)
			},
			wantErr: ErrNotEncoderTarget,
			wantIn:  []string{"producer endpoint", "want ENCODER_ROLE_PRODUCER"},
		},
		{
			name: "prefill must consume",
			edit: func(m map[target.Role]target.Engine) {
				m[target.RolePrefill] = engineWith(pb.EncoderRole_ENCODER_ROLE_NONE)
			},
			wantErr: ErrProfileMismatch,
			wantIn:  []string{"endpoints.prefill", "ENCODER_ROLE_NONE", "ENGINE_ROLE_PREFILL and ENCODER_ROLE_CONSUMER"},
		},
		{
			name: "schema revision 0",
			edit: func(m map[target.Role]target.Engine) {
				m[target.RoleBaseline].(*fakeEngine).serverInfo.SchemaRevision = 0
			},
			wantErr: ErrNotEncoderTarget,
			wantIn:  []string{"baseline endpoint", "schema_revision is 0"},
		},
		{
			name: "Control service unimplemented",
			edit: func(m map[target.Role]target.Engine) {
				m[target.RoleConsumer] = &fakeEngine{err: status.Error(codes.Unimplemented, "unknown service openengine.v1.Control")}
			},
			wantErr: ErrNotEncoderTarget,
			wantIn:  []string{"consumer endpoint", "GetServerInfo", "Unimplemented"},
		},
		{
			name: "unreachable endpoint",
			edit: func(m map[target.Role]target.Engine) {
				m[target.RoleProducer] = &fakeEngine{err: status.Error(codes.Unavailable, "connection refused")}
			},
			wantErr: ErrUnreachable,
			wantIn:  []string{"producer endpoint", "connection refused"},
		},
		{
			name: "every problem is reported",
			edit: func(m map[target.Role]target.Engine) {
				m[target.RoleProducer] = &fakeEngine{err: status.Error(codes.Unavailable, "connection refused")}
				m[target.RoleConsumer].(*fakeEngine).modelInfo.Encoder = nil
			},
			wantErr: ErrNotEncoderTarget,
			wantIn:  []string{"producer endpoint", "consumer endpoint"},
		},
		{
			name: "other errors are reported as they are",
			edit: func(m map[target.Role]target.Engine) {
				m[target.RoleConsumer].(*fakeEngine).err = status.Error(codes.NotFound, "no model tiny")
			},
			wantIn: []string{"consumer endpoint", "no model tiny"},
		},
		{
			name:    "no endpoints",
			edit:    func(m map[target.Role]target.Engine) { clear(m) },
			wantErr: ErrNoEndpoints,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			engines := good()
			tt.edit(engines)
			err := Probe(context.Background(), target.NewStatic(target.Profile{Name: "fake", Model: "tiny"}, engines))
			if tt.wantErr == nil && tt.wantIn == nil {
				if err != nil {
					t.Fatalf("Probe = %v; want nil", err)
				}
				if got := engines[target.RoleProducer].(*fakeEngine).gotModel; got != "tiny" {
					t.Errorf("GetModelInfo asked for model %q; want the profile's %q", got, "tiny")
				}
				return
			}
			if err == nil {
				t.Fatal("Probe = nil; want an error")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Probe = %v; want errors.Is %v", err, tt.wantErr)
			}
			for _, s := range tt.wantIn {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Probe error %q does not mention %q", err, s)
				}
			}
		})
	}
}

// TestProbeDoesNotHang: a silent endpoint fails the probe when the
// caller's deadline (or ProbeTimeout) passes.
func TestProbeDoesNotHang(t *testing.T) {
	engines := good()
	engines[target.RoleConsumer] = &fakeEngine{block: true}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := Probe(ctx, target.NewStatic(target.Profile{}, engines))
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "consumer endpoint") {
		t.Errorf("Probe = %v; want ErrUnreachable naming the consumer endpoint", err)
	}
	if d := time.Since(start); d > ProbeTimeout {
		t.Errorf("Probe took %v; want it bounded by the context deadline", d)
	}
}

// TestProbeUnreachableGRPC dials a port nothing listens on through the real
// gRPC engine: the probe must fail fast with ErrUnreachable.
func TestProbeUnreachableGRPC(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	tg, err := target.Dial(target.Config{Profile: target.Profile{Name: "gone"}, Endpoints: map[target.Role]string{target.RoleProducer: addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	start := time.Now()
	err = Probe(context.Background(), tg)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "producer endpoint") {
		t.Errorf("Probe(%s) = %v; want ErrUnreachable naming the producer endpoint", addr, err)
	}
	if d := time.Since(start); d > ProbeTimeout+time.Second {
		t.Errorf("Probe took %v; want at most about ProbeTimeout (%v)", d, ProbeTimeout)
	}
}
