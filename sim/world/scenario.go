package world

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/baton-dev/baton/engine/handoff"
)

// Scenario is a hand-driven world for scripted lifecycle scenarios
// (testdata/scenarios/*.txt, run by cockroachdb/datadriven in
// scenario_test.go; ARCHITECTURE.md "Scenario tests read like scripts").
// Nothing happens by itself: no clients are drawn, no fault fires; the
// script publishes, claims, cancels, delivers or drops the next event of a
// kind, crashes consumers and prints the state. Every checker runs after
// every step, as in a seeded run, and the first failure is printed.
//
// Commands (Do), each on one line with key=value arguments:
//
//	new [backend=transfer|shareddir] [consumers=N] [buffers=N] [seed=N]
//	    [payload=BYTES] [consumer-quota=BYTES] [ttl=MS] [consumer-timeout=MS]
//	    [producer-timeout=MS] [client-timeout=MS] [collect=MS] [mutant=NAME]
//	    [topology=e+pd|e+p+d] [decoders=N] [kv-ttl=MS] [decode-timeout=MS]
//	publish h=N [ttl=MS]        client h publishes one entry
//	claim h=N [pd=N]            client h consumes its entry on PD pd (default 0)
//	release h=N                 client h releases its entry (Abort)
//	cancel h=N                  client h cancels its current call
//	crash pd=N / restart pd=N   a consumer process dies / comes back
//	partition pd=N ms=MS        cut PD pd's link to E for MS ms (every message between them is lost)
//	decode h=N [d=N] [prep=ok|missing|bad-hash]  E+P+D: client h decodes its KV session on D d
//	deliver [until=KIND] [n=N]  step the next event (n of them, or until one of KIND ran)
//	drop-reply kind=KIND        drop the earliest pending KIND event: a reply lost after its request took effect
//	align kind=KIND with=KIND2  move the earliest KIND event to the tick of the earliest KIND2 one (the same step)
//	advance ms=N                step every event due in the next N ms, then move the clock there
//	stabilize [max=N]           step until only the periodic collector is left (at most max steps)
//	delay kind=KIND ms=MS       the earliest pending KIND event happens MS ms later (a slow removal or WRITE)
//	shutdown                    Shutdown(own id) on E now: its drain starts (S-1, S-2)
//	crash-producer              E's process dies now; it restarts under a new instance id (sim/nodes/producer_crash.go)
//	finish [max=N]              end the run as a seeded one ends: heal, shut every node down once every
//	                            client is done, step until converged, run the end-of-run checks
//	expect                      print the producer, consumers, clients and entries
//
// Each step prints "t=TICK EVENT: note". Errors are printed, not returned
// as failures, so a script can show a rejected command.
type Scenario struct {
	W *World
}

// maxScenarioSteps bounds the steps of one deliver, advance or stabilize
// command, so no script (a fuzzed one: FuzzScenario) runs without end:
// 10000, stabilize's default bound, far beyond what a scenario needs.
const maxScenarioSteps = 10000

// NewScenario returns a scenario with no world yet (the script's `new`
// makes one).
func NewScenario() *Scenario { return &Scenario{} }

// Do runs one command with its arguments (key=value) and returns what it
// prints.
func (sc *Scenario) Do(cmd string, args map[string]string) (out string) {
	var b strings.Builder
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(&b, "CRASH: %v\n", p)
			out = b.String()
		}
	}()
	if cmd != "new" && sc.W == nil {
		return "error: no world: start the script with new\n"
	}
	if err := sc.do(&b, cmd, args); err != nil {
		fmt.Fprintf(&b, "error: %v\n", err)
	}
	if sc.W != nil && sc.W.Fail != nil {
		fmt.Fprintf(&b, "FAILED: %s\n", sc.W.Fail.Msg)
		sc.W.Fail = nil // shown once; later steps are checked again
	}
	return b.String()
}

