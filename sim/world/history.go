package world

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// OpKind is a client-visible operation of the history check.
type OpKind uint8

// Operation kinds: the three calls a client makes about one reference.
const (
	OpPublish OpKind = iota + 1 // Generate(encoder.publish) on E; its answer names the reference
	OpConsume                   // Generate(encoder.consume=ref) on a PD
	OpRelease                   // Abort(encoder_cache=ref) on E
)

var opNames = map[OpKind]string{OpPublish: "publish", OpConsume: "consume", OpRelease: "release"}

func (k OpKind) String() string { return opNames[k] }

// ReturnUnknown is the Return tick of an operation whose answer never
// reached its client (deadline, cancellation, lost reply): it may take
// effect at any time after its call (etcd's robustness tests do the same).
const ReturnUnknown = math.MaxInt64

// HistoryOp is one client-visible operation: who called what about which
// entry, its call and return ticks (virtual ms) and its answer (a reply code,
// 0 when unknown).
type HistoryOp struct {
	Client int    `json:"client"`
	Race   bool   `json:"race,omitempty"` // a fire-and-forget call sent alongside a consume
	Kind   OpKind `json:"kind"`
	Entry  string `json:"entry"`
	Call   int64  `json:"call"`
	Return int64  `json:"return"`
	Result int64  `json:"result"`
	// MayLapse: before this operation returned, the entry could have ended
	// without a client call: its TTL passed, the producer began its
	// drain (S-2), or its file vanished (a fault).
	MayLapse bool `json:"may_lapse,omitempty"`
	// Probe: a consume with an altered reference, or one sent to E: the
	// contract rejects it (SU-4, SU-5, L-1, N-1, L-4), and it changes
	// nothing, whatever its answer; it is never answered OK.
	Probe bool `json:"probe,omitempty"`
}

// opKey identifies an operation in flight: client, call number (0 for a
// racing call) and kind, packed into one word (newOpKey), so the map of
// calls not yet answered hashes a uint64 (the struct's generic hash and
// map access were a percent of a run). wideOpKey is the same unpacked, for
// the calls whose numbers do not fit (none of a seeded run's).
type opKey uint64

type wideOpKey struct {
	client int32
	rpc    int64
	kind   OpKind
}

// Bits of an opKey: the client's 32, then the call number's, then the kind's.
const (
	opKeyKindBits = 8
	opKeyRpcBits  = 64 - 32 - opKeyKindBits
)

// newOpKey packs (client, rpc, kind); ok is false when rpc does not fit.
func newOpKey(client int32, rpc int64, kind OpKind) (k opKey, ok bool) {
	if rpc < 0 || rpc >= 1<<opKeyRpcBits {
		return 0, false
	}
	return opKey(uint64(uint32(client))<<32 | uint64(rpc)<<opKeyKindBits | uint64(kind)), true
}

// pendingInline is how many calls not yet answered history.few holds.
const pendingInline = 16

// pendingCall is a call not yet answered: its key and its index into ops.
type pendingCall struct {
	key opKey
	op  int
}

// putPending records that the call k, ops[op], is not yet answered,
// replacing an earlier record of k.
func (h *history) putPending(k opKey, op int) {
	for i := range h.few[:h.nFew] {
		if h.few[i].key == k {
			h.few[i].op = op
			return
		}
	}
	if len(h.pending) == 0 && h.nFew < len(h.few) {
		h.few[h.nFew] = pendingCall{k, op}
		h.nFew++
		return
	}
	h.pending[k] = op
}

// history records the client-visible operations of a run.
type history struct {
	ops []HistoryOp
	// few and nFew hold the first calls not yet answered (a run has a
	// few at a time): a scan of a few words is cheaper than the map's
	// hash, assign and delete (they were 2% of a run). pending holds the
	// rest, once few is full, until it is empty again: each call's key is
	// in one of them at most.
	few     [pendingInline]pendingCall
	nFew    int
	pending map[opKey]int // index into ops of calls not yet answered
	// wide is pending for the calls whose keys do not pack (nil until one).
	wide map[wideOpKey]int
	// DrainMs is the tick the producer's drain began (-1: never).
	DrainMs int64
}

