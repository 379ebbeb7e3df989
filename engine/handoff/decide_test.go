package handoff

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestDecide runs the interaction scripts under testdata/decide (one
// consumer table, producer table and Health per file, as etcd raft's
// interaction tests do): each command is an event, its output the actions
// the core decided and the state they left. `go test ./engine/handoff
// -run TestDecide -rewrite` regenerates the expected output.
//
// Commands:
//
//	receive id=<id> payload=<bytes> [buffers=<n>] [to=preflight|registered|requested]
//	transfer-ended id=<id> [ok] [complete] [before-write] [invalid-argument] [unsent] [reason=<text>] [mutants=<m>,...]
//	client-cancelled id=<id> [mutants=<m>,...]
//	copy-ended id=<id> [ok] [quiesced] [reason=<text>]
//	end-quarantine id=<id>
//	publish id=<id> payload=<bytes>
//	claim id=<id>
//	transfer-failed id=<id> [source] [write-ended] [provable] [reason=<text>] [mutants=<m>,...]
//	producer-rejects err=<spent|malformed|foreign|untrusted|wrong-role|draining|cleanup-failed|quarantined|quota|unexpected> [rule=<text>]
//	cleanup-failed reason=<text> [mutants=<m>,...]
//	publish-step id=<id> payload=<bytes> [cancel=during-step|with-output] [mutants=<m>,...]
//	ready-sent id=<id> [cancelled] [send-failed] [mutants=<m>,...]
//
// Mutant names are the Mutants fields in kebab case (release-on-uncertain,
// plain-invalid-argument-definite, refused-connection-uncertain,
// free-source-on-transfer-failure, invalid-argument-after-removal,
// free-on-cancel, swallow-cleanup-failure, revive-late-completion,
// keep-output-after-cancel, keep-carrier-open, cancel-cancels-transfer).
func TestDecide(t *testing.T) {
	datadriven.Walk(t, "testdata/decide", func(t *testing.T, path string) {
		d := newDecideHarness()
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			out, err := d.do(td)
			if err != nil {
				return fmt.Sprintf("error: %v\n", err)
			}
			if err := d.receives.CheckInvariants(); err != nil {
				t.Fatalf("consumer invariants: %v", err)
			}
			if err := d.table.CheckInvariants(); err != nil {
				t.Fatalf("producer invariants: %v", err)
			}
			return out
		})
	})
}

type decideHarness struct {
	entries  map[string]string // script name -> entry id (32 hex digits)
	receives *ConsumerReceives
	table    *ProducerTable
	health   *Health
}

func newDecideHarness() *decideHarness {
	h := NewHealth()
	h.Started()
	return &decideHarness{entries: map[string]string{}, receives: NewConsumerReceives(ConsumerConfig{}), table: NewProducerTable(ProducerConfig{}), health: h}
}

// args parses a command's arguments: key=value, or a bare key ("true").
func args(td *datadriven.TestData) map[string]string {
	a := map[string]string{}
	for _, arg := range td.CmdArgs {
		a[arg.Key] = "true"
		if len(arg.Vals) > 0 {
			a[arg.Key] = strings.Join(arg.Vals, ",")
		}
	}
	return a
}

func parseMutants(s string) (Mutants, error) {
	var m Mutants
	if s == "" {
		return m, nil
	}
	for _, name := range strings.Split(s, ",") {
		switch name {
		case "release-on-uncertain":
			m.ReleaseOnUncertain = true
		case "plain-invalid-argument-definite":
			m.PlainInvalidArgumentDefinite = true
		case "refused-connection-uncertain":
			m.RefusedConnectionUncertain = true
		case "free-source-on-transfer-failure":
			m.FreeSourceOnTransferFailure = true
		case "invalid-argument-after-removal":
			m.InvalidArgumentAfterRemoval = true
		case "free-on-cancel":
			m.FreeOnCancel = true
		case "swallow-cleanup-failure":
			m.SwallowCleanupFailure = true
		case "revive-late-completion":
			m.ReviveLateCompletion = true
		case "keep-output-after-cancel":
			m.KeepOutputAfterCancel = true
		case "keep-carrier-open":
			m.KeepCarrierOpen = true
		case "cancel-cancels-transfer":
			m.CancelCancelsTransfer = true
		default:
			return m, fmt.Errorf("unknown mutant %q", name)
		}
	}
	return m, nil
}

var codeNames = map[Code]string{CodeUnavailable: "UNAVAILABLE", CodeInvalidArgument: "INVALID_ARGUMENT", CodeFailedPrecondition: "FAILED_PRECONDITION",
	CodeResourceExhausted: "RESOURCE_EXHAUSTED", CodeInternal: "INTERNAL"}