func (sc *Scenario) do(b *strings.Builder, cmd string, args map[string]string) error {
	num := func(key string, def int64) (int64, error) {
		v, ok := args[key]
		if !ok {
			return def, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s=%q: want a number", key, v)
		}
		return n, nil
	}
	clientArg := func() (*Client, error) {
		h, err := num("h", -1)
		if err != nil || h < 0 || int(h) >= len(sc.W.Clients) {
			return nil, fmt.Errorf("h=%s: no such client (publish makes one)", args["h"])
		}
		return sc.W.Clients[h], nil
	}
	consumer := func() (int, error) {
		pd, err := num("pd", 0)
		if err != nil || pd < 0 || int(pd) >= len(sc.W.Cons) {
			return 0, fmt.Errorf("pd=%s: no such consumer", args["pd"])
		}
		return int(pd), nil
	}
	switch cmd {
	case "new":
		return sc.newWorld(args, num)
	case "publish":
		h, err := num("h", -1)
		if err != nil || int(h) != len(sc.W.Clients) {
			return fmt.Errorf("h=%s: the next client is h=%d", args["h"], len(sc.W.Clients))
		}
		ttl, err := num("ttl", 0)
		if err != nil {
			return err
		}
		payload, _ := num("payload", sc.W.Set.PayloadBytesMax)
		c := &Client{Idx: int(h), Plan: plan{PayloadBytes: payload, TTLMs: ttl}}
		sc.W.Clients = append(sc.W.Clients, c)
		sc.W.Call(c, StagePublishing, MsgRequest, Event{Kind: EvPublishArrive})
		fmt.Fprintf(b, "client %d: publish sent\n", c.Idx)
	case "claim":
		c, err := clientArg()
		if err != nil {
			return err
		}
		pd, err := consumer()
		if err != nil {
			return err
		}
		if c.entry == "" {
			return fmt.Errorf("client %d has no reference (its publish has not been answered OK)", c.Idx)
		}
		c.Done = false
		sc.W.consume(c, pd, StageConsuming)
		fmt.Fprintf(b, "client %d: consume of %s sent to PD%d\n", c.Idx, Short(c.entry), pd)
	case "release":
		c, err := clientArg()
		if err != nil {
			return err
		}
		if c.entry == "" {
			return fmt.Errorf("client %d has no reference", c.Idx)
		}
		c.Done = false
		sc.W.Call(c, stageReleasing, MsgRelease, releaseRequest{Entry: c.entry}.event())
		fmt.Fprintf(b, "client %d: release of %s sent\n", c.Idx, Short(c.entry))
	case "cancel":
		c, err := clientArg()
		if err != nil {
			return err
		}
		sc.W.note = ""
		sc.W.RunNow(ClientCall{Client: int32(c.Idx), Rpc: c.Rpc}.Event(EvClientCancel))
		fmt.Fprintf(b, "client %d: cancelled", c.Idx)
		if sc.W.note != "" {
			fmt.Fprintf(b, ": %s", sc.W.note)
		}
		b.WriteString("\n")
	case "crash", "restart":
		pd, err := consumer()
		if err != nil {
			return err
		}
		sc.W.note = ""
		if cmd == "crash" {
			sc.W.RunNow(ConsumerStep{Consumer: int32(pd)}.Event(EvCrash))
			sc.dropKind(EvRestart) // the script decides when it comes back
		} else {
			sc.W.RunNow(ConsumerStep{Consumer: int32(pd), Inc: sc.W.Cons[pd].Inc}.Event(EvRestart))
		}
		fmt.Fprintf(b, "%s\n", sc.W.note)
		sc.W.CheckStep()
	case "deliver":
		n, err := num("n", 1)
		if err != nil {
			return err
		}
		if n > maxScenarioSteps {
			return fmt.Errorf("n=%d: at most %d steps a command", n, maxScenarioSteps)
		}
		until := args["until"]
		if until != "" {
			if _, ok := kindByName(until); !ok {
				return fmt.Errorf("until=%s: no such event kind", until)
			}
			n = maxScenarioSteps
		}
		for i := int64(0); i < n; i++ {
			ev, ok := sc.step(b)
			if !ok {
				b.WriteString("(no event pending)\n")
				return nil
			}
			if until != "" && ev.Kind.String() == until {
				return nil
			}
		}
		if until != "" {
			return fmt.Errorf("no %s event ran", until)
		}
	case "drop-reply":
		k, ok := kindByName(args["kind"])
		if !ok {
			return fmt.Errorf("kind=%s: no such event kind", args["kind"])
		}
		i := sc.earliest(k)
		if i < 0 {
			return fmt.Errorf("no %s event pending", args["kind"])
		}
		ev := sc.removeAt(i)
		dc, da := ev.dropSlots()
		fmt.Fprintf(b, "dropped %s due at t=%d (c=%d a=%d)\n", ev.Kind, ev.Tick, dc, da)
	case "align":
		k1, ok1 := kindByName(args["kind"])
		k2, ok2 := kindByName(args["with"])
		if !ok1 || !ok2 {
			return fmt.Errorf("kind=%s with=%s: want two event kinds", args["kind"], args["with"])
		}
		i, j := sc.earliest(k1), sc.earliest(k2)
		if i < 0 || j < 0 {
			return fmt.Errorf("need pending %s and %s events", args["kind"], args["with"])
		}
		tick := sc.W.Q.at(j).Tick
		ev := sc.removeAt(i)
		from := ev.Tick
		sc.W.Schedule(tick, ev)
		fmt.Fprintf(b, "%s moved from t=%d to t=%d (with %s)\n", ev.Kind, from, tick, args["with"])
	case "advance":
		ms, err := num("ms", -1)
		if err != nil || ms < 0 {
			return fmt.Errorf("advance needs ms=N (N >= 0)")
		}
		until := sc.W.Now + ms
		for steps := 0; sc.W.Q.len() > 0 && sc.W.Q.at(0).Tick <= until; steps++ {
			if steps == maxScenarioSteps {
				return fmt.Errorf("advance ms=%d: more than %d steps", ms, maxScenarioSteps)
			}
			sc.step(b)
		}
		sc.W.Now = until
		fmt.Fprintf(b, "t=%d\n", sc.W.Now)
	case "stabilize":
		max, err := num("max", 10000)
		if err != nil {
			return err
		}
		if max > maxScenarioSteps {
			return fmt.Errorf("max=%d: at most %d steps a command", max, maxScenarioSteps)
		}
		for i := int64(0); ; i++ {
			if sc.quiet() {
				fmt.Fprintf(b, "stable at t=%d\n", sc.W.Now)
				return nil
			}
			if i == max {
				return fmt.Errorf("not stable after %d steps", max)
			}
			sc.step(b)
		}
	case "expect":
		sc.describe(b)
	case "partition":
		return sc.partition(b, args, num, consumer) // scenario_nodes.go
	case "decode":
		return sc.decode(b, args, num, clientArg) // scenario_nodes.go
	case "delay":
		return sc.delay(b, args, num) // scenario_end.go
	case "shutdown":
		sc.shutdown(b)
	case "crash-producer":
		sc.crashProducer(b)
	case "finish":
		return sc.finish(b, num)
	default:
		return fmt.Errorf("unknown command %q", cmd)
	}
	return nil
}

