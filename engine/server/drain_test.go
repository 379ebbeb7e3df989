package server

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	pb "github.com/baton-dev/baton/proto/openengine/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// TestDrainEndsWithAClientThatNeverReads covers S-2/S-4: a client that opens a
// long Generate stream and never reads must not hold the drain forever
// (found by an attack run: the send blocked on flow control).
func TestDrainEndsWithAClientThatNeverReads(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(Config{Role: RoleAggregated, Preset: "tiny", ShutdownLinger: time.Millisecond}, lis, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(context.Background()) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err = pb.NewInferenceClient(conn).Generate(ctx, &pb.GenerateRequest{Input: &pb.GenerateRequest_Prompt{Prompt: "talk"},
		Stopping: &pb.StoppingOptions{MaxTokens: proto.Uint32(7000), IgnoreEos: proto.Bool(true)}})
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the request is in flight (it never finishes: nobody reads).
	for deadline := time.Now().Add(10 * time.Second); ; {
		srv.Engine.mu.Lock()
		n := srv.Engine.runningN
		srv.Engine.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("request never started")
		}
		time.Sleep(5 * time.Millisecond) // polling engine state, not synchronizing on time
	}
	resp, err := pb.NewControlClient(conn).Shutdown(context.Background(), &pb.ShutdownRequest{ExpectedInstanceId: srv.Engine.InstanceID(), DrainTimeoutMs: proto.Uint32(100)})
	if err != nil || resp.GetStatus() != pb.ShutdownStatus_SHUTDOWN_STATUS_ACCEPTED {
		t.Fatalf("Shutdown = %v, %v", resp, err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("S-2 drain did not end while a client never read its stream")
	}
}

// TestDrainReportsAMissedDeadline: a request that no cancellation reaches
// (attack F2 of stop 22: a decode that cannot be interrupted) and that
// outlives the drain deadline, the streams' closing and its grace makes
// the drain fail (S-4: exit 0 only after a clean drain within its
// deadline), instead of "drained cleanly" minutes late.
func TestDrainReportsAMissedDeadline(t *testing.T) {
	e, err := New(Config{Role: RoleAggregated, Preset: "tiny"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	e.running.Add(1) // a request that ignores its cancellation
	e.mu.Unlock()
	stuck := forceStopAfter + drainOverrunGrace + 500*time.Millisecond
	time.AfterFunc(10*time.Millisecond+stuck, e.running.Done)
	if err := e.Drain(10 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "S-4") || !strings.Contains(err.Error(), "after the drain deadline") {
		t.Errorf("Drain with a request stuck %v past its deadline = %v; want an S-4 error naming the missed deadline", stuck, err)
	}
}

// TestIdleConnectionClosedAfterHandshakeTimeout: a connection that sends
// nothing (not even the HTTP/2 preface) is closed once
// Config.HandshakeTimeout passes, so idle connections cannot hold the
// engine's file descriptors for gRPC's default two minutes (attack F5 of
// stop 22, SE-4).
func TestIdleConnectionClosedAfterHandshakeTimeout(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(Config{Role: RoleAggregated, Preset: "tiny", HandshakeTimeout: 100 * time.Millisecond}, lis, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() { cancel(); <-done }()
	conn, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	buf := make([]byte, 4096)
	for {
		if _, err := conn.Read(buf); err != nil { // the server's preface, then EOF once it closes
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("an idle connection still open after %v; want it closed after the 100 ms handshake timeout", time.Since(start).Round(time.Millisecond))
			}
			return
		}
	}
}