// histCall records the call of an operation (entry "" for a publish).
func (w *World) histCall(client int, rpc int64, kind OpKind, entry string) {
	h := w.Hist
	if k, ok := newOpKey(int32(client), rpc, kind); ok {
		h.putPending(k, len(h.ops))
	} else {
		if h.wide == nil {
			h.wide = map[wideOpKey]int{}
		}
		h.wide[wideOpKey{int32(client), rpc, kind}] = len(h.ops)
	}
	h.ops = append(h.ops, HistoryOp{Client: client, Race: rpc == 0, Kind: kind, Entry: entry, Call: w.Now, Return: ReturnUnknown})
}

// takePending returns (and forgets) the index into ops of the call
// (client, rpc, kind) not yet answered.
func (h *history) takePending(client int32, rpc int64, kind OpKind) (int, bool) {
	if k, ok := newOpKey(client, rpc, kind); ok {
		for j := range h.few[:h.nFew] {
			if h.few[j].key == k {
				i := h.few[j].op
				h.nFew--
				h.few[j] = h.few[h.nFew]
				return i, true
			}
		}
		if len(h.pending) == 0 {
			return 0, false
		}
		i, ok := h.pending[k]
		if ok {
			delete(h.pending, k)
		}
		return i, ok
	}
	k := wideOpKey{client, rpc, kind}
	i, ok := h.wide[k]
	if ok {
		delete(h.wide, k)
	}
	return i, ok
}

// histDuplicate records the network's copy of a release request ev as an
// operation of its own whose answer is unknown: the client takes the first
// answer that arrives, which may be the copy's.
func (w *World) histDuplicate(ev Event) {
	if ev.Kind != EvReleaseArrive {
		return
	}
	rq := ReleaseRequestOf(ev)
	if rq.Client < 0 {
		return
	}
	w.Hist.ops = append(w.Hist.ops, HistoryOp{Client: int(rq.Client), Race: rq.Rpc == 0, Kind: OpRelease, Entry: rq.Entry, Call: w.Now, Return: ReturnUnknown})
}

// HistReturn records the first answer of an operation that reached its
// client, whether or not the client still waited for it; later copies (a
// duplicated reply) and answers to no recorded call are ignored.
func (w *World) HistReturn(client int32, rpc int64, kind OpKind, res int64, entry string) {
	h := w.Hist
	i, ok := h.takePending(client, rpc, kind)
	if !ok {
		return
	}
	op := &h.ops[i]
	op.Return, op.Result = w.Now, res
	if kind == OpPublish && res == ResOK {
		op.Entry = entry
	}
}

// History returns the run's operations, each with MayLapse decided from the
// ledger; publishes whose answer never came are left out (nobody learned
// their reference).
func (w *World) History() []HistoryOp {
	return w.AppendHistory(make([]HistoryOp, 0, len(w.Hist.ops)))
}

// AppendHistory appends History's operations to out.
func (w *World) AppendHistory(out []HistoryOp) []HistoryOp {
	// byClient caches, for the first clients, the record of the entry
	// their last operation named: a client's operations name its one entry
	// (three or four of them), and a map lookup each was a percent of a run.
	var byClient [32]*EntryRecord // (a seeded run draws 4..24 clients)
	for _, op := range w.Hist.ops {
		if op.Entry == "" {
			continue
		}
		var rec *EntryRecord
		if op.Client >= 0 && op.Client < len(byClient) {
			if r := byClient[op.Client]; r != nil && r.Id == op.Entry {
				rec = r
			} else if rec = w.Ledger.Entries[op.Entry]; rec != nil {
				byClient[op.Client] = rec
			}
		} else {
			rec = w.Ledger.Entries[op.Entry]
		}
		if rec != nil {
			// The record's id is op's entry (its key, or equal to it):
			// shared, it makes the history check's many comparisons of
			// one entry's operations' entries (groupByEntry, replay)
			// equal at their pointer check.
			op.Entry = rec.Id
			op.MayLapse = rec.Vanished || op.Return >= rec.ExpiresMs || (w.Hist.DrainMs >= 0 && op.Return >= w.Hist.DrainMs)
		}
		out = append(out, op)
	}
	return out
}