// newWorld builds the scenario's world: no client, no fault, fixed delays.
func (sc *Scenario) newWorld(args map[string]string, num func(string, int64) (int64, error)) error {
	s := QuietSettings()
	if v, ok := args["backend"]; ok {
		s.Backend = v
	}
	ints := []struct {
		key string
		dst *int64
	}{{"payload", &s.PayloadBytesMax}, {"consumer-quota", &s.ConsumerQuotaBytes}, {"ttl", &s.DefaultTTLMs},
		{"consumer-timeout", &s.ConsumerTimeoutMs}, {"producer-timeout", &s.ProducerTimeoutMs},
		{"client-timeout", &s.ClientTimeoutMs}, {"collect", &s.CollectPeriodMs}}
	for _, f := range ints {
		v, err := num(f.key, *f.dst)
		if err != nil {
			return err
		}
		*f.dst = v
	}
	s.MaxTTLMs = max(s.MaxTTLMs, s.DefaultTTLMs)
	for _, f := range []struct {
		key string
		dst *int
	}{{"consumers", &s.Consumers}, {"buffers", &s.BuffersPerConsumer}} {
		v, err := num(f.key, int64(*f.dst))
		if err != nil {
			return err
		}
		*f.dst = int(v)
	}
	if err := scenarioNodeArgs(&s, args, num); err != nil {
		return err // topology, decoders, kv-ttl (scenario_nodes.go)
	}
	if err := s.Validate(); err != nil {
		return err
	}
	m, err := ParseMutant(args["mutant"])
	if err != nil {
		return err
	}
	seed, err := num("seed", 1)
	if err != nil {
		return err
	}
	w := NewQuietWorld(uint64(seed), s, Options{Mutant: m})
	w.Tracing = true // notes are what a script prints
	w.StartNodes()
	w.scriptNodes()
	sc.W = w
	return nil
}

// step runs the next event and its checkers and prints it.
func (sc *Scenario) step(b *strings.Builder) (Event, bool) {
	w := sc.W
	ev, ok := w.Q.Pop()
	if !ok {
		return ev, false
	}
	w.Now = ev.Tick
	w.Steps++
	w.note = ""
	w.Dispatch(ev)
	w.CheckStep()
	if w.note != "" || (ev.Kind != EvCollect && ev.Kind != EvClientDeadline) {
		fmt.Fprintf(b, "t=%d %s", w.Now, ev.Kind)
		if w.note != "" {
			fmt.Fprintf(b, ": %s", w.note)
		}
		b.WriteString("\n")
	}
	return ev, true
}

