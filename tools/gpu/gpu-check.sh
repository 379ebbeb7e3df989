#!/usr/bin/env bash
# gpu-check.sh: build and run baton's GPU tests (gpu/nvml, gpu/cuda,
# engine/encoder/cuda) on a machine with an NVIDIA GPU.
#
#   tools/gpu/gpu-check.sh build   build the test binaries into bin/gpu/ (needs Go, no GPU)
#   tools/gpu/gpu-check.sh run     run the binaries in bin/gpu/ (needs the GPU, not Go)
#   tools/gpu/gpu-check.sh         build (when Go is on PATH), then run
#
# The split exists because the device machine has no Go toolchain: build here,
# carry bin/ there, run there. Logs go to $OUT_DIR (default out/gpu-check):
# one <binary>.log per test binary and nvidia-smi.txt. Exit status: 0 when every
# binary passed (skips count as passing only when BATON_GPU_REQUIRED is unset;
# with BATON_GPU_REQUIRED=1 a test that skipped for lack of a GPU fails the run).
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=bin/gpu
OUT_DIR=${OUT_DIR:-out/gpu-check}

build() {
	mkdir -p "$BIN"
	set -e
	# go-nvml needs cgo; the purego fallback is what CGO_ENABLED=0 binaries use.
	CGO_ENABLED=1 go test -c -ldflags="-s -w" -o "$BIN/nvml-cgo.test" ./gpu/nvml
	CGO_ENABLED=0 go test -c -ldflags="-s -w" -o "$BIN/nvml-nocgo.test" ./gpu/nvml
	CGO_ENABLED=1 go test -c -ldflags="-s -w" -o "$BIN/cuda.test" ./gpu/cuda
	CGO_ENABLED=0 go test -c -ldflags="-s -w" -o "$BIN/cuda-nocgo.test" ./gpu/cuda
	CGO_ENABLED=1 go test -c -ldflags="-s -w" -o "$BIN/cudaenc.test" ./engine/encoder/cuda
	set +e
	echo "built: $(ls "$BIN")"
}

run() {
	mkdir -p "$OUT_DIR"
	{ nvidia-smi 2>&1 || echo "nvidia-smi: not available"; } >"$OUT_DIR/nvidia-smi.txt"
	head -n 12 "$OUT_DIR/nvidia-smi.txt"
	local status=0 t
	# cuda-nocgo runs the driver-level tests only (the same code, built without cgo).
	for t in nvml-cgo nvml-nocgo cuda cuda-nocgo cudaenc; do
		local bin="$BIN/$t.test" args=(-test.v -test.count=1 -test.timeout=4m)
		if [ ! -x "$bin" ]; then
			echo "FAIL $t: $bin missing (run: tools/gpu/gpu-check.sh build)"
			status=1
			continue
		fi
		[ "$t" = cuda-nocgo ] && args+=(-test.run='TestDeviceInfo|TestMemoryRoundTrip|TestConvertKernelsMatchGo|TestIPCAcrossProcesses')
		local start=$SECONDS
		(cd "$(dirname "$bin")" && "./$(basename "$bin")" "${args[@]}") >"$OUT_DIR/$t.log" 2>&1
		local rc=$?
		local skips
		skips=$(grep -c -- '--- SKIP' "$OUT_DIR/$t.log")
		if [ $rc -ne 0 ]; then
			echo "FAIL $t ($((SECONDS - start)) s): see $OUT_DIR/$t.log"
			grep -E -- '--- FAIL|FAIL:|panic|Error' "$OUT_DIR/$t.log" | head -n 20
			status=1
		elif [ "${BATON_GPU_REQUIRED:-}" = 1 ] && grep -q 'no GPU here\|no NVIDIA driver on this machine' "$OUT_DIR/$t.log"; then
			echo "FAIL $t: tests skipped for lack of a GPU, but BATON_GPU_REQUIRED=1"
			status=1
		else
			echo "ok   $t ($((SECONDS - start)) s, $skips skipped)"
		fi
	done
	return $status
}

case "${1:-all}" in
build) build ;;
run) run ;;
all)
	if command -v go >/dev/null; then build || exit 1; fi
	run
	;;
*)
	echo "usage: $0 [build|run]" >&2
	exit 2
	;;
esac
