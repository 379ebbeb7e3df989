package target

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"

	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The test binary doubles as a minimal engine for the launch tests: run
// with BATON_TEST_FAKE_ENGINE=host:port it serves the Control service
// there (Health READY, GetServerInfo with a fresh instance id, Shutdown as
// CONTRACT S-1: empty id INVALID_ARGUMENT, foreign FAILED_PRECONDITION,
// own ACCEPTED, then exit 0) until shut down or SIGTERMed. It is not a
// baton binary, so nothing in launch may assume one.
const fakeEngineEnv = "BATON_TEST_FAKE_ENGINE"

// fakeNotReadyEnv makes the fake answer Health NOT_READY.
const fakeNotReadyEnv = "BATON_TEST_FAKE_NOT_READY"

func TestMain(m *testing.M) {
	if addr := os.Getenv(fakeEngineEnv); addr != "" {
		os.Exit(runFakeEngine(addr))
	}
	os.Exit(m.Run())
}

func runFakeEngine(addr string) int {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake engine:", err)
		return 3
	}
	srv := grpc.NewServer()
	f := newFakeControl(os.Getenv(fakeNotReadyEnv) != "")
	pb.RegisterControlServer(srv, f)
	go func() {
		<-f.shut
		srv.GracefulStop() // the ACCEPTED answer leaves first
	}()
	fmt.Println("fake engine listening on", lis.Addr())
	if err := srv.Serve(lis); err != nil {
		fmt.Fprintln(os.Stderr, "fake engine:", err)
		return 4
	}
	return 0
}

// fakeControl is the fake engine's Control service.
type fakeControl struct {
	pb.UnimplementedControlServer
	id       string
	notReady bool
	once     sync.Once
	shut     chan struct{}
}

func newFakeControl(notReady bool) *fakeControl {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &fakeControl{id: hex.EncodeToString(b[:]), notReady: notReady, shut: make(chan struct{})}
}

func (f *fakeControl) Health(context.Context, *pb.HealthRequest) (*pb.HealthResponse, error) {
	if f.notReady {
		return &pb.HealthResponse{State: pb.HealthState_HEALTH_STATE_NOT_READY}, nil
	}
	return &pb.HealthResponse{State: pb.HealthState_HEALTH_STATE_READY}, nil
}

func (f *fakeControl) GetServerInfo(context.Context, *pb.GetServerInfoRequest) (*pb.ServerInfo, error) {
	return &pb.ServerInfo{InstanceId: f.id, SchemaRevision: 1}, nil
}

func (f *fakeControl) Shutdown(_ context.Context, req *pb.ShutdownRequest) (*pb.ShutdownResponse, error) {
	switch req.GetExpectedInstanceId() {
	case "":
		return nil, status.Error(codes.InvalidArgument, "expected_instance_id is empty")
	case f.id:
	default:
		return nil, status.Error(codes.FailedPrecondition, "not this instance")
	}
	st := pb.ShutdownStatus_SHUTDOWN_STATUS_ALREADY_SHUTTING_DOWN
	f.once.Do(func() {
		st = pb.ShutdownStatus_SHUTDOWN_STATUS_ACCEPTED
		close(f.shut)
	})
	return &pb.ShutdownResponse{Status: st}, nil
}

// startFakeInProcess serves a fake engine in this process (an instance
// baton did not start, for adoption); stop ends it.
func startFakeInProcess(t *testing.T, notReady bool) (addr string, f *fakeControl) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	f = newFakeControl(notReady)
	pb.RegisterControlServer(srv, f)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	go func() {
		<-f.shut
		srv.GracefulStop() // the ACCEPTED answer leaves first
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return lis.Addr().String(), f
}

// freeAddr returns a loopback address nothing listens on (just now).
func freeAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}
