# baton: conformance and simulation harness for the multimodal encoder handoff.
# The two commands a new user needs: `make demo` and `make test` (README.md).

GO      ?= go
BIN     := bin/baton
PKGS    := ./...

.PHONY: all build demo test sim sweep unit e2e mutants mutants-explore verify proto bench lint clean testlist report-browser-test gpu-check gpu-bench props props-explore scenarios matrix volume e2e-long e2e-invariants python-engine python-bugs crash fuzz ci-long rule-index

all: build

VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/baton-dev/baton/conformance/check.buildVersion=$(VERSION) -X github.com/baton-dev/baton/conformance/check.buildCommit=$(COMMIT)

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/baton

## demo: start the reference engine in each topology (E+PD over the shared directory with mTLS and an
## operator token, Lifecycle plus SE-1 and SE-2; E+PD and E+P+D over tcp with the fault proxy,
## Faults), certify it on the fixture images, write one certification bundle per topology under
## out/report/ and verify each.
demo: build
	$(BIN) demo --report-dir out/report
	for d in out/report/*/; do $(BIN) report verify $$d || exit 1; done

## test: everything CI checks: lint and generated-code checks, unit tests with the race
## detector, the Core suite against real engine processes, the mutant table, the simulator's
## seeds and the cross-implementation matrix.
test: verify unit e2e sim matrix

## unit: every package's tests with the race detector; deploy/ (manifest checks and shard
## processes, nothing for the detector to see) without it, so the large k8s.io/api packages
## compile once, for go vet and the test alike, instead of a second time with -race.
unit:
	$(GO) test -race -count=1 -timeout 15m $$($(GO) list ./... | grep -v -e /conformance/e2e -e /deploy)
	$(GO) test -count=1 -timeout 5m ./deploy/

## e2e: the Core suite against real `baton serve` processes, and every mutant killed.
e2e:
	$(GO) test -count=1 -timeout 20m -v ./conformance/e2e/

## sim: 10,000 seeds of the deterministic simulator over the real lifecycle core (with the
## coverage gate: every fault site fires and every sometimes state is reached, and 1% of the
## passing seeds run twice), and 10,000 seeds of the executor world (batched encoder steps,
## cancellation at every step). Results in out/sim/.
sim: build
	$(BIN) sim --seeds 1..10000 --jobs 2 --progress lines --results out/sim/
	$(BIN) sim executor --seeds 1..10000 --results out/sim/

## sweep: SEEDS (default 1..1000000) in SHARDS (default 4) local baton processes, each placed
## as a Kubernetes Indexed Job places its pods (JOB_COMPLETION_INDEX, BATON_SHARDS), then
## `baton report merge` of their results (out/sweep/; the seed store in out/sweep/store).
SEEDS  ?= 1..1000000
SHARDS ?= 4
sweep: build
	rm -rf out/sweep && mkdir -p out/sweep/shards
	for i in $$(seq 0 $$(($(SHARDS) - 1))); do \
	  JOB_COMPLETION_INDEX=$$i BATON_SHARDS=$(SHARDS) $(BIN) sim --seeds $(SEEDS) --jobs 1 --progress off \
	    --results out/sweep/shards/ --store out/sweep/store > out/sweep/shard-$$i.log 2>&1 & \
	done; wait
	$(BIN) report merge out/sweep/shards --out out/sweep/merged.json

## props: the rapid handoff property against the in-process reference engine (hundreds of
## checks) and the simulator target (thousands), and the mutants it must kill. Fail files
## under conformance/props/testdata/rapid/ are replayed first.
props:
	$(GO) test -count=1 -timeout 10m -v -run 'TestHandoff|TestPropertyKills' ./conformance/props/

## props-explore: the property tests with a fresh rapid seed per test (printed), where make test
## uses a fixed seed per test name; a failure here is replayed with -rapid.seed=N.
props-explore:
	$(GO) test -count=1 -timeout 20m -v -run 'TestHandoff|TestPropertyKills' ./conformance/props/ -args -props.explore

## crash: the crash campaign (tools/crash): kill -9 of E, PD, P and D at chosen points of the
## lifecycle (during a publish, the claim, the WRITE, after the reply), 20 times each, against real
## `baton serve` processes over tcp and the shared directory; every survivor must be READY again
## (p99 within 2 s of the kill), every answer equal the baseline's. Prints SEED= and a table.
crash: build
	$(GO) run ./tools/crash --binary $(BIN) --runs 20

## ci-long: what CI runs after `make test` (not part of it; CI's 90 minutes hold both): the long
## end-to-end tests, the e2e suite again with the engine's invariant checks on, the crash campaign,
## every fuzz target for FUZZTIME, the Python engine's seeded bugs (each must fail exactly the rules
## it declares) and the volume cases.
ci-long: e2e-long e2e-invariants crash fuzz python-bugs volume

## e2e-invariants: the e2e target once more built with -tags invariants (the test and every `baton
## serve` it starts): after each transition of the lifecycle core the engine runs the producer
## table's and the consumer receives' CheckInvariants under its mutex and panics on a violation
## (engine/producer/checked.go, engine/consumer/checked.go), so a broken invariant crashes the engine at the transition that
## broke it. A panic here is an engine bug, whatever the test that met it. Part of make ci-long.
## The mutant tables are left out: a mutant breaks the engine on purpose, and the checks would
## judge it by its own invariants (an executor mutant panicked inside the property, which recovers
## panics, with the driver's mutex held: the row hung until the 20-minute timeout) instead of by
## the cases of its rule, which make e2e's tables already do.
E2E_MUTANT_TESTS := TestMutantKillTable|TestMutantKillTableColumns|TestMutantBundleRejected|TestEPPDCopiesKillConsumerMutants
e2e-invariants:
	$(GO) test -tags invariants -count=1 -timeout 20m -v -skip '$(E2E_MUTANT_TESTS)' ./conformance/e2e/

## e2e-long: the long end-to-end tests that make test leaves out (about 5 minutes on 2 cores): `baton
## demo`'s three certifications with their bundles verified, and a vendor's profile whose launch
## section starts the reference engine as plain processes, certified at Faults twice in a row.
e2e-long:
	$(GO) test -count=1 -timeout 20m -run 'TestDemoBundleVerifies|TestLaunchProfileCertifiesTwice' -v ./conformance/e2e/ -args -e2e.long

## volume: the volume cases (BATON_VOLUME=1; B-1's 100 large 1920x1080 images, 8 in flight, each
## answer equal to the baseline): against real engine processes they pass, and in process they
## kill b1-shared-receive-buffer. Part of make ci-long, not of make test.
volume:
	BATON_VOLUME=1 $(GO) test -count=1 -timeout 20m -run 'TestVolumeCases' -v ./conformance/e2e/
	BATON_VOLUME=1 $(GO) test -count=1 -timeout 20m -run 'TestInProcessMutantsKilled/b1-shared-receive-buffer' -v ./conformance/mutants/

## scenarios: the datadriven lifecycle scripts under sim/world/testdata/scenarios
## (REWRITE=1 regenerates their expected output).
scenarios:
	$(GO) test -count=1 -run 'TestScenarios' ./sim/world/ $(if $(REWRITE),-rewrite,)

## mutants: the kill table, mutant x {suite, props, sim}: the suite's cases of the rule
## (TestMutantKillTable; no rule may fail that the mutant does not declare in AlsoBreaks),
## then the handoff property from the row's fixed seed and the simulator's counterpart, and
## the three columns side by side (TestMutantKillTableColumns); every cell must be KILLED.
## The table is the same on every run of a commit but for the times in parentheses.
mutants:
	$(GO) test -count=1 -timeout 20m -run 'TestMutantKillTable' -v ./conformance/e2e/

## mutants-explore: the kill table with a fresh rapid seed per row and shrinking, to find
## rows whose kill depends on the draw (`make mutants` uses each row's fixed seed,
## Mutant.Seed, and reports the first failing check unshrunk, so it gives the same table
## on every run). The seeds are printed; replay one row with
## go test -run 'TestMutantKillTableColumns/<mutant>' ./conformance/e2e/ -args -e2e.seed=N
mutants-explore:
	$(GO) test -count=1 -timeout 40m -run 'TestMutantKillTable' -v ./conformance/e2e/ -args -e2e.explore

## verify: formatting, vet, generated code up to date (protos; the test list
## conformance/conformance.yaml against ../shared/spec/CONTRACT.md), go.mod tidy.
verify: lint
	$(GO) test -count=1 -run 'TestGeneratedCodeIsCurrent|TestExtensionFieldNumbers' ./proto/...
	$(GO) test -count=1 -run 'TestCommittedListIsCurrent|TestCommittedListMatchesRegistry' ./conformance/testlist/
	$(GO) test -count=1 -run 'TestCopyIsCurrent|TestWireCopyIsCurrent' ./internal/contract/
	$(GO) mod tidy -diff

## testlist: regenerate conformance/conformance.yaml from ../shared/spec/CONTRACT.md and the case registry,
## and the compiled-in copy internal/contract/CONTRACT.md (report.html's rule texts, the bundle's CONTRACT.md).
testlist:
	$(GO) run ./conformance/testlist/gen

## rule-index: regenerate conformance/rules.yaml, every place of each CONTRACT rule (the engine's
## decision, the suite's cases, the property's actions, the simulator's checkers, the mutants), from
## the code (tools/ruleindex; docs/rule-index.md). tools/ruleindex's test, in make test's unit run,
## fails when the committed file is stale or lists a place that does not exist.
rule-index:
	$(GO) run ./tools/ruleindex

## report-browser-test: render report.html (a hand-built failing run and a real mutant run) in
## headless Chromium; screenshots are kept under out/artifacts/.
report-browser-test:
	mkdir -p out/artifacts
	$(GO) test -count=1 -artifacts -outputdir $(CURDIR)/out/artifacts -run 'Browser|TestMutantBundleRejected' -v ./reports/ ./conformance/e2e/

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

## proto: regenerate proto/openengine/v1 with pinned buf, protoc-gen-go and protoc-gen-go-grpc.
proto:
	./tools/proto/generate.sh

## bench: encoder per preset, shared-directory round trip, executor bookkeeping, tcp handoff control
## overhead next to a unary RPC and base-preset handoff latency, the decode budget under 100
## concurrent 36-megapixel PNGs (peak RSS, Health p99; the engine under a 3 GiB memory cap),
## 1000 concurrent handoffs with 30% cancelled at random (seeded) on tcp and shared_dir (nothing
## left afterwards), the Core suite's wall time, and the simulator's events/s against a bare event
## loop's (BenchmarkSimulator's world and bare-loop: #16 asks at least 10%; read it on an idle machine).
bench: build
	$(GO) test -run '^$$' -bench . -benchtime 10x ./engine/encoder/ ./engine/cache/shareddir/ ./engine/lm/ ./engine/xfer/ ./engine/executor/
	$(GO) test -run '^$$' -bench BenchmarkExecutorOverhead -benchtime 1x ./engine/server/
	$(GO) test -run '^$$' -bench BenchmarkTransferControlOverhead -benchtime 100x ./engine/server/
	$(GO) test -run '^$$' -bench BenchmarkTransferLatencyBase -benchtime 50x ./engine/server/
	$(GO) test -run '^$$' -bench BenchmarkDecodeBudgetLoad -benchtime 1x ./engine/server/
	$(GO) test -run '^$$' -bench BenchmarkHandoffLoad -benchtime 1x -timeout 20m ./engine/server/
	$(GO) test -count=1 -run 'TestCoreSuiteBase' -v ./conformance/e2e/ -args -e2e.bench
	$(GO) test -run '^$$' -bench BenchmarkSimulator -benchtime 2s ./sim/world/

## fuzz: every fuzz target (func FuzzXxx in a _test.go file) of every package, one after the
## other, each for FUZZTIME (default 30s). Their seed corpora (f.Add and testdata/fuzz/FuzzXxx/)
## already run in `go test`; a crash found here fails and leaves its input under the package's
## testdata/fuzz/FuzzXxx/: commit it with the fix. A bare "context deadline exceeded" at the
## -fuzztime boundary with no input written is Go 1.26's fuzz-coordinator race (go.dev/issue/75804),
## not a finding: the target's seed corpus is replayed instead (tools/fuzz/campaign.sh).
FUZZTIME ?= 30s
fuzz:
	tools/fuzz/campaign.sh intree $(FUZZTIME)


clean:
	rm -rf bin out

## gpu-check: GPU tests (NVML, CUDA through dlopen, the CUDA encoder against the CPU one, the
## cuda_ipc device; they skip without a GPU), then an E+PD pair on cuda:0 over cuda_ipc certified
## at the Core level by `baton check --certify`, the Faults-level cases against the same pair
## behind the fault proxy, and the Core cases against E+P+D (out/gpu-check/). On the device machine (no Go
## there): `tools/gpu/gpu-check.sh build` here, carry bin/gpu, then `tools/gpu/gpu-check.sh run`.
gpu-check:
	tools/gpu/gpu-check.sh

## gpu-bench: CUDA encoder, device copy, cuda_ipc handoff and E+PD time-to-first-token
## benchmarks, written to out/gpu-bench/gpu-bench.md (needs bin/gpu from gpu-check.sh build).
gpu-bench:
	tools/gpu/gpu-bench.sh

PY       ?= /usr/bin/python3
PYENGINE := examples/python-engine

## python-engine: the Python engine (examples/python-engine, a second implementation of the wire
## profile): generate its gRPC stubs with Debian's protoc and grpc_python_plugin into
## examples/python-engine/build/gen, then run its unit tests (strict PNG decoder, reference codec,
## content hash, shared directory, safetensors entries; a few seconds).
python-engine:
	$(PYENGINE)/build.sh
	cd $(PYENGINE)/tests && $(PY) -m unittest -q

## matrix: the cross-implementation matrix at Core (issue 13): {Go, Python} E x {Go, Python} PD on
## the tiny presets, each pair certified by baton check from a profile whose launch section starts
## it (the baseline is the consumer implementation's aggregated engine), then `baton report matrix`
## (out/matrix/). About 40 s after the build.
matrix: build python-engine
	$(PY) $(PYENGINE)/run_bugs.py --report-dir out/matrix matrix

## python-bugs: every seeded bug of the Python engine (examples/python-engine/pyengine/bugs.py)
## against `baton check`: the rules that fail must be exactly the ones the bug declares (ci-long).
python-bugs: build python-engine
	$(PY) $(PYENGINE)/run_bugs.py bugs
