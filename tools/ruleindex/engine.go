package main

import (
	"fmt"
	"go/ast"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	"github.com/baton-dev/baton/conformance/testlist"
)

// engineDecisions is hand-kept (the one column of the index that is): for
// each rule, the reference engine's functions that make its decision, the
// lifecycle core's first (engine/handoff, engine/executor), then the
// server's. TestIndexPlacesExist looks each one up (go/ast), so a rename
// fails the test; `go run ./tools/ruleindex -candidates` lists the engine
// functions whose messages name each rule, for a rule that needs an entry.
var engineDecisions = map[string][]string{
	"SU-1": {"engine/handoff/producer.go:(*ProducerTable).ClaimForTransfer", "engine/cache/shareddir/claim.go:Claim", "engine/cache/shareddir/mutants.go:Receive", "engine/cache/shareddir/release.go:(*Dir).Remove", "engine/server/consumer.go:defaultClaim", "engine/server/transfer.go:(*Engine).claimForTransfer", "engine/producer/release.go:(*Driver).Release"},
	"SU-2": {"engine/handoff/admit.go:AdmitTransfer", "engine/handoff/admit.go:AdmitReceive", "engine/cache/shareddir/claim.go:openError", "engine/server/consumer.go:(*Engine).receive"},
	"SU-3": {"engine/handoff/producer.go:(*ProducerTable).Release", "engine/handoff/producer.go:(*ProducerTable).ExpireBeforeRelease", "engine/handoff/producer.go:(*ProducerTable).RemovalDone", "engine/handoff/producer.go:AnswerRelease", "engine/server/control.go:(*Engine).abortEncoderCache"},
	"SU-4": {"engine/handoff/reference.go:ParseReference", "engine/handoff/outer.go:checkOuter", "engine/handoff/admit.go:AdmitTransfer", "engine/server/consumer.go:(*Engine).parseReference"},
	"SU-5": {"engine/handoff/reference.go:Reference.Verify", "engine/handoff/reference.go:Reference.CheckIDs", "engine/handoff/admit.go:AdmitConsume", "engine/handoff/admit.go:AdmitTransfer", "engine/cache/shareddir/names.go:NewEntryID"},
	"SU-6": {"engine/handoff/producer.go:EntryID", "engine/cache/shareddir/names.go:NewEntryID", "engine/cache/shareddir/write.go:(*Dir).Write"},
	"L-1":  {"engine/handoff/admit.go:AdmitConsume", "engine/handoff/admit.go:AdmitTransfer", "engine/handoff/reference.go:ParseReference", "engine/server/decodeprep.go:ParseDecodePreparation"},
	"L-2":  {"engine/server/kvdecode.go:(*Engine).checkPreparation"},
	"L-3":  {"engine/handoff/admit.go:AdmitModality", "engine/server/media.go:checkModality"},
	"L-4":  {"engine/handoff/admit.go:AdmitRole", "engine/server/inference.go:checkRole", "engine/server/kvdecode.go:checkDecodeRole"},
	"L-5":  {"engine/handoff/producer.go:(*ProducerTable).Reserve", "engine/handoff/consumer.go:(*ConsumerReceives).Preflight"},
	"L-6":  {"engine/encoder/decode.go:validateStrict", "engine/server/media.go:(*Engine).decodeMediaBudgeted"},
	"N-1":  {"engine/handoff/admit.go:AdmitConsume", "engine/server/consumer.go:(*Engine).parseReference", "engine/server/kvsession.go:parseKVSessionRef"},
	"N-2":  {"engine/server/inference.go:startsHandoff", "engine/server/kvdecode.go:(*Engine).runDecode"},
	"S-1":  {"engine/handoff/health.go:(*Health).DecideShutdown", "engine/handoff/health.go:(*Health).DecideShutdownWith", "engine/server/control.go:(*control).Shutdown"},
	"S-2":  {"engine/handoff/producer.go:(*ProducerTable).Drain", "engine/handoff/producer.go:(*ProducerTable).DrainDone", "engine/handoff/health.go:(*Health).Admit", "engine/server/serve.go:(*Engine).Drain"},
	"S-3":  {"engine/server/cudaipc.go:(*Engine).collectGPU"},
	"S-4":  {"engine/server/serve.go:(*Engine).Drain", "engine/server/serve.go:(*Server).Run", "engine/server/producer.go:(*Engine).drainProducer", "engine/producer/drain.go:(*Driver).Drain"},
	"B-1":  {"engine/lm/model.go:(*Model).Prefill", "engine/lm/decode.go:(*Model).Decode", "engine/server/inference.go:(*Engine).generate"},
	"B-2":  {"engine/lm/prefixcache.go:DefaultPrefixKey", "engine/lm/mutants.go:PrefixKeyWith", "engine/lm/model.go:(*Model).identities"},
	"H-1":  {"engine/contenthash/contenthash.go:ContentHash", "engine/contenthash/mutants.go:Of", "engine/handoff/reference.go:ValidContentHash"},
	"H-2":  {"engine/lm/model.go:(*Model).identities", "engine/lm/prefixcache.go:DefaultPrefixKey", "engine/lm/mutants.go:PrefixKeyWith"},
	"H-3":  {"engine/handoff/reference.go:ParseReference", "engine/server/decodeprep.go:ParseDecodePreparation"},
	"H-4":  {"engine/contenthash/contenthash.go:ContentHash", "engine/contenthash/mutants.go:Of", "engine/encoder/datauri.go:DecodeDataURI"},
	"H-5":  {"engine/lm/mutants.go:ImageIdentity", "engine/server/media.go:(*Engine).imageIdentity"},
	"C-1":  {"engine/handoff/producer.go:(*ProducerTable).AbandonPublish", "engine/handoff/publishend.go:DecidePublishStep", "engine/executor/request.go:(*Executor).Cancel", "engine/server/producer.go:(*Engine).publish", "engine/producer/publish.go:(*Publish).StepEnded", "engine/producer/publish.go:(*Publish).End"},
	"C-2":  {"engine/executor/batch.go:(*Executor).EncoderDone", "engine/handoff/publishend.go:DecidePublishStep", "engine/executor/request.go:(*Executor).Cancel", "engine/server/executor.go:(*execDriver).runStep"},
	"C-3":  {"engine/executor/request.go:(*Executor).Release", "engine/handoff/publishend.go:DecideReadySent", "engine/executor/request.go:(*Executor).dropView", "engine/server/producer.go:(*Engine).publish", "engine/producer/publish.go:(*Publish).ReadySent"},
	"C-4":  {"engine/handoff/decide.go:(*ConsumerReceives).ClientCancelled", "engine/handoff/decide.go:CancelReachesCall", "engine/server/transfer.go:(*Engine).transferReceive", "engine/server/transfer.go:(*Engine).callTransfer", "engine/server/cudaipc.go:(*Engine).ipcReceive"},
	"C-5":  {"engine/server/control.go:(*control).Abort", "engine/server/inference.go:(*Engine).generate"},
	"C-6":  {"engine/executor/batch.go:(*Executor).EncoderFailed", "engine/handoff/producer.go:(*ProducerTable).AbandonPublish", "engine/handoff/producer.go:(*ProducerTable).EncoderFailed", "engine/producer/publish.go:(*Publish).EncoderFailed", "engine/server/executor.go:(*execDriver).applyLocked"},
	"C-7":  {"engine/handoff/publishend.go:DecideReadySent", "engine/server/producer.go:(*Engine).publish", "engine/producer/publish.go:(*Publish).ReadySent"},
	"R-1":  {"engine/executor/request.go:(*Executor).ContextComputations", "engine/executor/request.go:(*Executor).ContextComputed", "engine/server/executor.go:(*execRequest).contextComputed"},
	"R-2":  {"engine/executor/request.go:(*Executor).Preempt", "engine/server/executor.go:(*execRequest).preempt"},
	"X-1": {"engine/handoff/decide.go:(*Health).CleanupFailed", "engine/handoff/health.go:(*Health).Fail", "engine/handoff/producer.go:(*ProducerTable).RemovalFailed", "engine/producer/removal.go:(*Driver).FinishRemoval", "engine/server/engine.go:(*Engine).failCleanup",
		// where the drivers report a failed cleanup (Env.FailCleanup)
		"engine/consumer/cudaipc.go:(*Driver).ReleaseIPC", "engine/consumer/cudaipc.go:(*Driver).FailedCopy", "engine/consumer/tcp.go:(*Driver).Release",
		"engine/kvsession/sessions.go:(*Driver).Free", "engine/kvsession/read.go:(*Driver).deregisterBuffer",
		"engine/producer/drain.go:(*Driver).Drain", "engine/producer/cudaipc.go:(*Driver).FailLend", "engine/producer/cudaipc.go:(*Driver).ReturnLoan",
		"engine/producer/transfer.go:(*Driver).Done", "engine/producer/transfer.go:(*Driver).Fail", "engine/producer/collect.go:(*Driver).Collect"},
	"X-2":  {"engine/handoff/producer.go:(*ProducerTable).Expire", "engine/handoff/producer.go:(*ProducerTable).Collect", "engine/server/producer.go:(*Engine).expire", "engine/producer/collect.go:(*Driver).Expire", "engine/producer/collect.go:(*Driver).Collect", "engine/cache/shareddir/producer.go:(*Dir).Collect", "engine/cache/shareddir/collect.go:(*Dir).CollectOrphans"},
	"Q-1":  {"engine/handoff/decide.go:(*ConsumerReceives).EndTransfer", "engine/handoff/decide.go:(*ConsumerReceives).EndCopy", "engine/handoff/consumer.go:(*ConsumerReceives).Uncertain", "engine/consumer/tcp.go:(*Driver).EndTCP", "engine/consumer/tcp.go:(*Driver).Quarantine", "engine/consumer/cudaipc.go:(*Driver).QuarantineIPC"},
	"Q-2":  {"engine/handoff/decide.go:decideTransferEnded", "engine/handoff/decide.go:BeforeWrite", "engine/server/transfer.go:transferCall.refusal", "engine/server/transfer.go:beforeWrite"},
	"Q-3":  {"engine/handoff/decide.go:(*ProducerTable).FailTransfer", "engine/handoff/producer.go:(*ProducerTable).ClaimForTransfer", "engine/handoff/producer.go:(*ProducerTable).TransferFailed", "engine/server/transfer.go:(*Engine).transferEncoderCache", "engine/server/transfer.go:(*Engine).failTransfer", "engine/producer/transfer.go:(*Driver).Fail", "engine/server/cudaipc.go:(*Engine).failIPCLend", "engine/producer/cudaipc.go:(*Driver).FailLend"},
	"Q-4":  {"engine/handoff/consumer.go:(*ConsumerReceives).Preflight", "engine/handoff/health.go:(*Health).Admit"},
	"Q-5":  {"engine/server/transfer.go:(*Engine).transferReceive", "engine/producer/transfer.go:(*Driver).Write", "engine/producer/release.go:(*Driver).Release"},
	"Q-6":  {"engine/handoff/consumer.go:(*ConsumerReceives).EndQuarantine", "engine/consumer/quarantine.go:OnProof", "engine/consumer/quarantine.go:(*Receives).RemoveQuarantine", "engine/server/quarantine.go:(*Engine).enterQuarantine", "engine/server/quarantine.go:(*Engine).endQuarantine"},
	"SE-1": {"engine/server/security.go:(*security).peerCredentials", "engine/server/security.go:loadSecurity", "engine/server/serve.go:(*Server).ServeMetrics"},
	"SE-2": {"engine/server/security.go:(*Engine).authorizeOperator", "engine/server/security.go:(*Engine).authorizeAbort"},
	"SE-3": {"engine/server/trust.go:(*peerTrust).endpoint", "engine/server/trust.go:(*peerTrust).address", "engine/server/transfer.go:(*Engine).producerEndpoint"},
	"SE-4": {"engine/handoff/decide.go:CancelReachesCall", "engine/server/budget.go:(*decodeBudget).reserve", "engine/server/transfer.go:(*Engine).transferReceive", "engine/server/transfer.go:(*Engine).callTransfer"},
	"SE-5": {"engine/server/serve.go:servingStatus", "engine/server/quarantine.go:(*Engine).healthChanged"},
}

