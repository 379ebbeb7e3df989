package world

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
)

// Backends the simulator models.
const (
	// BackendSharedDir: the consumer claims an entry by atomic rename in a
	// shared directory; the producer learns of it when it next looks.
	BackendSharedDir = "shareddir"
	// BackendTransfer: the consumer asks the producer to WRITE into its
	// registered buffers (TransferEncoderCache); replies can be lost.
	BackendTransfer = "transfer"
)

// Settings are everything a seed draws for a run; a trace's first line holds
// them, and Replay runs with them. Times are virtual ms.
type Settings struct {
	// Backend is BackendSharedDir or BackendTransfer.
	Backend string `json:"backend"`
	// Consumers is the number of PD consumers (1..3 drawn); Handoffs the number of clients (4..24 drawn).
	Consumers int `json:"consumers"`
	Handoffs  int `json:"handoffs"`
	// PayloadBytesMax bounds one entry's payload (drawn per handoff in [1, max]).
	PayloadBytesMax int64 `json:"payload_bytes_max"`
	// ProducerQuotaBytes is the producer's L-5 bound; ConsumerQuotaBytes a consumer's.
	ProducerQuotaBytes int64 `json:"producer_quota_bytes"`
	ConsumerQuotaBytes int64 `json:"consumer_quota_bytes"`
	// BuffersPerConsumer is the number of registered receive buffers a consumer has.
	BuffersPerConsumer int `json:"buffers_per_consumer"`
	// DefaultTTLMs and MaxTTLMs configure the producer's table (ProducerConfig).
	DefaultTTLMs int64 `json:"default_ttl_ms"`
	MaxTTLMs     int64 `json:"max_ttl_ms"`
	// SafetyTicks is the length of the safety phase; clients start within its first half.
	SafetyTicks int64 `json:"safety_ticks"`
	// LivenessBudgetTicks bounds the liveness phase: every handoff ends and every node drains within it.
	LivenessBudgetTicks int64 `json:"liveness_budget_ticks"`
	// NetDelayMinMs..NetDelayMaxMs is a message's normal delay; LongDelayMaxMs
	// bounds the extra delay of a fault (net.delay, slow WRITE, slow removal, late encoder).
	NetDelayMinMs  int64 `json:"net_delay_min_ms"`
	NetDelayMaxMs  int64 `json:"net_delay_max_ms"`
	LongDelayMaxMs int64 `json:"long_delay_max_ms"`
	// EncodeMsMax bounds an encoder step; WriteMsMax a WRITE's normal time.
	EncodeMsMax int64 `json:"encode_ms_max"`
	WriteMsMax  int64 `json:"write_ms_max"`
	// ConsumerTimeoutMs is a consumer's deadline on a transfer; ProducerTimeoutMs the producer's on its WRITE.
	ConsumerTimeoutMs int64 `json:"consumer_timeout_ms"`
	ProducerTimeoutMs int64 `json:"producer_timeout_ms"`
	// ClientTimeoutMs is a client's deadline on any RPC.
	ClientTimeoutMs int64 `json:"client_timeout_ms"`
	// CollectPeriodMs is the producer collector's period (observe claims, expire: X-2).
	CollectPeriodMs int64 `json:"collect_period_ms"`
	// FireProbability is the per-hit probability of an enabled fault site (BUGGIFY: 0.25).
	FireProbability float64 `json:"fire_probability"`
	// Faults are the enabled sites (each enabled with probability 0.25), sorted.
	Faults []Site `json:"faults"`
	// NodeSettings: partition, slow fsync, E+P+D (nodes_settings.go).
	NodeSettings
}

// EnableProbability is the probability that a fault site is enabled in a run (BUGGIFY).
const EnableProbability = 0.25

// drawCells hold the streams DrawSettings and drawNodeSettings draw from:
// a cell on the stack would move to the heap (the stream it holds points
// into it), and they draw once a run; concurrent sweeps each get their own.
var drawCells = sync.Pool{New: func() any { return new(rngCell) }}

