#!/usr/bin/env bash
# campaign.sh: a long fuzzing campaign on a machine without Go, from test
# binaries built here with coverage instrumentation:
#
#   tools/fuzz/campaign.sh build             # bin/fuzz.tgz: one instrumented test binary per package
#   tools/fuzz/campaign.sh run SECONDS OUT [TARGET...]
#   tools/fuzz/campaign.sh list              # every target, one "pkg/dir:FuzzName" a line
#   tools/fuzz/campaign.sh intree SECONDS    # make fuzz: every target in the tree, one after the other, with go test
#   tools/fuzz/campaign.sh classify LOG EXIT # a fuzz run's verdict from its output and exit code
#
# Verdicts: ok; FAIL when the run wrote a failing input or failed any other
# way, or reported fewer than FUZZ_MIN_EXECS executions (it fuzzed nothing); ok (boundary race) when it failed only with a bare "context deadline
# exceeded" at the -fuzztime boundary and wrote no input: Go 1.26's fuzz
# coordinator reports its own shutdown that way under load (go.dev/issue/75804,
# fixed in Go 1.27), never a finding. The target's seed corpus is replayed
# then, and must pass.
#
# Minimization of a new interesting input is bounded by FUZZ_MINIMIZE
# (default 5s, go test's -fuzzminimizetime; Go's own default is 60s): a
# scenario script is minimized at a few hundred executions per second
# (each candidate runs the simulator), so with the default one new input
# took FuzzScenario's whole 30 s run, 26 executions and a pass that had
# fuzzed nothing.
minimize=${FUZZ_MINIMIZE:-5s}
#
# `run` fuzzes every target (or the named ones, "pkg/dir:FuzzName") at once,
# one worker each (more when few targets run; FUZZ_WORKERS sets it), for SECONDS, each in a copy of
# its package's testdata/ under OUT (so a crash's input lands in
# OUT/<pkg>/testdata/fuzz/<FuzzName>/), with its cache in out/fuzzcache (a
# later run goes on from it), and writes OUT/summary.txt: per target the
# executions, executions per second and the verdict. `make fuzz` is the
# short, in-tree form of the same.
set -euo pipefail
cd "$(dirname "$0")/../.."

# Every package with a fuzz target, found the way the Makefile's `fuzz:`
# target finds them (a `func FuzzXxx` in a _test.go file), so a new target
# is in the campaign without editing this list.
mapfile -t pkgs < <(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sed 's|^\./||' | sort -u)

targets_of() { grep -h '^func Fuzz' "$1"/*_test.go | sed 's/^func \(Fuzz[A-Za-z0-9_]*\).*/\1/' | sort -u; }

# min_execs is the fewest executions a passing run must report
# (FUZZ_MIN_EXECS, default 1000): fewer means the run fuzzed nothing (its
# time went to minimizing, or every input hung), a pass on a stub.
min_execs=${FUZZ_MIN_EXECS:-1000}

# classify LOG EXIT prints a fuzz run's verdict (see the top of this file).
classify() {
	local log=$1 code=$2 execs
	execs=$( (grep -o 'execs: [0-9]*' "$log" || true) | tail -1 | cut -d' ' -f2)
	if [ "$code" = 0 ] && ! grep -q '^--- FAIL' "$log"; then
		if [ "${execs:-0}" -lt "$min_execs" ]; then
			echo "FAIL (${execs:-0} executions, fewer than $min_execs: fuzzed nothing)"
		else
			echo ok
		fi
	elif grep -q 'Failing input written to\|^panic:\|^    [a-z_]*_test.go:[0-9]*:' "$log"; then
		echo FAIL
	elif grep -q '^    context deadline exceeded$' "$log" && [ "$(grep -c '^--- FAIL' "$log")" = 1 ]; then
		if [ "${execs:-0}" -lt "$min_execs" ]; then
			echo "FAIL (${execs:-0} executions, fewer than $min_execs: fuzzed nothing)"
		else
			echo "ok (boundary race)"
		fi
	else
		echo FAIL
	fi
}

case "${1:-}" in
build)
	rm -rf bin/fuzz && mkdir -p bin/fuzz
	for p in "${pkgs[@]}"; do
		CGO_ENABLED=0 go test -c -o "bin/fuzz/${p//\//_}.test" -gcflags='all=-d=libfuzzer' -ldflags='-s -w' "./$p"
	done
	tar czf bin/fuzz.tgz -C bin fuzz
	ls -la bin/fuzz.tgz
	;;
