package server

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/engine/xfer"
	"github.com/baton-dev/baton/fixtures"
	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// startEngine runs one in-process engine on a loopback port. The engines
// one top-level test starts trust each other as peers (SE-3): each one's
// control address and transfer agent are among the others' trusted
// producers and consumers (startEngineAlone starts one that trusts none).
func startEngine(t testing.TB, cfg Config) (*Server, *target.GRPCEngine) {
	t.Helper()
	return startEngineLogging(t, cfg, nil)
}

// startEngineLogging is startEngine with the engine's logs going to log
// (nil discards them); the engine drains at the end of the test.
func startEngineLogging(t testing.TB, cfg Config, log *slog.Logger) (*Server, *target.GRPCEngine) {
	t.Helper()
	srv, eng := startEngineAlone(t, cfg, log)
	testPeers.join(t, srv)
	return srv, eng
}

// testPeers groups the engines of each top-level test (testing.TB's name
// up to the first "/") so that they trust each other (SE-3).
var testPeers = peerGroups{groups: map[string][]*Server{}}

type peerGroups struct {
	mu     sync.Mutex
	groups map[string][]*Server
}

func (g *peerGroups) join(t testing.TB, srv *Server) {
	t.Helper()
	top, _, _ := strings.Cut(t.Name(), "/")
	g.mu.Lock()
	others := g.groups[top]
	g.groups[top] = append(others, srv)
	g.mu.Unlock()
	t.Cleanup(func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		list := g.groups[top]
		for i, s := range list {
			if s == srv {
				g.groups[top] = append(list[:i:i], list[i+1:]...)
				break
			}
		}
		if len(g.groups[top]) == 0 {
			delete(g.groups, top)
		}
	})
	for _, o := range others {
		trustMutually(t, srv, o)
	}
}

// peerAddresses are a server's control address and, if it runs one, its
// transfer agent's address.
func peerAddresses(t testing.TB, s *Server) []string {
	t.Helper()
	addrs := []string{s.lis.Addr().String()}
	if s.Engine.agent != nil {
		md, err := s.Engine.agent.LocalMetadata()
		if err != nil {
			return addrs // stopped: its agent is closed
		}
		m, err := xfer.ParseMetadata(md)
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, m.Address)
	}
	return addrs
}

// trustMutually makes a and b trusted producers and consumers of each other.
func trustMutually(t testing.TB, a, b *Server) {
	t.Helper()
	ofA, ofB := peerAddresses(t, a), peerAddresses(t, b)
	if err := a.Engine.TrustPeers(ofB, ofB); err != nil {
		t.Fatal(err)
	}
	if err := b.Engine.TrustPeers(ofA, ofA); err != nil {
		t.Fatal(err)
	}
}

// startEngineAlone is startEngineLogging for an engine that trusts no
// peer unless cfg says so.
func startEngineAlone(t testing.TB, cfg Config, log *slog.Logger) (*Server, *target.GRPCEngine) {
	srv, addr := serveEngine(t, cfg, log)
	eng, err := target.DialEngine(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return srv, eng
}

// serveEngine runs one in-process engine on a loopback port and returns it
// and its address; it drains at the end of the test (after the cleanups
// registered later, such as closing connections to it).
func serveEngine(t testing.TB, cfg Config, log *slog.Logger) (*Server, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Preset == "" {
		cfg.Preset = "tiny"
	}
	srv, err := NewServer(cfg, lis, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("S-4 drain of %s: %v", cfg.Role, err)
		}
	})
	return srv, lis.Addr().String()
}

func imageItem(t testing.TB, name string) *pb.MediaItem {
	t.Helper()
	img, err := fixtures.ImageByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return &pb.MediaItem{Modality: pb.Modality_MODALITY_IMAGE, Source: &pb.MediaItem_RawBytes{RawBytes: img.Data}}
}

func TestPublishConsumeMatchesBaseline(t *testing.T) {
	dir := t.TempDir()
	_, producer := startEngine(t, Config{Role: RoleEncoder, CacheDir: dir})
	_, consumer := startEngine(t, Config{Role: RolePD, CacheDir: dir})
	_, baseline := startEngine(t, Config{Role: RoleAggregated})
	ctx := context.Background()
	names := []string{}
	for _, im := range fixtures.Images() {
		names = append(names, im.Name)
	}
	if len(names) < 2 {
		t.Fatalf("want at least 2 fixture images, have %v", names)
	}
	stop := &pb.StoppingOptions{MaxTokens: proto.Uint32(24)}
	answers := map[string]bool{}
	for _, name := range names[:3] {
		item := imageItem(t, name)
		pub, err := producer.Generate(ctx, &pb.GenerateRequest{RequestId: "p-" + name, Media: []*pb.MediaItem{item},
			Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Publish{Publish: &pb.EncoderPublish{}}}})
		if err != nil || pub.Code() != codes.OK || pub.EncoderReady() == nil {
			t.Fatalf("publish %s = %v, %v; want OK with EncoderReady", name, pub.Status, err)
		}
		ref := pub.EncoderReady().GetRef()
		got, _ := consumer.Generate(ctx, &pb.GenerateRequest{RequestId: "c-" + name, Input: &pb.GenerateRequest_Prompt{Prompt: "<image> Describe the image."},
			Stopping: stop, Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Consume{Consume: ref}}})
		want, _ := baseline.Generate(ctx, &pb.GenerateRequest{RequestId: "b-" + name, Input: &pb.GenerateRequest_Prompt{Prompt: "<image> Describe the image."},
			Stopping: stop, Media: []*pb.MediaItem{item}})
		if got.Code() != codes.OK || want.Code() != codes.OK {
			t.Fatalf("%s: consume %v, baseline %v", name, got.Status, want.Status)
		}
		if !proto.Equal(got.Usage(), want.Usage()) || len(got.TokenIDs()) == 0 || got.Text() != want.Text() {
			t.Errorf("B-1 %s: E+PD %q usage %v; baseline %q usage %v", name, got.Text(), got.Usage(), want.Text(), want.Usage())
		}
		answers[want.Text()] = true
		replay, _ := consumer.Generate(ctx, &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: "x"},
			Encoder: &pb.EncoderOptions{Mode: &pb.EncoderOptions_Consume{Consume: ref}}})
		if replay.Code() != codes.InvalidArgument || len(replay.TokenIDs()) != 0 {
			t.Errorf("SU-2 replay = %v, %d tokens; want INVALID_ARGUMENT before any token", replay.Status, len(replay.TokenIDs()))
		}
		ab, err := producer.Abort(ctx, &pb.AbortRequest{Target: &pb.AbortRequest_EncoderCache{EncoderCache: ref}})
		if err != nil || ab.GetStatus() != pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED {
			t.Errorf("SU-3 Abort of a consumed reference = %v, %v; want ALREADY_FINISHED", ab.GetStatus(), err)
		}
	}
	if len(answers) < 2 {
		t.Errorf("B-2 three different images gave %d distinct answers", len(answers))
	}
}