// entryState is the history model's state of one entry.
type entryState uint8

const (
	esUnpublished entryState = iota
	esLive
	esConsumed
	esReleased
	esGone // ended without a client-visible answer: expired, drained, vanished, or taken by an uncertain call
)

var entryStateNames = [...]string{"unpublished", "live", "consumed", "released", "gone"}

// historyModel is the sequential specification of one entry, as its clients
// see it (CONTRACT section 2, SU-1..SU-3): a publish makes it live; from
// live exactly one of a consume answered OK or a release answered ABORTED
// ends it; after that every consume is INVALID_ARGUMENT and every release
// ALREADY_FINISHED. An operation whose answer is unknown (or another code)
// may or may not have ended it. MayLapse lets a live entry end on its own.
var historyModel = porcupine.NondeterministicModel{
	Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var ids []string
		for _, op := range ops {
			id := op.Input.(HistoryOp).Entry
			if _, ok := by[id]; !ok {
				ids = append(ids, id)
			}
			by[id] = append(by[id], op)
		}
		sort.Strings(ids)
		out := make([][]porcupine.Operation, 0, len(ids))
		for _, id := range ids {
			out = append(out, by[id])
		}
		return out
	},
	Init: func() []any { return []any{esUnpublished} },
	Step: func(state, input, _ any) []any {
		var buf [4]entryState
		op := input.(HistoryOp)
		next := stepEntry(buf[:0], state.(entryState), &op)
		if len(next) == 0 {
			return nil
		}
		out := make([]any, len(next))
		for i, n := range next {
			out[i] = n
		}
		return out
	},
	DescribeOperation: func(input, _ any) string {
		op := input.(HistoryOp)
		res := "?"
		if op.Return != ReturnUnknown {
			res = ResNames[op.Result]
		}
		who := fmt.Sprintf("client %d", op.Client)
		if op.Race {
			who += " (race)"
		}
		if op.Probe {
			who += " (probe)"
		}
		s := fmt.Sprintf("%s: %s(%s) -> %s", who, op.Kind, Short(op.Entry), res)
		if op.MayLapse {
			s += " [may have lapsed]"
		}
		return s
	},
	DescribeState: func(state any) string { return entryStateNames[state.(entryState)] },
}

// stepEntry appends to out the states op may take an entry in state s0 to,
// in the model's order: historyModel's Step, without boxing, for the fast
// paths of CheckHistory (issue #16: the boxed Step allocated per call).
// op is by pointer: the searches call it per (state, operation) tried, and
// it is not inlined (a copy of the operation each call).
func stepEntry(out []entryState, s0 entryState, op *HistoryOp) []entryState {
	add := func(s entryState) { out = append(out, s) }
	pre := [2]entryState{s0, esGone}
	npre := 1
	if s0 == esLive && op.MayLapse {
		npre = 2
	}
	for _, s := range pre[:npre] {
		if op.Probe {
			if op.Result != ResOK && s != esUnpublished {
				add(s)
			}
			continue
		}
		switch op.Kind {
		case OpPublish:
			if s == esUnpublished && op.Result == ResOK {
				add(esLive)
			}
		case OpConsume:
			switch op.Result {
			case ResOK:
				if s == esLive {
					add(esConsumed)
				}
			case ResSpent:
				if s != esLive && s != esUnpublished {
					add(s)
				}
			default:
				if s != esUnpublished {
					add(s)
					if s == esLive {
						add(esGone)
					}
				}
			}
		case OpRelease:
			switch op.Result {
			case ResAborted:
				if s == esLive {
					add(esReleased)
				}
			case ResAlreadyFinished:
				if s != esLive && s != esUnpublished {
					add(s)
				}
			default:
				if s != esUnpublished {
					add(s)
					if s == esLive {
						add(esReleased)
					}
				}
			}
		}
	}
	return out
}

