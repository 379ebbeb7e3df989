#!/usr/bin/env bash
# gpu-bench.sh: the GPU numbers of issue 6 on this machine's GPU.
#
#   tools/gpu/gpu-bench.sh build   build the test binaries (same as gpu-check.sh build)
#   tools/gpu/gpu-bench.sh run     run the benchmarks from bin/gpu/ (needs the GPU)
#   tools/gpu/gpu-bench.sh         build (when Go is on PATH), then run
#
# Runs, with BATON_GPU_BENCH=1: the CUDA encoder on preset large (fp32 and bf16,
# batch 1 and 32; CUDA events on device-resident input, median of 100 after 20
# warm-ups; end-to-end Encode wall time; graph replay against step-by-step
# launches), the 256 MiB device-to-device copy and
# the cuda_ipc copy out of another process, the 8 MiB IPC handoff latency,
# the engine's cuda_ipc handoff (a 256 MiB entry and an 8 MiB one, from a
# `baton serve --backend cuda_ipc` producer) and E+PD time to first token
# against the aggregated engine on the same GPU (bin/gpu/handoffbench), and,
# when python3 has PyTorch, the same shapes in PyTorch (tools/gpu/torch_ref.py)
# for a same-run comparison. Writes $OUT_DIR/gpu-bench.md (default
# out/gpu-bench) headed by the date, driver and device.
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=bin/gpu
OUT_DIR=${OUT_DIR:-out/gpu-bench}

run() {
	mkdir -p "$OUT_DIR"
	export BATON_GPU_BENCH=1 BATON_GPU_BENCH_OUT
	BATON_GPU_BENCH_OUT=$(cd "$OUT_DIR" && pwd)
	local status=0
	"$BIN/cudaenc.test" -test.v -test.count=1 -test.run='^TestBenchEncoderLarge$' -test.timeout=8m >"$OUT_DIR/encoder-bench.log" 2>&1 || status=1
	BATON_GPU_BENCH_VARIANTS=1 "$BIN/cudaenc.test" -test.v -test.count=1 -test.run='^TestBenchPlans$' -test.timeout=5m >"$OUT_DIR/encoder-plans.log" 2>&1 || status=1
	"$BIN/cuda.test" -test.v -test.count=1 -test.run='^TestBenchCopyAndIPC$' -test.timeout=5m >"$OUT_DIR/cuda-bench.log" 2>&1 || status=1
	timeout 300 "$BIN/handoffbench" -baton "$BIN/baton" -out "$OUT_DIR/handoff.md" -work "$OUT_DIR/handoff" >"$OUT_DIR/handoff.log" 2>&1 || status=1
	if python3 -c 'import torch; assert torch.cuda.is_available()' >/dev/null 2>&1; then
		timeout 300 python3 tools/gpu/torch_ref.py >"$OUT_DIR/torch-ref.md" 2>"$OUT_DIR/torch-ref.log" || echo "torch_ref.py failed: see $OUT_DIR/torch-ref.log"
	else
		echo "PyTorch with CUDA not available: no same-run PyTorch reference" >"$OUT_DIR/torch-ref.md"
	fi
	{
		echo "# baton GPU benchmark ($(date -u +%Y-%m-%dT%H:%MZ))"
		echo
		echo "Device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo unknown)"
		echo "CUDA (driver): $(nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' || echo unknown)"
		grep -ho 'BATON_LIBS .*' "$OUT_DIR"/encoder-bench.log 2>/dev/null | head -n 1 | sed 's/^BATON_LIBS /Libraries: /'
		echo
		echo "## CUDA encoder, preset large"
		echo
		cat "$OUT_DIR/encoder-bench.md" 2>/dev/null || { echo "(no result: see encoder-bench.log)"; tail -n 30 "$OUT_DIR/encoder-bench.log"; }
		echo
		echo "### How a pass is issued (device time and host enqueue time)"
		echo
		cat "$OUT_DIR/encoder-plans.md" 2>/dev/null || { echo "(no result: see encoder-plans.log)"; tail -n 30 "$OUT_DIR/encoder-plans.log"; }
		echo
		echo "## Copies and cuda_ipc"
		echo
		cat "$OUT_DIR/cuda-bench.md" 2>/dev/null || { echo "(no result: see cuda-bench.log)"; tail -n 30 "$OUT_DIR/cuda-bench.log"; }
		echo
		cat "$OUT_DIR/handoff.md" 2>/dev/null || { echo "## cuda_ipc handoff and E+PD time to first token"; echo; echo "(no result: see handoff.log)"; tail -n 30 "$OUT_DIR/handoff.log"; }
		echo
		echo "## PyTorch, same shapes, same run"
		echo
		cat "$OUT_DIR/torch-ref.md"
	} >"$OUT_DIR/gpu-bench.md"
	cat "$OUT_DIR/gpu-bench.md"
	return $status
}

case "${1:-all}" in
build) tools/gpu/gpu-check.sh build ;;
run) run ;;
all)
	if command -v go >/dev/null; then tools/gpu/gpu-check.sh build || exit 1; fi
	run
	;;
*)
	echo "usage: $0 [build|run]" >&2
	exit 2
	;;
esac