// rejectionSentinels names the sentinels producer-rejects takes.
var rejectionSentinels = map[string]error{"spent": ErrSpentReference, "malformed": ErrMalformedReference, "foreign": ErrForeignReference,
	"untrusted": ErrUntrustedPeer, "wrong-role": ErrWrongRole, "draining": ErrDraining, "cleanup-failed": ErrCleanupFailed,
	"quarantined": ErrQuarantined, "quota": ErrQuotaExceeded, "unexpected": errors.New("disk on fire")}

var receiveStateNames = map[ReceiveState]string{ReceivePreflight: "preflight", ReceiveRegistered: "registered", ReceiveRequested: "requested",
	ReceiveSucceeded: "succeeded", ReceiveRejected: "rejected", ReceiveUncertain: "uncertain"}

// entry maps a script's entry name to an entry id the table accepts.
func (d *decideHarness) entry(name string) string {
	if e, ok := d.entries[name]; ok {
		return e
	}
	d.entries[name] = id(len(d.entries) + 1)
	return d.entries[name]
}

func (d *decideHarness) do(td *datadriven.TestData) (string, error) {
	a := args(td)
	m, err := parseMutants(a["mutants"])
	if err != nil {
		return "", err
	}
	var b strings.Builder
	switch td.Cmd {
	case "receive":
		payload, err := strconv.ParseInt(a["payload"], 10, 64)
		if err != nil {
			return "", err
		}
		if err := d.receives.Preflight(a["id"], payload); err != nil {
			return "", err
		}
		if n := a["buffers"]; n != "" {
			k, err := strconv.Atoi(n)
			if err != nil {
				return "", err
			}
			if err := d.receives.SetBuffers(a["id"], k); err != nil {
				return "", err
			}
		}
		to := a["to"]
		if to == "" {
			to = "requested"
		}
		if to != "preflight" {
			if err := d.receives.Registered(a["id"]); err != nil {
				return "", err
			}
		}
		if to == "requested" {
			if err := d.receives.Requested(a["id"]); err != nil {
				return "", err
			}
		}
		fmt.Fprintf(&b, "%s %s\n", a["id"], to)
	case "transfer-ended":
		rd, err := d.receives.EndTransfer(TransferEnded{ReceiveID: a["id"], StatusOK: a["ok"] != "", Complete: a["complete"] != "",
			BeforeWrite: a["before-write"] != "", InvalidArgument: a["invalid-argument"] != "", Unsent: a["unsent"] != "", Reason: a["reason"]}, m)
		d.receiveDecision(&b, rd, err)
	case "client-cancelled":
		rd, ended, err := d.receives.ClientCancelled(a["id"], m)
		if err == nil && !ended {
			if CancelReachesCall(m) {
				b.WriteString("cancel the transfer call: its outcome is uncertain\n")
			} else {
				b.WriteString("wait for the transfer's outcome (C-4)\n")
			}
			d.state(&b)
			break
		}
		d.receiveDecision(&b, rd, err)
	case "copy-ended":
		rd, err := d.receives.EndCopy(CopyEnded{ReceiveID: a["id"], OK: a["ok"] != "", Quiesced: a["quiesced"] != "", Reason: a["reason"]})
		d.receiveDecision(&b, rd, err)
	case "end-quarantine":
		if err := d.receives.EndQuarantine(a["id"]); err != nil {
			return "", err
		}
		buffers, _ := d.receives.Quarantine()
		d.health.QuarantineEnded(buffers)
		d.state(&b)
	case "publish":
		payload, err := strconv.ParseInt(a["payload"], 10, 64)
		if err != nil {
			return "", err
		}
		if err := d.table.Reserve(d.entry(a["id"]), payload); err != nil {
			return "", err
		}
		if err := d.table.CommitPublish(d.entry(a["id"]), 1<<40); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s published\n", a["id"])
	case "claim":
		if err := d.table.ClaimForTransfer(d.entry(a["id"])); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s out of the table, in transfer\n", a["id"])
	case "transfer-failed":
		fd, err := d.table.FailTransfer(TransferFailure{EntryID: d.entry(a["id"]), HasSource: a["source"] != "", WriteEnded: a["write-ended"] != "",
			Provable: a["provable"] != "", Reason: a["reason"]}, m)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "source: %s", fd.Source)
		if fd.FreedEarly {
			b.WriteString(" (freed early: the WRITE may still read it)")
		}
		b.WriteString("\n")
		d.healthChange(&b, fd.Health)
		fmt.Fprintf(&b, "answer: %s rule %s\n", codeNames[fd.Code], fd.Rule)
		d.state(&b)
	case "producer-rejects":
		sentinel, ok := rejectionSentinels[a["err"]]
		if !ok {
			return "", fmt.Errorf("unknown rejection %q", a["err"])
		}
		err := fmt.Errorf("%w: %s", sentinel, a["rule"])
		rule, code := Classify(err)
		if rule == "" {
			rule = "(no rule)"
		}
		mark := "no trailer: the consumer counts it uncertain"
		if BeforeWrite(err) {
			mark = "trailer baton-transfer-rejected: before-write"
		}
		fmt.Fprintf(&b, "%s %s: %s\n", codeNames[code], rule, mark)
	case "cleanup-failed":
		recorded := d.health.CleanupFailed(a["reason"], m)
		fmt.Fprintf(&b, "recorded: %v\n", recorded)
		d.state(&b)
	case "publish-step":
		payload, err := strconv.ParseInt(a["payload"], 10, 64)
		if err != nil {
			return "", err
		}
		cancel, ok := publishCancels[a["cancel"]]
		if !ok {
			return "", fmt.Errorf("unknown cancel %q", a["cancel"])
		}
		id := d.entry(a["id"])
		if err := d.table.Reserve(id, payload); err != nil {
			return "", err
		}
		act := DecidePublishStep(cancel, m)
		fmt.Fprintf(&b, "action: %s\n", act)
		if cancel != NotCancelled {
			fmt.Fprintf(&b, "the wait on the step stops on this cancel: %v\n", StopsOnCancel(cancel, m))
		}
		switch act {
		case PublishAbandon:
			d.table.AbandonPublish(id)
		case PublishWrite:
			if err := d.table.CommitPublish(id, 1<<40); err != nil {
				return "", err
			}
		}
		d.publishState(&b, a["id"])
	case "ready-sent":
		id := d.entry(a["id"])
		act := DecideReadySent(ReadySent{Cancelled: a["cancelled"] != "", SendFailed: a["send-failed"] != ""}, m)
		fmt.Fprintf(&b, "action: %s\n", act)
		if act == PublishRelease {
			if out := d.table.Release(id); out == ReleaseRemove {
				d.table.RemovalDone(id, true)
			}
		}
		d.publishState(&b, a["id"])
	default:
		return "", fmt.Errorf("unknown command %q", td.Cmd)
	}
	return b.String(), nil
}