// quiet reports whether only periodic events (the collector) are pending.
func (sc *Scenario) quiet() bool {
	for i := 0; i < sc.W.Q.len(); i++ {
		if sc.W.Q.at(i).Kind != EvCollect {
			return false
		}
	}
	return true
}

// earliest returns the queue index of the earliest pending event of kind k, or -1.
func (sc *Scenario) earliest(k eventKind) int {
	best := -1
	for i := 0; i < sc.W.Q.len(); i++ {
		ev := sc.W.Q.at(i)
		if ev.Kind != k {
			continue
		}
		if b := sc.W.Q.at(max(best, 0)); best < 0 || ev.Tick < b.Tick || (ev.Tick == b.Tick && ev.seq < b.seq) {
			best = i
		}
	}
	return best
}

// removeAt takes item i out of the queue and restores the heap order.
func (sc *Scenario) removeAt(i int) Event {
	return sc.W.Q.removeAt(i)
}

// dropKind removes every pending event of kind k.
func (sc *Scenario) dropKind(k eventKind) {
	for i := sc.earliest(k); i >= 0; i = sc.earliest(k) {
		sc.removeAt(i)
	}
}

func kindByName(name string) (eventKind, bool) {
	for k := eventKind(1); k < numEventKinds; k++ {
		if k.String() == name {
			return k, true
		}
	}
	return nodeKindByName(name) // scenario_nodes.go
}

// describe prints the state a script checks: the producer's table and
// health, each consumer's receives, buffers and health, each client, and
// the ground truth of each entry.
func (sc *Scenario) describe(b *strings.Builder) {
	w := sc.W
	p := w.Prod
	st, _ := p.Health.State()
	fmt.Fprintf(b, "t=%d\n", w.Now)
	fmt.Fprintf(b, "E: health %s; entries %d (removing %d, transfers %d); held %d bytes\n",
		healthName(st, p.Health), p.Table.Entries(), p.Table.PendingRemovals(), p.Table.Transfers(), p.Table.HeldBytes())
	for _, c := range w.Cons {
		if !c.Up {
			fmt.Fprintf(b, "PD%d: down (incarnation %d)\n", c.Idx, c.Inc)
			continue
		}
		st, _ := c.Health.State()
		qb, _ := c.Receives.Quarantine()
		var bufs []string
		for i, bf := range c.Bufs {
			s := "free"
			switch {
			case bf.Quarantined:
				s = "quarantined"
			case bf.Owner != 0:
				s = fmt.Sprintf("owned by r%d", bf.Owner)
			}
			bufs = append(bufs, fmt.Sprintf("%d:%s", i, s))
		}
		fmt.Fprintf(b, "PD%d: health %s; receives in flight %d; quarantined %d; buffers [%s]\n",
			c.Idx, healthName(st, c.Health), c.Receives.Inflight(), qb, strings.Join(bufs, " "))
	}
	for _, c := range w.Clients {
		state := "waiting"
		switch {
		case c.Done:
			state = "done: " + c.Outcome
		case c.Stage == StageIdle:
			state = "idle"
		}
		fmt.Fprintf(b, "client %d: %s\n", c.Idx, state)
	}
	for _, rec := range w.Ledger.All {
		var facts []string
		if rec.Published {
			facts = append(facts, "published")
		}
		if rec.Abandoned {
			facts = append(facts, "abandoned")
		}
		if n := len(rec.Consumptions); n > 0 {
			facts = append(facts, fmt.Sprintf("consumed x%d", n))
		}
		if rec.RemovedCause != "" {
			facts = append(facts, rec.RemovedCause)
		}
		if rec.Quarantined {
			facts = append(facts, "source quarantined")
		}
		table := "left the table"
		if st := p.Table.State(rec.Id); st != 0 {
			table = "table " + st.String()
		}
		fmt.Fprintf(b, "entry of client %d: %s; %s\n", rec.H, strings.Join(facts, ", "), table)
	}
	sc.describeNodes(b) // E+P+D: KV sessions (scenario_nodes.go)
}

func healthName(st handoff.HealthState, h *handoff.Health) string {
	names := map[handoff.HealthState]string{handoff.HealthStarting: "STARTING", handoff.HealthReady: "READY", handoff.HealthDraining: "DRAINING", handoff.HealthNotReady: "NOT_READY"}
	s := names[st]
	if f := h.Failure(); f != "" {
		s += " (" + f + ")"
	}
	return s
}