// porcupineOps converts a history for porcupine (unknown returns become
// the largest tick, so they overlap everything after their call).
func porcupineOps(ops []HistoryOp) []porcupine.Operation {
	out := make([]porcupine.Operation, len(ops))
	for i, op := range ops {
		c := op.Client * 2
		if op.Race {
			c++
		}
		out[i] = porcupine.Operation{ClientId: c, Input: op, Call: op.Call, Output: op.Result, Return: op.Return}
	}
	return out
}

// historyTimeout bounds one history check; a run's partitions are small
// (a handful of operations per entry), so it is never reached in practice.
const historyTimeout = 10 * time.Second

// CheckHistory checks that ops are linearizable against the per-entry model
// (SU-1..SU-3 as clients see them). It returns "" when they are, else a
// description of the first entry whose operations are not.
func CheckHistory(ops []HistoryOp) string {
	rest := sequentialRest(ops)
	if len(rest) == 0 {
		return ""
	}
	model := historyModel.ToModel()
	if porcupine.CheckOperationsTimeout(model, porcupineOps(rest), historyTimeout) != porcupine.Illegal {
		return "" // Ok, or Unknown: timed out without a verdict (not seen with runs of this size)
	}
	return describeIllegal(rest)
}

// sequentialRest is CheckHistory's fast path: for an entry none of whose
// operations overlap in time (the common case: one client, answers that
// came back), linearizability is a replay of its operations in call order
// through the model; for one whose operations overlap, a small search
// (searchLinearizable). It returns the operations of the entries found not
// linearizable, for porcupine to decide and describe: porcupine has the
// last word on every failure.
func sequentialRest(ops []HistoryOp) []HistoryOp {
	sb := orderPool.Get().(*sequentialBufs)
	defer orderPool.Put(sb)
	order, ok := sb.groupByEntry(ops)
	if !ok {
		order = sb.sortByEntry(ops)
	}
	return sb.replay(ops, order)
}

// callsInOrder reports whether ops' calls never decrease (a run records
// its operations as they are called, so its history's do not).
func callsInOrder(ops []HistoryOp) bool {
	for i := 1; i < len(ops); i++ {
		if ops[i].Call < ops[i-1].Call {
			return false
		}
	}
	return true
}

