#!/usr/bin/env bash
# campaign.sh: a long fuzzing campaign on a machine without Go, from test
# binaries built here with coverage instrumentation:
#
#   tools/fuzz/campaign.sh build             # bin/fuzz.tgz: one instrumented test binary per package
#   tools/fuzz/campaign.sh run SECONDS OUT [TARGET...]
#   tools/fuzz/campaign.sh list              # every target, one "pkg/dir:FuzzName" a line
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
		(cd "$out/$p" && exec "$root/bin/fuzz/${p//\//_}.test" -test.run '^$' -test.fuzz "^$f\$" -test.fuzztime "${secs}s" \
			-test.parallel "$workers" -test.fuzzcachedir "$root/out/fuzzcache/$p" >"$out/logs/${p//\//_}.$f.log" 2>&1) &
		pids+=($!)
	done
	status=0
	for pid in "${pids[@]}"; do wait "$pid" || status=1; done
	for t in "${list[@]}"; do
		p=${t%%:*} f=${t##*:}
		log="$out/logs/${p//\//_}.$f.log"
		execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
		verdict=$(grep -q '^--- FAIL' "$log" && echo FAIL || echo ok)
		echo "$p $f workers=$workers seconds=$secs execs=${execs:-0} execs/s=$(( ${execs:-0} / secs )) $verdict"
	done | tee "$out/summary.txt"
	exit $status
	;;
list)
	for p in "${pkgs[@]}"; do
		for f in $(targets_of "$p"); do echo "$p:$f"; done
	done
	;;
*)
	echo "usage: $0 build | run SECONDS OUT [pkg/dir:FuzzName...] | list" >&2
	exit 2
	;;
esac
