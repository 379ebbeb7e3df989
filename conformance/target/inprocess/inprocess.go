// Package inprocess is the Target adapter for the reference engine started
// inside the calling process: E, PD and an aggregated baseline on loopback
// gRPC listeners sharing a temporary cache directory. Tests use it where
// starting processes is not needed; the demo and the CI suite use real
// processes (conformance/launch).
package inprocess

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/baton-dev/baton/conformance/target"
	"github.com/baton-dev/baton/engine/server"
)

// Options configure the in-process topology.
type Options struct {
	// Preset is the encoder preset ("tiny" for tests).
	Preset string
	// CacheDir is the shared directory root (a fresh temp dir is best).
	CacheDir string
	// Hooks are applied to every engine (conformance/mutants); zero for the real engine.
	Hooks server.Hooks
	// ProducerQuotaBytes is the producer's L-5 bound (default 16 MiB, so the
	// L-5 case reaches it in a few dozen tiny publishes).
	ProducerQuotaBytes int64
	// TestHooks starts every engine with the baton.* test hooks honoured
	// (CONTRACT section 4) and the profile claims the Lifecycle level.
	TestHooks bool
	// CollectInterval is how often the producer's collector runs (X-2;
	// 0 keeps the engine's 200 ms).
	CollectInterval time.Duration
	// Log receives the engines' logs (nil discards).
	Log *slog.Logger
	// OnListen, when set, is told each role's listening address
	// (host:port), so a test can write a target profile for it.
	OnListen func(role target.Role, address string)
}

// StartEPD starts E, PD and the baseline and returns the Target and a stop
// function that drains all three (S-2) and returns the first drain error.
func StartEPD(opts Options) (*target.Static, func() error, error) {
	if opts.ProducerQuotaBytes == 0 {
		opts.ProducerQuotaBytes = 16 << 20
	}
	var (
		stops   []func() error
		engines = map[target.Role]target.Engine{}
	)
	stopAll := func() error {
		var errs []error
		for _, s := range stops {
			errs = append(errs, s())
		}
		return errors.Join(errs...)
	}
	for _, r := range []struct {
		role server.Role
		as   target.Role
	}{{server.RoleEncoder, target.RoleProducer}, {server.RolePD, target.RoleConsumer}, {server.RoleAggregated, target.RoleBaseline}} {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			stopAll()
			return nil, nil, fmt.Errorf("inprocess: %w", err)
		}
		cfg := server.Config{Role: r.role, Preset: opts.Preset, CacheDir: opts.CacheDir, Hooks: opts.Hooks, ShutdownLinger: time.Millisecond, ProducerQuotaBytes: opts.ProducerQuotaBytes, TestHooks: opts.TestHooks, CollectInterval: opts.CollectInterval}
		if r.role == server.RoleAggregated {
			cfg.CacheDir = ""
		}
		srv, err := server.NewServer(cfg, lis, opts.Log)
		if err != nil {
			lis.Close()
			stopAll()
			return nil, nil, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Run(ctx) }()
		eng, err := target.DialEngine(lis.Addr().String())
		if err != nil {
			cancel()
			stopAll()
			return nil, nil, err
		}
		engines[r.as] = eng
		if opts.OnListen != nil {
			opts.OnListen(r.as, lis.Addr().String())
		}
		stops = append(stops, func() error {
			cancel()
			err := <-done
			eng.Close()
			return err
		})
	}
	profile := target.Profile{
		Name: "baton reference engine (in-process E+PD)", Topologies: []string{"E+PD"}, Backends: []string{server.BackendSharedDir},
		Level: "core", Observables: true, Destructive: false, ProducerQuotaBytes: opts.ProducerQuotaBytes, ReferenceFormat: "baton-json-v1", CaseTimeout: time.Minute,
	}
	if opts.TestHooks {
		profile.Level, profile.TestHooks = "lifecycle", true
	}
	return target.NewStatic(profile, engines), stopAll, nil
}