run)
	root=$PWD secs=$2
	mkdir -p "$3"
	out=$(cd "$3" && pwd)
	shift 3
	[ -d bin/fuzz ] || tar xzf bin/fuzz.tgz -C bin
	list=("$@")
	if [ ${#list[@]} -eq 0 ]; then
		for p in "${pkgs[@]}"; do
			for f in $(targets_of "$p"); do list+=("$p:$f"); done
		done
	fi
	workers=${FUZZ_WORKERS:-$(($(nproc) / ${#list[@]}))}
	[ "$workers" -ge 1 ] || workers=1
	mkdir -p "$out/logs" out/fuzzcache
	pids=()
	for t in "${list[@]}"; do
		p=${t%%:*} f=${t##*:}
		mkdir -p "$out/$p"
		[ -d "$out/$p/testdata" ] || cp -r "$p/testdata" "$out/$p/" 2>/dev/null || mkdir -p "$out/$p/testdata"
		(cd "$out/$p" && exec "$root/bin/fuzz/${p//\//_}.test" -test.run '^$' -test.fuzz "^$f\$" -test.fuzztime "${secs}s" -test.fuzzminimizetime "$minimize" \
			-test.parallel "$workers" -test.fuzzcachedir "$root/out/fuzzcache/$p" >"$out/logs/${p//\//_}.$f.log" 2>&1) &
		pids+=($!)
	done
	status=0
	for pid in "${pids[@]}"; do wait "$pid" || true; done
	for t in "${list[@]}"; do
		p=${t%%:*} f=${t##*:}
		log="$out/logs/${p//\//_}.$f.log"
		execs=$( (grep -o 'execs: [0-9]*' "$log" || true) | tail -1 | cut -d' ' -f2)
		code=0
		grep -q '^--- FAIL' "$log" && code=1
		verdict=$(classify "$log" "$code")
		echo "$p $f workers=$workers seconds=$secs execs=${execs:-0} execs/s=$(( ${execs:-0} / secs )) $verdict"
	done | tee "$out/summary.txt"
	grep -q ' FAIL' "$out/summary.txt" && status=1
	exit $status
	;;
classify)
	classify "$2" "$3"
	;;
intree)
	secs=${2:-30s}
	# The 1000-execution floor is for runs of 30 s or more (make ci-long's); a
	# shorter FUZZTIME, e.g. 3s by hand, is judged on failures alone.
	n=${secs%s}
	if [ -z "${FUZZ_MIN_EXECS:-}" ] && [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -lt 30 ]; then min_execs=0; fi
	failed=()
	log=$(mktemp)
	for p in "${pkgs[@]}"; do
		for f in $(targets_of "$p"); do
			echo "== fuzz ./$p $f for $secs"
			code=0
			go test -run '^$' -fuzz "^$f\$" -fuzztime "$secs" -fuzzminimizetime "$minimize" "./$p" >"$log" 2>&1 || code=$?
			grep -v '^cgo-gcc-prolog\|nvml\|^In file included\|^ *[0-9]* | \|^ *| \|^/root/go/pkg/mod' "$log" | tail -n 8
			verdict=$(classify "$log" "$code")
			if [ "$verdict" = "ok (boundary race)" ]; then
				echo "   $f: the fuzz coordinator's shutdown race at -fuzztime (go.dev/issue/75804), no failing input written; replaying its seed corpus"
				go test -count=1 -run "^$f\$" "./$p" >"$log" 2>&1 || verdict=FAIL
			fi
			echo "   $f: $verdict"
			[[ "$verdict" == FAIL* ]] && failed+=("$p:$f")
		done
	done
	rm -f "$log"
	if [ ${#failed[@]} -gt 0 ]; then
		echo "fuzz: FAILED: ${failed[*]} (a failing input, if one was written, is under the package's testdata/fuzz/: commit it with the fix; \"fuzzed nothing\" means too few executions, no input)"
		exit 1
	fi
	echo "fuzz: every target passed"
	;;
list)
	for p in "${pkgs[@]}"; do
		for f in $(targets_of "$p"); do echo "$p:$f"; done
	done
	;;
*)
	echo "usage: $0 build | run SECONDS OUT [pkg/dir:FuzzName...] | list | intree SECONDS | classify LOG EXIT" >&2
	exit 2
	;;
esac
