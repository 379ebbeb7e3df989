package reports

import (
	"math"
	"sort"
)

// Bounds on what a transcript keeps, so a looping case cannot blow up
// results.json or report.html.
const (
	// TranscriptMaxCalls is the most calls kept per case; later calls are
	// only counted (CaseResult.TranscriptDroppedCalls).
	TranscriptMaxCalls = 64
	// TranscriptMaxRunes bounds each request or response summary (runes).
	TranscriptMaxRunes = 400
	// LatencyMaxSamples bounds each LatencySeries; later samples are dropped.
	LatencyMaxSamples = 10000
)

// Call is one recorded call of a case to the target, redacted: opaque
// reference state appears only as its length, media only as their size and
// a SHA-256 prefix.
type Call struct {
	// Role is the endpoint called ("producer", "consumer", "baseline", ...).
	Role string `json:"role" yaml:"role"`
	// Method is the RPC ("Generate", "Abort", "GetLoad", ...).
	Method string `json:"method" yaml:"method"`
	// Request summarizes the request, e.g.
	// `publish media=[image/png 1234 B sha256:3f2a9c01]`.
	Request string `json:"request" yaml:"request"`
	// Code is the gRPC code of the answer ("OK", "INVALID_ARGUMENT"), or
	// "harness error" when the call never reached an answer.
	Code string `json:"code" yaml:"code"`
	// Response summarizes the answer, e.g. `EncoderReady(ref shared_dir
	// opaque_state=412 B, 1 item)` or `12 tokens, finished STOP`.
	Response string `json:"response,omitempty" yaml:"response,omitempty"`
	// StartMs is when the call started, in milliseconds since the case's
	// first recorded call.
	StartMs float64 `json:"start_ms" yaml:"start_ms"`
	// LatencyMs is the call's duration in milliseconds (for Generate, until
	// the stream closed).
	LatencyMs float64 `json:"latency_ms" yaml:"latency_ms"`
}

// Handoff phases of a LatencySeries.
const (
	// PhasePublish: a Generate with encoder.publish on the producer, until
	// the stream closed after EncoderReady.
	PhasePublish = "publish"
	// PhaseConsume: a Generate with encoder.consume on a consumer (PD or P),
	// until the stream closed.
	PhaseConsume = "consume"
)

// LatencySeries is the latencies of one handoff phase in one topology,
// from the calls that answered OK.
type LatencySeries struct {
	// Topology is "E+PD" or "E+P+D".
	Topology string `json:"topology" yaml:"topology"`
	// Phase is PhasePublish or PhaseConsume.
	Phase string `json:"phase" yaml:"phase"`
	// SamplesMs are the latencies in milliseconds, in call order (at most
	// LatencyMaxSamples).
	SamplesMs []float64 `json:"samples_ms" yaml:"samples_ms"`
	// AtMs, when recorded, are when each call started, in milliseconds
	// since the run started (the same length and order as SamplesMs;
	// report.html plots latency over time from them).
	AtMs []float64 `json:"at_ms,omitempty" yaml:"at_ms,omitempty"`
}

// Quantile returns the q-quantile (0 <= q <= 1) of samples by the nearest
// rank on a sorted copy; NaN for no samples.
func Quantile(samples []float64, q float64) float64 {
	if len(samples) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), samples...)
	sort.Float64s(s)
	q = math.Min(1, math.Max(0, q))
	i := int(math.Ceil(q*float64(len(s)))) - 1
	if i < 0 {
		i = 0
	}
	return s[i]
}