// DrawSettings returns the settings seed decides, from the settings stream only.
func DrawSettings(seed uint64) Settings {
	cell := drawCells.Get().(*rngCell) // newRNG's stream, not allocated (issue #16)
	defer drawCells.Put(cell)
	r := cell.seed(seed, subSettings)
	s := Settings{}
	if r.IntN(2) == 0 {
		s.Backend = BackendSharedDir
	} else {
		s.Backend = BackendTransfer
	}
	s.Consumers = 1 + r.IntN(3)
	s.Handoffs = int(Between(r, 4, 24))
	s.PayloadBytesMax = Between(r, 1, 64) * 1024
	s.ProducerQuotaBytes = s.PayloadBytesMax * Between(r, 2, 16)
	s.ConsumerQuotaBytes = s.PayloadBytesMax * Between(r, 1, 6)
	s.BuffersPerConsumer = int(Between(r, 2, 8))
	s.DefaultTTLMs = Between(r, 200, 3000)
	s.MaxTTLMs = s.DefaultTTLMs * Between(r, 1, 3)
	s.SafetyTicks = Between(r, 1000, 5000)
	s.NetDelayMinMs = Between(r, 0, 5)
	s.NetDelayMaxMs = s.NetDelayMinMs + Between(r, 1, 30)
	s.LongDelayMaxMs = Between(r, 50, 1500)
	s.EncodeMsMax = Between(r, 1, 50)
	s.WriteMsMax = Between(r, 1, 20)
	s.ConsumerTimeoutMs = Between(r, 100, 1000)
	s.ProducerTimeoutMs = Between(r, 100, 1000)
	s.ClientTimeoutMs = Between(r, 1500, 4000)
	s.CollectPeriodMs = Between(r, 20, 400)
	s.FireProbability = 0.25
	// The enabled sites are gathered here and copied once into s.Faults
	// (nil if none), not grown site by site (issue #16).
	var sites [maxSites]Site // maxSites bounds len(AllSites) (coverage.go)
	faults := sites[:0]
	for _, site := range AllSites {
		if isNodeSite(site) {
			continue // drawn by drawNodeSettings from its own stream
		}
		if Chance(r, EnableProbability) {
			faults = append(faults, site)
		}
	}
	s.LivenessBudgetTicks = s.MaxTTLMs + s.LongDelayMaxMs*4 + s.ClientTimeoutMs*4 + s.ConsumerTimeoutMs + s.ProducerTimeoutMs + 10*s.CollectPeriodMs + 5000
	faults = drawNodeSettings(seed, &s, faults)
	if len(faults) > 0 {
		s.Faults = append([]Site(nil), faults...)
	}
	return s
}

// Validate rejects settings a run cannot use (a hand-edited or truncated trace).
func (s Settings) Validate() error {
	var bad []string
	if s.Backend != BackendSharedDir && s.Backend != BackendTransfer {
		bad = append(bad, fmt.Sprintf("backend %q", s.Backend))
	}
	if s.Consumers < 1 || s.Consumers > 64 {
		bad = append(bad, fmt.Sprintf("consumers %d", s.Consumers))
	}
	if s.Handoffs < 0 || s.Handoffs > 100000 {
		bad = append(bad, fmt.Sprintf("handoffs %d", s.Handoffs))
	}
	if s.PayloadBytesMax < 1 || s.ProducerQuotaBytes < 1 || s.ConsumerQuotaBytes < 1 || s.BuffersPerConsumer < 1 {
		bad = append(bad, "sizes must be positive")
	}
	if s.DefaultTTLMs < 1 || s.MaxTTLMs < s.DefaultTTLMs || s.SafetyTicks < 1 || s.LivenessBudgetTicks < 1 {
		bad = append(bad, "times must be positive (max ttl >= default ttl)")
	}
	if s.NetDelayMinMs < 0 || s.NetDelayMaxMs < s.NetDelayMinMs || s.LongDelayMaxMs < 0 || s.EncodeMsMax < 1 || s.WriteMsMax < 1 ||
		s.ConsumerTimeoutMs < 1 || s.ProducerTimeoutMs < 1 || s.ClientTimeoutMs < 1 || s.CollectPeriodMs < 1 {
		bad = append(bad, "delays and timeouts must be positive")
	}
	if s.FireProbability < 0 || s.FireProbability > 1 {
		bad = append(bad, fmt.Sprintf("fire probability %v", s.FireProbability))
	}
	bad = append(bad, s.NodeSettings.validate()...)
	for _, site := range s.Faults {
		if !knownSites[site] {
			bad = append(bad, fmt.Sprintf("unknown fault site %q", site))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", ErrBadSettings, strings.Join(bad, "; "))
	}
	return nil
}

// Lines renders the settings as `key=value` lines, in a fixed order, for the
// header `baton sim` prints before anything else.
func (s Settings) Lines() []string {
	b, _ := json.Marshal(s)
	var m map[string]json.RawMessage
	_ = json.Unmarshal(b, &m)
	// Field order of the struct, not map order.
	order := []string{"backend", "consumers", "handoffs", "payload_bytes_max", "producer_quota_bytes", "consumer_quota_bytes",
		"buffers_per_consumer", "default_ttl_ms", "max_ttl_ms", "safety_ticks", "liveness_budget_ticks", "net_delay_min_ms",
		"net_delay_max_ms", "long_delay_max_ms", "encode_ms_max", "write_ms_max", "consumer_timeout_ms", "producer_timeout_ms",
		"client_timeout_ms", "collect_period_ms", "fire_probability", "faults"}
	order = append(order, nodeSettingKeys...)
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+string(m[k]))
	}
	return out
}

// knownSites is AllSites as a set (Validate runs once per run).
var knownSites = func() map[Site]bool {
	m := make(map[Site]bool, len(AllSites))
	for _, site := range AllSites {
		m[site] = true
	}
	return m
}()
