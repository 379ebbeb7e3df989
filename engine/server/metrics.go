package server

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/engine/handoff"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Prometheus metrics of one engine instance, for the people who operate it
// (`baton serve --metrics-listen`). Each engine has its own registry, so
// several engines in one process (tests, the in-process target) never clash.
//
// Counters and gauges read from the lifecycle core at scrape time:
//
//	baton_handoff_published_total   entries published (producer)
//	baton_handoff_consumed_total    entries consumers claimed (producer) or references consumed (consumer)
//	baton_handoff_released_total    entries released by Abort(encoder_cache) or a failed send (SU-3, C-7)
//	baton_handoff_expired_total     entries collected after their TTL
//	baton_exports_entries           entries held now (encoder.exports.entries)
//	baton_exports_bytes             payload bytes held now (encoder.exports.bytes)
//	baton_receives_inflight         receives in flight (encoder.receives.inflight)
//	baton_quarantine_buffers        buffers quarantined, consumer and producer side
//	baton_quarantine_bytes          their bytes
//	baton_cleanup_pending           cleanup tasks in flight (encoder.cleanup.pending)
//	baton_requests_running          Generate requests in flight
//	baton_health_state              HealthState number: 2 READY, 4 DRAINING, 5 NOT_READY (Q-4, X-1, S-2)
//	baton_engine_info{role,instance_id,version,preset}  always 1
//
// Counted as they happen:
//
//	baton_rejections_total{rule,code}        RPCs that ended non-OK (client cancellations aside), by the rule that decided ("none" if none did)
//	baton_cleanup_failures_total             failed releases or removals
//	baton_handoff_publish_seconds{outcome}   encode + write + commit of one publish (ok, rejected, error)
//	baton_handoff_consume_seconds{outcome}   checks + claim + read of one consume
//	baton_generate_seconds{code}             one Generate call, end to end
type metrics struct {
	registry        *prometheus.Registry
	received        atomic.Uint64 // consumer: references consumed
	rejections      *prometheus.CounterVec
	cleanupFailures prometheus.Counter
	publishSeconds  *prometheus.HistogramVec
	consumeSeconds  *prometheus.HistogramVec
	generateSeconds *prometheus.HistogramVec
}

// latencyBuckets run from 1 ms to about 33 s, doubling.
var latencyBuckets = prometheus.ExponentialBuckets(0.001, 2, 16)

// Outcome label values of the publish and consume histograms.
const (
	outcomeOK       = "ok"
	outcomeRejected = "rejected"
	outcomeError    = "error"
)

// ruleNone labels a rejection no contract rule decided (a cancelled or
// malformed request, an internal error).
const ruleNone = "none"

func newMetrics(e *Engine) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_rejections_total",
			Help: "RPCs that ended with a non-OK status other than CANCELLED, by the CONTRACT rule that decided it (\"none\" when no rule did) and the gRPC code.",
		}, []string{"rule", "code"}),
		cleanupFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "baton_cleanup_failures_total",
			Help: "Failed releases or removals of published entries (X-1: health turns NOT_READY).",
		}),
		publishSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "baton_handoff_publish_seconds", Help: "Time to publish one encoder output (encode, write, commit), by outcome.", Buckets: latencyBuckets,
		}, []string{"outcome"}),
		consumeSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "baton_handoff_consume_seconds", Help: "Time to consume one reference (checks, claim, read), by outcome.", Buckets: latencyBuckets,
		}, []string{"outcome"}),
		generateSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "baton_generate_seconds", Help: "Time of one Generate call, end to end, by final gRPC code.", Buckets: latencyBuckets,
		}, []string{"code"}),
	}
	m.registry.MustRegister(
		m.rejections, m.cleanupFailures, m.publishSeconds, m.consumeSeconds, m.generateSeconds,
		&stateCollector{e: e},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// MetricsHandler serves the engine's metrics in the Prometheus text format
// (mount it at /metrics; `baton serve --metrics-listen` does).
func (e *Engine) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(e.metrics.registry, promhttp.HandlerOpts{})
}

// MetricsRegistry is the engine's own Prometheus registry (for embedding the
// engine's metrics in another exporter).
func (e *Engine) MetricsRegistry() *prometheus.Registry { return e.metrics.registry }

// outcomeOf labels a publish or consume result.
func outcomeOf(err error) string {
	if err == nil {
		return outcomeOK
	}
	if _, code := handoff.Classify(err); code != handoff.CodeInternal {
		return outcomeRejected
	}
	return outcomeError
}

// observePublish records one publish that started at start.
func (m *metrics) observePublish(start time.Time, err error) {
	if m == nil {
		return
	}
	m.publishSeconds.WithLabelValues(outcomeOf(err)).Observe(time.Since(start).Seconds())
}

