package main

import (
	"context"
	"errors"
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
		metrics   string
		logLevel  string
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run one reference-engine role (encoder, pd, prefill, decode, aggregated) over gRPC",
		Long: `Run one reference-engine instance speaking openengine.v1 Inference and Control
plus the baton.encoder.v1 extension, grpc.health.v1 and server reflection.

Roles: encoder (E, publishes encoder outputs to --cache-dir, over tcp
with --backend tcp, or from GPU memory with --backend cuda_ipc), pd (consumes references and generates tokens), prefill
(P of E+P+D: consumes a reference, runs prefill only and ends with
PrefillReady carrying a KV session and a decode preparation), decode (D of
E+P+D: reads P's KV session through its tcp transfer agent and decodes;
never takes media or references), aggregated (encodes and generates in one
process; the B-1 baseline).

GPU: --device cuda:N runs the encoder (roles encoder, aggregated) on CUDA
device N; Health then carries a "gpu" check with the NVML inventory.
--backend cuda_ipc (encoder) and cuda_ipc in --accept-backends (pd, prefill)
need a GPU: without one the engine refuses to start and says why.

Trusted peers (CONTRACT SE-3): no request makes the engine connect anywhere
but to the peers listed here, and with no list it trusts none. A consumer
(pd, prefill) dials a tcp or cuda_ipc reference's producer endpoint only if
it is in --trusted-producers (else FAILED_PRECONDITION, before any
connection); decode dials P's control endpoint and READs from P's transfer
agent only if both are in --trusted-producers; a tcp encoder WRITEs only
into consumer transfer agents in --trusted-consumers (the address in the
agent metadata, i.e. the consumer's --transfer-listen). Entries are
host:port (exactly that endpoint), host (any port of it) or address/bits
(any port in the prefix); names are compared, never resolved. Loopback is
not trusted by itself: on a host shared with other users list host:port.
shared_dir references dial nothing and need no list. Example (E+PD over
tcp on one host):
  baton serve --role encoder --backend tcp --listen 127.0.0.1:7101 --trusted-consumers 127.0.0.1:7202
  baton serve --role pd --listen 127.0.0.1:7102 --transfer-listen 127.0.0.1:7202 --trusted-producers 127.0.0.1:7101

SIGTERM or SIGINT drains exactly like an accepted Shutdown (CONTRACT S-1, S-2);
the process exits 0 after a clean drain (S-4), 3 for a bad flag or
configuration, and 4 otherwise.

Operating it:
  Logs are JSON lines on stderr (log/slog). Every request that ends with a
  non-OK status is logged ("request rejected", or "request failed" at error
  level for INTERNAL) with rule (the CONTRACT rule ID that decided it, "none"
  if none did), code, request_id, trace_id and span_id, at most 50 lines at
  once and 10 a second per rule: the lines a flood drops are counted in
  "suppressed" on the next line of that rule (baton_rejections_total counts
  them all).
  Health: grpc.health.v1 (service "") says SERVING only while Health is
  READY, NOT_SERVING while NOT_READY (a quarantine, X-1) or DRAINING
  (CONTRACT SE-5). A quarantine (Q-1, Q-3) lasts until the transport proves
  nothing can touch its memory (Q-6): on a consumer, until the connections
  that carried the transfer have closed (the producer closed them or ended,
  or keepalive found it dead); on a producer, until its WRITE has ended.
  A full cache directory (ENOSPC) answers publishes RESOURCE_EXHAUSTED and
  shows a cache_dir check; the engine stays READY.
  Tracing: a W3C traceparent (and tracestate) in the gRPC metadata is read on
  every RPC; its trace id is logged as trace_id and carried on to calls the
  engine makes for the request. Without one, the engine starts a new trace.
  Metrics: --metrics-listen host:port serves Prometheus /metrics (off by
  default): baton_handoff_{published,consumed,released,expired}_total,
  baton_rejections_total{rule,code}, baton_quarantine_{buffers,bytes},
  baton_cleanup_failures_total, baton_handoff_{publish,consume}_seconds and
  baton_generate_seconds histograms, gauges for entries, bytes, in-flight
  receives, pending cleanups and health, plus Go and process metrics.

TLS (CONTRACT SE-1):
  --tls-cert FILE --tls-key FILE serve TLS on every listener: gRPC,
  --metrics-listen and the tcp transfer agent's data connections.
  --tls-client-ca FILE also requires a client certificate signed by one of
  its CAs on every listener (mTLS): a peer without a valid one fails the TLS
  handshake before any handler runs. An engine that serves TLS dials its
  peers (the producer's Control, P's Control, other transfer agents) over
  TLS too, verifying them against --tls-ca (default: --tls-client-ca, else
  the system roots) and presenting its own certificate as client
  certificate; give each engine one certificate with both server and client
  key usage and its address (e.g. IP 127.0.0.1) as a subject alternative
  name.

Authorization (CONTRACT SE-2):
  --operator-token-file FILE and/or --operator-identity NAME turn it on.
  Shutdown and Abort(all_requests) are then operator calls; anyone else gets
  PERMISSION_DENIED. The operator sends the token as gRPC metadata
  "authorization: Bearer <token>", or presents a verified client certificate
  whose subject common name or a DNS, URI or e-mail alternative name is NAME
  (needs --tls-client-ca). Abort(request_id) cancels only a request of the
  same caller (identified by its bearer token, else its client certificate's
  subject; the operator may cancel any): another caller's running request
  answers PERMISSION_DENIED and keeps running; a request started without
  either credential can be aborted only by the operator. Malformed
  authorization metadata on an operator call or Abort is UNAUTHENTICATED.

Decode budget (CONTRACT SE-4):
  Every request reserves 8 bytes per pixel its images' headers declare
  before decoding, held until the request ends; --decode-budget-bytes bounds
  the reservations of all requests together (default 512 MiB; at least 8
  bytes * --max-request-pixels, the L-6 bound on one request's pixels: a
  smaller budget needs a lower --max-request-pixels with it; a progressive
  JPEG is charged up to 20 bytes a pixel). A request that finds no room within
  --decode-wait gets RESOURCE_EXHAUSTED (retryable). At most --max-concurrent-decodes images decode at once
  (default: GOMAXPROCS - 1, at least 1), so Health keeps answering.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Role = server.Role(role)
			if mutant != "" {
				m, err := mutants.ByName(mutant)
				if err != nil {
					return exitError{ExitUsage, err.Error()}
				}
				if !(m.SparesBaseline && cfg.Role == server.RoleAggregated) {
					m.Apply(&cfg.Hooks)
				}
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return exitError{ExitUsage, fmt.Sprintf("--log-level %q: want debug, info, warn or error", logLevel)}
			}
			log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			if mutant != "" {
				log = log.With("mutant", mutant)
			}
			var mlis net.Listener
			if metrics != "" {
				// Bound before the engine starts, so a busy port leaves nothing behind.
				l, err := net.Listen("tcp", metrics)
				if err != nil {
					return exitError{ExitEngine, fmt.Sprintf("--metrics-listen %s: %v", metrics, err)}
				}
				mlis = l
			}
			lis, err := net.Listen("tcp", listen)
			if err != nil {
				if mlis != nil {
					mlis.Close()
				}
				return exitError{ExitEngine, fmt.Sprintf("listen %s: %v", listen, err)}
			}
			srv, err := server.NewServer(cfg, lis, log)
			if err != nil {
				lis.Close()
				if mlis != nil {
					mlis.Close()
				}
				if errors.Is(err, server.ErrConfig) {
					return exitError{ExitUsage, err.Error()}
				}
				return exitError{ExitEngine, err.Error()}
			}
			if mlis != nil {
				defer srv.ServeMetrics(mlis)()
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
	f.StringVar(&role, "role", "", "engine role: encoder, pd, prefill, decode or aggregated (required)")
	f.StringVar(&listen, "listen", "127.0.0.1:7100", "host:port to listen on (port 0 picks a free one)")
	f.StringVar(&readyFile, "ready-file", "", "write the bound address to this file once listening")
	f.StringVar(&cfg.Preset, "preset", "base", "encoder preset: tiny (224px, tests), base (336px), large (448px)")
	f.StringVar(&cfg.CacheDir, "cache-dir", "", "shared directory root for encoder outputs (encoder, pd and prefill roles)")
	f.StringVar(&cfg.Backend, "backend", "shared_dir", "the encoder's backend: shared_dir (files in --cache-dir), tcp (NIXL-style WRITE over TCP) or cuda_ipc (device memory lent by CUDA IPC handle; needs a GPU)")
	f.StringSliceVar(&cfg.AcceptBackends, "accept-backends", nil, "backends a consumer accepts (default: shared_dir if --cache-dir is set, tcp, and cuda_ipc with --device cuda:N) (CONTRACT N-1)")
	f.StringVar(&cfg.Device, "device", "cpu", "where the engine computes: cpu, or cuda:N (the CUDA encoder on device N, and the cuda_ipc backend's device)")
	f.StringVar(&cfg.TransferListen, "transfer-listen", "127.0.0.1:0", "where the tcp transfer agent listens (a tcp producer must list this address in its --trusted-consumers)")
	f.StringSliceVar(&cfg.TrustedProducers, "trusted-producers", nil, "producer control endpoints a consumer may dial, and for decode P's control endpoints and transfer agents: host:port, host or address/bits, comma-separated (CONTRACT SE-3; default: none)")
	f.StringSliceVar(&cfg.TrustedConsumers, "trusted-consumers", nil, "consumer transfer agents (their --transfer-listen) a tcp encoder may WRITE into: host:port, host or address/bits, comma-separated (CONTRACT SE-3; default: none)")
	f.DurationVar(&cfg.TransferTimeout, "transfer-timeout", 10*time.Second, "deadline of one TransferEncoderCache call and of the producer's WRITE (CONTRACT Q-1)")
	f.BoolVar(&cfg.TestHooks, "test-hooks", false, "honour the baton.* test hooks in GenerateRequest.extra (CONTRACT section 4); never in production")
	f.StringVar(&cfg.AdvertiseControl, "advertise-control", "", "host:port put in references as the producer's control endpoint (default: the listen address)")
	f.Int64Var(&cfg.ProducerQuotaBytes, "producer-quota-bytes", 256<<20, "bound on published payload bytes (CONTRACT L-5)")
	f.Int64Var(&cfg.ConsumerQuotaBytes, "consumer-quota-bytes", 256<<20, "bound on receive bytes in flight (CONTRACT L-5)")
	f.DurationVar(&cfg.DefaultTTL, "ttl", 60*time.Second, "TTL of a published entry without ttl_ms (CONTRACT X-2)")
	f.DurationVar(&cfg.DrainTimeout, "drain-timeout", 30*time.Second, "drain deadline when Shutdown gives none (CONTRACT S-2)")
	f.StringVar(&cfg.ExecutorMode, "executor-mode", server.ExecutorAsync, "encoder steps: async (each batch on its own goroutine, completion as an event) or sync (inside the scheduling step)")
	f.IntVar(&cfg.MaxBatchRequests, "max-batch-requests", 8, "requests per encoder batch; requests that arrive while a batch encodes wait for the next one")
	f.IntVar(&cfg.TensorParallel, "tp", 1, "simulated tensor-parallel ranks of the executor: every rank takes each scheduling decision, a divergence makes Health NOT_READY")
	f.StringVar(&cfg.ModelArchitecture, "model-architecture", "decoder-only", "language side: decoder-only (embeddings merged into the prompt) or encoder-decoder (cross-attention KV from the encoder output; not for prefill/decode)")
	f.StringVar(&metrics, "metrics-listen", "", "host:port to serve Prometheus /metrics on (default: off; TLS with --tls-cert)")
	f.StringVar(&cfg.Security.CertFile, "tls-cert", "", "PEM certificate chain served on every listener (CONTRACT SE-1); with --tls-key")
	f.StringVar(&cfg.Security.KeyFile, "tls-key", "", "PEM private key of --tls-cert")
	f.StringVar(&cfg.Security.ClientCAFile, "tls-client-ca", "", "PEM CA bundle: every listener requires a client certificate it signed (mTLS)")
	f.StringVar(&cfg.Security.PeerCAFile, "tls-ca", "", "PEM CA bundle for the certificates of peers this engine dials (default: --tls-client-ca, else the system roots)")
	f.StringVar(&cfg.Security.OperatorTokenFile, "operator-token-file", "", "file holding the operator's bearer token: Shutdown and Abort(all_requests) become operator calls (CONTRACT SE-2)")
	f.StringSliceVar(&cfg.Security.OperatorIdentities, "operator-identity", nil, "client-certificate name (subject CN or a DNS/URI/e-mail SAN) that is an operator (CONTRACT SE-2; needs --tls-client-ca)")
	f.Int64Var(&cfg.MaxRequestPixels, "max-request-pixels", server.MaxRequestPixels, "bound on the decoded pixels of all a request's images together (CONTRACT L-6); the decode budget must hold 8 bytes for each")
	f.Int64Var(&cfg.DecodeBudget.MaxBytes, "decode-budget-bytes", server.DefaultDecodeBudgetBytes, "bound on decoded image bytes (8 per pixel, up to 20 for a progressive JPEG) reserved by all requests together (CONTRACT SE-4)")
	f.IntVar(&cfg.DecodeBudget.MaxConcurrent, "max-concurrent-decodes", 0, "images decoded at once (0 = GOMAXPROCS - 1, at least 1) (CONTRACT SE-4)")
	f.DurationVar(&cfg.DecodeBudget.Wait, "decode-wait", server.DefaultDecodeWait, "how long a request waits for room in the decode budget before RESOURCE_EXHAUSTED (negative: no wait)")
	f.DurationVar(&cfg.HandshakeTimeout, "handshake-timeout", 10*time.Second, "how long an accepted connection may take to finish its TLS and HTTP/2 handshakes before it is closed (SE-4: idle connections hold no descriptor longer)")
	f.StringVar(&logLevel, "log-level", "info", "least level logged: debug, info, warn or error")
	f.StringVar(&mutant, "mutant", "", "run a deliberately broken engine from conformance/mutants (testing the suite only)")
	_ = f.MarkHidden("mutant")
	_ = cmd.MarkFlagRequired("role")
	return cmd
}