var publishCancels = map[string]PublishCancel{"": NotCancelled, "during-step": CancelledDuringStep, "with-output": CancelledWithOutput}

// publishState prints the entry's state and the producer's publish counters.
func (d *decideHarness) publishState(b *strings.Builder, name string) {
	st := "GONE"
	if n, ok := entryStateNames[d.table.State(d.entry(name))]; ok {
		st = n
	}
	c := d.table.Counters()
	fmt.Fprintf(b, "state: %s %s; producer entries %d, published %d, abandoned %d, released %d\n", name, st, d.table.Entries(), c.Published, c.Abandoned, c.Released)
}

func (d *decideHarness) receiveDecision(b *strings.Builder, rd ReceiveDecision, err error) {
	if err != nil {
		fmt.Fprintf(b, "error: %v\n", err)
		return
	}
	fmt.Fprintf(b, "outcome: %s\n", receiveStateNames[rd.Outcome])
	fmt.Fprintf(b, "buffers: %s", rd.Buffers)
	if rd.NoProof {
		b.WriteString(" (no proof: for the life of the process)")
	}
	if rd.RetireCarriers {
		b.WriteString(", retire the carriers")
	}
	b.WriteString("\n")
	d.healthChange(b, rd.Health)
	fmt.Fprintf(b, "reply: %s rule %q\n", rd.Reply, rd.Rule)
	d.state(b)
}

// healthChange prints the decided change and carries it out.
func (d *decideHarness) healthChange(b *strings.Builder, h *HealthChange) {
	if h == nil {
		b.WriteString("health: unchanged\n")
		return
	}
	fmt.Fprintf(b, "health: fail %s: %s\n", h.Check, h.Reason)
	d.health.Fail(h.Check, h.Reason)
}

var healthNames = map[HealthState]string{HealthStarting: "STARTING", HealthReady: "READY", HealthDegraded: "DEGRADED", HealthDraining: "DRAINING", HealthNotReady: "NOT_READY"}

func (d *decideHarness) state(b *strings.Builder) {
	qb, qn := d.receives.Quarantine()
	c := d.table.Counters()
	st, _ := d.health.State()
	admit := "admitted"
	if err := d.health.Admit(); err != nil {
		rule, code := Classify(err)
		admit = fmt.Sprintf("%s %s", codeNames[code], rule)
	}
	fmt.Fprintf(b, "state: consumer inflight %d, quarantined %d buffers %d bytes; producer transfers %d, consumed %d, quarantined %d (%d bytes); health %s, new handoffs %s\n",
		d.receives.Inflight(), qb, qn, d.table.Transfers(), c.Consumed, c.Quarantined, c.QuarantinedBytes, healthNames[st], admit)
}