// observeConsume records one consume that started at start; a success
// counts in baton_handoff_consumed_total.
func (m *metrics) observeConsume(start time.Time, err error) {
	if m == nil {
		return
	}
	if err == nil {
		m.received.Add(1)
	}
	m.consumeSeconds.WithLabelValues(outcomeOf(err)).Observe(time.Since(start).Seconds())
}

// observeCleanupFailure counts one X-1 cleanup failure.
func (m *metrics) observeCleanupFailure() {
	if m == nil {
		return
	}
	m.cleanupFailures.Inc()
}

// observeRejection counts one RPC that ended non-OK.
func (m *metrics) observeRejection(rule, code string) {
	if m == nil {
		return
	}
	m.rejections.WithLabelValues(rule, code).Inc()
}

// observeGenerate records one Generate call.
func (m *metrics) observeGenerate(d time.Duration, code string) {
	if m == nil {
		return
	}
	m.generateSeconds.WithLabelValues(code).Observe(d.Seconds())
}

// stateCollector reads the lifecycle core's counters at scrape time, under
// the engine's mutex (held only while copying numbers; no I/O, Q-5).
type stateCollector struct{ e *Engine }

var (
	descPublished  = prometheus.NewDesc("baton_handoff_published_total", "Encoder outputs published (producer).", nil, nil)
	descConsumed   = prometheus.NewDesc("baton_handoff_consumed_total", "Published entries consumers claimed (producer), or references consumed (consumer).", nil, nil)
	descReleased   = prometheus.NewDesc("baton_handoff_released_total", "Published entries released before consumption (SU-3, C-7).", nil, nil)
	descExpired    = prometheus.NewDesc("baton_handoff_expired_total", "Published entries collected after their TTL (X-2).", nil, nil)
	descEntries    = prometheus.NewDesc("baton_exports_entries", "Published entries held now (encoder.exports.entries).", nil, nil)
	descBytes      = prometheus.NewDesc("baton_exports_bytes", "Payload bytes of the entries held now (encoder.exports.bytes).", nil, nil)
	descInflight   = prometheus.NewDesc("baton_receives_inflight", "Receives in flight (encoder.receives.inflight).", nil, nil)
	descQBuffers   = prometheus.NewDesc("baton_quarantine_buffers", "Buffers quarantined for the life of the process, consumer and producer side (Q-1, Q-3).", nil, nil)
	descQBytes     = prometheus.NewDesc("baton_quarantine_bytes", "Bytes of the quarantined buffers.", nil, nil)
	descPending    = prometheus.NewDesc("baton_cleanup_pending", "Cleanup tasks in flight (encoder.cleanup.pending).", nil, nil)
	descRunning    = prometheus.NewDesc("baton_requests_running", "Generate requests in flight.", nil, nil)
	descHealth     = prometheus.NewDesc("baton_health_state", "Health state as the HealthState enum number: 1 STARTING, 2 READY, 4 DRAINING, 5 NOT_READY.", nil, nil)
	descEngineInfo = prometheus.NewDesc("baton_engine_info", "The engine instance: role, instance id, version, preset. Always 1.", []string{"role", "instance_id", "version", "preset"}, nil)
)

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPublished, descConsumed, descReleased, descExpired, descEntries, descBytes,
		descInflight, descQBuffers, descQBytes, descPending, descRunning, descHealth, descEngineInfo} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	e := c.e
	e.mu.Lock()
	counters := e.table.Counters()
	entries, held := e.table.Entries(), e.table.HeldBytes()
	inflight := e.receives.Inflight()
	qBuffers, qBytes := e.receives.Quarantine()
	srcBuffers, srcBytes := e.sourceQuarantine()
	kvBuffers, kvBytes := e.receives.UncountedQuarantine()
	srcBuffers, srcBytes = srcBuffers+kvBuffers, srcBytes+kvBytes
	pending, running := e.cleanups, e.runningN
	state, _ := e.health.State()
	e.mu.Unlock()
	consumed := counters.Consumed + e.metrics.received.Load()
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter(descPublished, float64(counters.Published))
	counter(descConsumed, float64(consumed))
	counter(descReleased, float64(counters.Released))
	counter(descExpired, float64(counters.Expired))
	gauge(descEntries, float64(entries))
	gauge(descBytes, float64(held))
	gauge(descInflight, float64(inflight))
	gauge(descQBuffers, float64(qBuffers+srcBuffers))
	gauge(descQBytes, float64(qBytes+srcBytes))
	gauge(descPending, float64(pending))
	gauge(descRunning, float64(running))
	gauge(descHealth, float64(state))
	ch <- prometheus.MustNewConstMetric(descEngineInfo, prometheus.GaugeValue, 1, string(e.cfg.Role), e.instanceID, Version, e.preset.Name)
}
