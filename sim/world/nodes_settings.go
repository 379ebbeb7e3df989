package world

import (
	"fmt"
	"slices"
)

// Topologies the simulator runs (CONTRACT section 1).
const (
	// TopologyEPD: client -> E, then client -> PD.
	TopologyEPD = "e+pd"
	// TopologyEPPD: client -> E, then client -> P (PrefillReady with a KV
	// session and a decode preparation), then client -> D.
	TopologyEPPD = "e+p+d"
)

// Fault sites of the partition, the slow fsync, the producer crash and the
// E+P+D nodes. They are drawn from their own stream (subNodes), after the
// sites of faults.go, so adding them shifts no other draw of a seed.
const (
	// SitePartition cuts a consumer off from E for a drawn window: every
	// message between them, in either direction, is lost while it lasts (a
	// request before it took effect, a reply after: ).
	SitePartition Site = "net.partition"
	// SiteSlowFsync makes the producer's shared-directory write of an entry
	// (temp file, fsync, rename, directory fsync) take up to
	// NodeSettings.FsyncMsMax, so cancellation (C-7), drain (S-2) and
	// expiry race it; the entry is committed only after the rename.
	SiteSlowFsync Site = "disk.slow-fsync"
	// SiteProducerCrash crashes E's process at a random time, or in the
	// middle of a slow shared-directory write before its fsync (the temp
	// file is lost or left as an orphan); it restarts with a new instance
	// id after NodeSettings.ProducerDownMsMax at most (sim/nodes/producer_crash.go).
	SiteProducerCrash Site = "process.producer-crash"
	// SiteDecodeNoPrep: a client sends its decode request to D without the
	// decode preparation (L-2: INVALID_ARGUMENT before execution).
	SiteDecodeNoPrep Site = "client.decode-without-preparation"
	// SiteDecodeBadHash: a client's decode preparation carries a malformed
	// content hash (H-3: INVALID_ARGUMENT before execution).
	SiteDecodeBadHash Site = "client.decode-malformed-hash"
	// SiteDecodeReplay: a client sends a KV session it already decoded to a
	// D again (at most one attach: the replay is refused).
	SiteDecodeReplay Site = "client.decode-replay"
)

// nodeSites are the sites drawn by drawNodeSettings, in draw order.
var nodeSites = []Site{SitePartition, SiteSlowFsync, SiteProducerCrash, SiteDecodeNoPrep, SiteDecodeBadHash, SiteDecodeReplay}

func isNodeSite(s Site) bool {
	for _, n := range nodeSites {
		if n == s {
			return true
		}
	}
	return false
}

// subNodes is the stream of the node settings and of everything the
// partition, the slow fsync and the E+P+D nodes draw in a run.
const subNodes subsystem = 0xc2b2ae3d27d4eb4f

// NodeSettings are the drawn settings of the partition, the slow fsync and
// the E+P+D topology (embedded in Settings; zero values turn them off, so
// Driver, Scenario and older traces run E+PD without them). Times are
// virtual ms.
type NodeSettings struct {
	// Topology is TopologyEPD ("" too) or TopologyEPPD (drawn for 1 seed in 4).
	Topology string `json:"topology"`
	// Decoders is the number of D nodes (1..2 drawn in E+P+D, 0 otherwise).
	Decoders int `json:"decoders"`
	// KVSessionTTLMs is how long P keeps a KV session nobody fetched.
	KVSessionTTLMs int64 `json:"kv_session_ttl_ms"`
	// DecodeTimeoutMs is D's own deadline on fetching and releasing a KV session.
	DecodeTimeoutMs int64 `json:"decode_timeout_ms"`
	// PartitionMsMax bounds a partition's window; PartitionPeriodMs is how
	// often a consumer's link may be cut.
	PartitionMsMax    int64 `json:"partition_ms_max"`
	PartitionPeriodMs int64 `json:"partition_period_ms"`
	// FsyncMsMax bounds a slow fsync of the shared-directory write.
	FsyncMsMax int64 `json:"fsync_ms_max"`
	// ProducerDownMsMax bounds how long a crashed E stays down before its restart.
	ProducerDownMsMax int64 `json:"producer_down_ms_max"`
}

// nodeSettingKeys are NodeSettings' JSON keys in field order (Settings.Lines).
var nodeSettingKeys = []string{"topology", "decoders", "kv_session_ttl_ms", "decode_timeout_ms", "partition_ms_max", "partition_period_ms", "fsync_ms_max", "producer_down_ms_max"}

// drawNodeSettings draws s.NodeSettings and the node sites from the nodes
// stream only, adds the enabled sites to faults (the sites DrawSettings
// enabled) and returns it sorted.
func drawNodeSettings(seed uint64, s *Settings, faults []Site) []Site {
	cell := drawCells.Get().(*rngCell) // newRNG's stream, not allocated (issue #16)
	defer drawCells.Put(cell)
	r := cell.seed(seed, subNodes)
	n := &s.NodeSettings
	n.Topology = TopologyEPD
	if Chance(r, 0.25) {
		n.Topology = TopologyEPPD
		n.Decoders = int(Between(r, 1, 2))
	}
	n.KVSessionTTLMs = Between(r, 200, 3000)
	n.DecodeTimeoutMs = Between(r, 100, 1000)
	n.PartitionMsMax = Between(r, 50, 1500)
	n.PartitionPeriodMs = Between(r, 100, 600)
	n.FsyncMsMax = Between(r, 20, 2000)
	n.ProducerDownMsMax = Between(r, 1, 500)
	for _, site := range nodeSites {
		if Chance(r, EnableProbability) {
			faults = append(faults, site)
		}
	}
	slices.Sort(faults)
	s.LivenessBudgetTicks += n.KVSessionTTLMs + n.DecodeTimeoutMs + n.PartitionMsMax + n.FsyncMsMax + n.ProducerDownMsMax
	return faults
}

// validate lists what is wrong with n (Settings.Validate).
func (n NodeSettings) validate() []string {
	var bad []string
	switch n.Topology {
	case "", TopologyEPD:
	case TopologyEPPD:
		if n.Decoders < 1 || n.Decoders > 16 || n.KVSessionTTLMs < 1 || n.DecodeTimeoutMs < 1 {
			bad = append(bad, fmt.Sprintf("e+p+d needs 1..16 decoders (%d) and positive kv session ttl and decode timeout", n.Decoders))
		}
	default:
		bad = append(bad, fmt.Sprintf("topology %q", n.Topology))
	}
	if n.PartitionMsMax < 0 || n.PartitionPeriodMs < 0 || n.FsyncMsMax < 0 || n.ProducerDownMsMax < 0 {
		bad = append(bad, "partition and fsync times must not be negative")
	}
	return bad
}

// eppd reports whether the run is E+P+D.
func (n NodeSettings) eppd() bool { return n.Topology == TopologyEPPD }