// printCandidates prints, for each rule, the functions of engine/ whose
// string literals (errors, log lines) name it, with how many literals do:
// where to look when engineDecisions needs an entry.
func printCandidates(root string) error {
	l, err := testlist.Committed()
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, r := range l.Rules {
		known[r.Rule] = true
	}
	counts, err := engineMentions(root, known)
	if err != nil {
		return err
	}
	for _, r := range l.Rules {
		fmt.Printf("%s (now: %s)\n", r.Rule, strings.Join(engineDecisions[r.Rule], ", "))
		for _, p := range byCount(counts[r.Rule]) {
			fmt.Printf("  %3d %s\n", counts[r.Rule][p], p)
		}
	}
	return nil
}

// byCount returns the places of counts, most literals first, then by name.
func byCount(counts map[string]int) []string {
	places := make([]string, 0, len(counts))
	for p := range counts {
		places = append(places, p)
	}
	sort.Slice(places, func(i, j int) bool {
		if counts[places[i]] != counts[places[j]] {
			return counts[places[i]] > counts[places[j]]
		}
		return places[i] < places[j]
	})
	return places
}

// engineMentions counts, per known rule ID, the string literals (errors,
// log lines) of each function of engine/ that name it: rule -> place ->
// count. The index lists them as engine_mentions, so a function that names
// a rule is never missing from it even when engineDecisions leaves it out.
func engineMentions(root string, known map[string]bool) (map[string]map[string]int, error) {
	dirs, err := goDirs(root, "engine")
	if err != nil {
		return nil, err
	}
	counts := map[string]map[string]int{}
	for _, dir := range dirs {
		pkg, err := loadPkg(root, dir)
		if err != nil {
			return nil, err
		}
		for _, f := range pkg.Funcs {
			if f.Decl.Body == nil {
				continue
			}
			ast.Inspect(f.Decl.Body, func(n ast.Node) bool {
				if e, ok := n.(ast.Expr); ok {
					if s, ok := stringLit(e); ok {
						for _, id := range ruleIDPattern.FindAllString(s, -1) {
							if known[id] {
								if counts[id] == nil {
									counts[id] = map[string]int{}
								}
								counts[id][f.Place()]++
							}
						}
					}
				}
				return true
			})
		}
	}
	return counts, nil
}

// goDirs returns dir and its subdirectories holding non-test Go files
// (slash paths from root), testdata left out.
func goDirs(root, dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(filepath.Join(root, filepath.FromSlash(dir)), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() {
			m, _ := filepath.Glob(filepath.Join(path, "*.go"))
			for _, f := range m {
				if !strings.HasSuffix(f, "_test.go") {
					rel, err := filepath.Rel(root, path)
					if err != nil {
						return err
					}
					out = append(out, filepath.ToSlash(rel))
					break
				}
			}
		}
		return nil
	})
	return out, err
}
