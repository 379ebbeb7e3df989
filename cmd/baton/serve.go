package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/baton-dev/baton/conformance/mutants"
	"github.com/baton-dev/baton/engine/server"
	"github.com/spf13/cobra"
)

func serveCommand() *cobra.Command {
	var (
		cfg       server.Config
		role      string
		listen    string
		readyFile string
		mutant    string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run one reference-engine role (encoder, pd, aggregated) over gRPC",
		Long: `Run one reference-engine instance speaking openengine.v1 Inference and Control
plus the baton.encoder.v1 extension, grpc.health.v1 and server reflection.

Roles: encoder (E, publishes encoder outputs to --cache-dir), pd (consumes
references from --cache-dir and generates tokens), aggregated (encodes and
generates in one process; the B-1 baseline).

SIGTERM or SIGINT drains exactly like an accepted Shutdown (CONTRACT S-1, S-2);
the process exits 0 after a clean drain and 4 otherwise (S-4).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Role = server.Role(role)
			if mutant != "" {
				m, err := mutants.ByName(mutant)
				if err != nil {
					return exitError{ExitUsage, err.Error()}
				}
				m.Apply(&cfg.Hooks)
			}
			log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			if mutant != "" {
				log = log.With("mutant", mutant)
			}
			lis, err := net.Listen("tcp", listen)
			if err != nil {
				return exitError{ExitEngine, fmt.Sprintf("listen %s: %v", listen, err)}
			}
			srv, err := server.NewServer(cfg, lis, log)
			if err != nil {
				lis.Close()
				return exitError{ExitEngine, err.Error()}
			}
			if readyFile != "" {
				tmp := readyFile + ".tmp"
				if err := os.WriteFile(tmp, []byte(lis.Addr().String()+"\n"), 0o644); err != nil {
					return exitError{ExitEngine, err.Error()}
				}
				if err := os.Rename(tmp, readyFile); err != nil {
					return exitError{ExitEngine, err.Error()}
				}
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			if err := srv.Run(ctx); err != nil {
				return exitError{ExitEngine, err.Error()}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&role, "role", "", "engine role: encoder, pd or aggregated (required)")
	f.StringVar(&listen, "listen", "127.0.0.1:7100", "host:port to listen on (port 0 picks a free one)")
	f.StringVar(&readyFile, "ready-file", "", "write the bound address to this file once listening")
	f.StringVar(&cfg.Preset, "preset", "base", "encoder preset: tiny (224px, tests), base (336px), large (448px)")
	f.StringVar(&cfg.CacheDir, "cache-dir", "", "shared directory root for encoder outputs (encoder and pd roles)")
	f.StringVar(&cfg.AdvertiseControl, "advertise-control", "", "host:port put in references as the producer's control endpoint (default: the listen address)")
	f.Int64Var(&cfg.ProducerQuotaBytes, "producer-quota-bytes", 256<<20, "bound on published payload bytes (CONTRACT L-5)")
	f.Int64Var(&cfg.ConsumerQuotaBytes, "consumer-quota-bytes", 256<<20, "bound on receive bytes in flight (CONTRACT L-5)")
	f.DurationVar(&cfg.DefaultTTL, "ttl", 60*time.Second, "TTL of a published entry without ttl_ms (CONTRACT X-2)")
	f.DurationVar(&cfg.DrainTimeout, "drain-timeout", 30*time.Second, "drain deadline when Shutdown gives none (CONTRACT S-2)")
	f.StringVar(&mutant, "mutant", "", "run a deliberately broken engine from conformance/mutants (testing the suite only)")
	_ = f.MarkHidden("mutant")
	_ = cmd.MarkFlagRequired("role")
	return cmd
}