// sortByEntry returns the indices of ops ordered by (entry, call, index).
func (sb *sequentialBufs) sortByEntry(ops []HistoryOp) []int {
	order := sb.order[:0]
	for i := range ops {
		order = append(order, i)
	}
	sb.order = order
	// Stable by (entry, call): ties keep their index order, which the
	// index itself breaks (a total order sorts faster than a stable sort).
	slices.SortFunc(order, func(a, b int) int {
		x, y := &ops[a], &ops[b]
		if c := strings.Compare(x.Entry, y.Entry); c != 0 {
			return c
		}
		if c := cmp.Compare(x.Call, y.Call); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return order
}

// maxGroups bounds groupByEntry's entries: it looks an operation's entry
// up among those seen so far, which grows with their number.
const maxGroups = 64

// groupByEntry returns the indices of ops grouped by entry (the groups in
// the order of their entries' first operations) and in index order within
// a group: when ops' calls do not decrease (a run records its operations
// as they are called), each entry's operations in the same (call, index)
// order as sortByEntry gives them, without its string comparisons (issue
// #16: the sort was ~1% of a run). Only the order of the groups differs,
// and the replay decides each entry alone. It returns false, and no order,
// when the calls decrease somewhere or ops name more than maxGroups
// entries.
func (sb *sequentialBufs) groupByEntry(ops []HistoryOp) ([]int, bool) {
	if !callsInOrder(ops) {
		return nil, false
	}
	gids, next := sb.gids[:0], sb.next[:0] // next: per group, where its next index goes
	firsts := sb.firsts[:0]                // per group, the index of its first operation
	last := int32(-1)
	for i := range ops {
		e := ops[i].Entry
		g := last
		if g < 0 || ops[firsts[g]].Entry != e {
			g = -1
			for j := len(firsts) - 1; j >= 0; j-- {
				if ops[firsts[j]].Entry == e {
					g = int32(j)
					break
				}
			}
			if g < 0 {
				if len(firsts) == maxGroups {
					sb.firsts, sb.gids, sb.next = firsts, gids, next
					return nil, false
				}
				g = int32(len(next))
				firsts = append(firsts, int32(i))
				next = append(next, 0)
			}
		}
		last = g
		next[g]++
		gids = append(gids, g)
	}
	sb.firsts = firsts
	at := int32(0)
	for g, n := range next {
		next[g] = at
		at += n
	}
	order := slices.Grow(sb.order[:0], len(ops))[:len(ops)]
	for i, g := range gids {
		order[next[g]] = i
		next[g]++
	}
	sb.order, sb.gids, sb.next = order, gids, next
	return order, true
}

// replay is sequentialRest's work on ops in order: each entry's
// operations are contiguous in order, in (call, index) order.
func (sb *sequentialBufs) replay(ops []HistoryOp, order []int) []HistoryOp {
	var rest []HistoryOp
	var states, next []entryState
	for lo := 0; lo < len(order); {
		hi := lo + 1
		for hi < len(order) && ops[order[hi]].Entry == ops[order[lo]].Entry {
			hi++
		}
		ok := true
		states = append(states[:0], esUnpublished)
		lastReturn := int64(math.MinInt64) // the latest return among the entry's earlier operations
		for _, i := range order[lo:hi] {
			op := &ops[i]
			if lastReturn >= op.Call {
				ok = false // overlapping (closed intervals)
				break
			}
			lastReturn = max(lastReturn, op.Return)
			next = next[:0]
			for _, st := range states {
				var buf [4]entryState
				for _, n := range stepEntry(buf[:0], st, op) {
					if !containsState(next, n) {
						next = append(next, n)
					}
				}
			}
			if len(next) == 0 {
				ok = false
				break
			}
			states, next = next, states
		}
		if !ok {
			// searchLinearizable keeps nothing of part, and rest copies
			// it: one buffer serves every entry (and, pooled, every run).
			part := sb.part[:0]
			for _, i := range order[lo:hi] {
				part = append(part, ops[i])
			}
			if !searchLinearizableBuf(part, sb.seen[:0]) {
				rest = append(rest, part...)
			}
			clear(part) // drop the entry strings until the next use
			sb.part = part
		}
		lo = hi
	}
	return rest
}

// orderPool holds sequentialRest's buffers (issue #16: the index buffer
// for every run was ~4% of a run's bytes, an entry's operations copied for
// the search ~3%).
var orderPool = sync.Pool{New: func() any { return new(sequentialBufs) }}

// sequentialBufs are sequentialRest's index buffer, its buffer of one
// entry's operations and groupByEntry's buffers.
type sequentialBufs struct {
	order []int
	part  []HistoryOp
	// seen is searchLinearizableBuf's list of visited pairs (the most
	// it lists: it needs no growing).
	seen [maxSeenList]uint64
	// groupByEntry's: each group's first operation, each operation's
	// group, and each group's next place in order.
	firsts []int32
	gids   []int32
	next   []int32
}

// searchLinearizable decides one entry's operations (at most 30; more go
// to porcupine) by depth-first search over linearization orders (Wing and
// Gong): the next operation is one whose call precedes every remaining
// operation's return; visited (done-set, state) pairs are not searched
// twice.
func searchLinearizable(part []HistoryOp) bool {
	return searchLinearizableBuf(part, nil)
}

// searchLinearizableBuf is searchLinearizable listing its visited pairs in
// seen's memory (replay's pooled buffer: a map a search made was most of
// the search's cost).
func searchLinearizableBuf(part []HistoryOp, seen []uint64) bool {
	if len(part) > 30 {
		return false
	}
	s := linSearch{part: part, seen: seen[:0]}
	return s.dfs(0, esUnpublished)
}

// linSearch is searchLinearizableBuf's search over part. seen holds the
// visited (done-set, state) pairs packed as done<<8|state, in a list (a
// search visits few pairs: a look through them costs less than a map's)
// until it holds maxSeenList, then in seenMap: the same set either way.
type linSearch struct {
	part    []HistoryOp
	seen    []uint64
	seenMap map[uint64]bool
}

// maxSeenList bounds linSearch's list of visited pairs.
const maxSeenList = 64

// visit adds pair k to the visited ones; it reports false when k was
// visited already.
func (s *linSearch) visit(k uint64) bool {
	if s.seenMap != nil {
		if s.seenMap[k] {
			return false
		}
		s.seenMap[k] = true
		return true
	}
	for _, x := range s.seen {
		if x == k {
			return false
		}
	}
	if len(s.seen) < maxSeenList {
		s.seen = append(s.seen, k)
		return true
	}
	s.seenMap = make(map[uint64]bool, 4*maxSeenList)
	for _, x := range s.seen {
		s.seenMap[x] = true
	}
	s.seenMap[k] = true
	return true
}

// dfs reports whether the operations not in done can be linearized from
// state st.
func (s *linSearch) dfs(done uint32, st entryState) bool {
	part := s.part
	n := len(part)
	if done == 1<<n-1 {
		return true
	}
	if !s.visit(uint64(done)<<8 | uint64(st)) {
		return false
	}
	minRet := int64(math.MaxInt64)
	for i := 0; i < n; i++ {
		if done&(1<<i) == 0 {
			minRet = min(minRet, part[i].Return)
		}
	}
	for i := 0; i < n; i++ {
		if done&(1<<i) != 0 || part[i].Call > minRet {
			continue
		}
		var buf [4]entryState
		for _, next := range stepEntry(buf[:0], st, &part[i]) {
			if s.dfs(done|1<<i, next) {
				return true
			}
		}
	}
	return false
}

func containsState(states []entryState, s entryState) bool {
	for _, x := range states {
		if x == s {
			return true
		}
	}
	return false
}

// describeIllegal names the first entry whose operations are not
// linearizable and lists them.
func describeIllegal(ops []HistoryOp) string {
	model := historyModel.ToModel()
	for _, part := range model.Partition(porcupineOps(ops)) {
		if porcupine.CheckOperations(model, part) {
			continue
		}
		s := fmt.Sprintf("operations on entry %s are not linearizable (SU-1..SU-3 as its clients saw them):", Short(part[0].Input.(HistoryOp).Entry))
		for _, op := range part {
			h := op.Input.(HistoryOp)
			ret := "never answered"
			if h.Return != ReturnUnknown {
				ret = fmt.Sprintf("returned %d", h.Return)
			}
			s += fmt.Sprintf(" [called %d, %s: %s]", h.Call, ret, model.DescribeOperation(h, nil))
		}
		return s
	}
	return "history is not linearizable"
}

// WriteHistoryHTML checks ops and, when they are not linearizable, writes
// porcupine's HTML visualization to path. It returns whether it wrote one.
func WriteHistoryHTML(path string, ops []HistoryOp) (bool, error) {
	model := historyModel.ToModel()
	res, info := porcupine.CheckOperationsVerbose(model, porcupineOps(ops), historyTimeout)
	if res != porcupine.Illegal {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, err
	}
	return true, porcupine.VisualizePath(model, info, path)
}

// WriteHistory re-runs r's seed (its settings and mutant, with opts'
// checker choice) keeping its history and, when the history is not
// linearizable, writes porcupine's visualization to
// dir/seed-<N>.history.html and returns the path ("" when linearizable).
func WriteHistory(dir string, r Result, opts Options) (string, error) {
	opts.Mutant, opts.KeepHistory = r.Mutant, true
	again := Run(r.Seed, r.Settings, opts)
	path := filepath.Join(dir, fmt.Sprintf("seed-%d.history.html", r.Seed))
	wrote, err := WriteHistoryHTML(path, again.History)
	if err != nil || !wrote {
		return "", err
	}
	return path, nil
}
