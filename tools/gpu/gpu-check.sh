#!/usr/bin/env bash
# gpu-check.sh: build and run baton's GPU tests (gpu/nvml, gpu/cuda,
# engine/encoder/cuda, engine/xfer's cuda_ipc device) on a machine with an
# NVIDIA GPU, then certify an E+PD pair of `baton serve` processes on GPU 0
# (--device cuda:0, --backend cuda_ipc) with `baton check --certify` at the
# Core level, the NVML inventory stamped in its report, and certify the
# same pair behind the fault proxy, and E+P+D, at the Faults level
# (tools/gpu/topocheck).
#
#   tools/gpu/gpu-check.sh build   build the test binaries into bin/gpu/ (needs Go, no GPU)
#   tools/gpu/gpu-check.sh run     run the binaries in bin/gpu/ (needs the GPU, not Go)
#   tools/gpu/gpu-check.sh         build (when Go is on PATH), then run
#
# The split exists because the device machine has no Go toolchain: build here,
# carry bin/ there, run there. Logs go to $OUT_DIR (default out/gpu-check):
# one <binary>.log per test binary, nvidia-smi.txt, eppd/ (the profile,
# check.log, launch/ with the engines' logs) and report/ (results.yaml with the GPU inventory,
# report.html, ...); gpu-check.md sums it up. Exit status: 0 when every
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
	CGO_ENABLED=1 go test -c -ldflags="-s -w" -o "$BIN/xfer.test" ./engine/xfer
	# baton itself (cgo: go-nvml for the report's GPU inventory) and the handoff benchmark.
	CGO_ENABLED=1 go build -ldflags="-s -w" -o "$BIN/baton" ./cmd/baton
	CGO_ENABLED=0 go build -ldflags="-s -w" -o "$BIN/handoffbench" ./tools/gpu/handoffbench
	CGO_ENABLED=0 go build -ldflags="-s -w" -o "$BIN/topocheck" ./tools/gpu/topocheck
	set +e
	echo "built: $(ls "$BIN")"
}

run() {
	mkdir -p "$OUT_DIR"
	{ nvidia-smi 2>&1 || echo "nvidia-smi: not available"; } >"$OUT_DIR/nvidia-smi.txt"
	head -n 12 "$OUT_DIR/nvidia-smi.txt"
	local status=0 t
	# cuda-nocgo runs the driver-level tests only (the same code, built without cgo).
	for t in nvml-cgo nvml-nocgo cuda cuda-nocgo cudaenc xfer; do
		local bin="$BIN/$t.test" args=(-test.v -test.count=1 -test.timeout=4m)
		if [ ! -x "$bin" ]; then
			echo "FAIL $t: $bin missing (run: tools/gpu/gpu-check.sh build)"
			status=1
			continue
		fi
		[ "$t" = cuda-nocgo ] && args+=(-test.run='TestDeviceInfo|TestMemoryRoundTrip|TestConvertKernelsMatchGo|TestIPCAcrossProcesses')
		[ "$t" = xfer ] && args+=(-test.run='IPC|CUDADevice')
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
	eppd || status=1
	topo faults E+PD faults || status=1
	topo eppd-faults E+P+D faults || status=1
	summary $status
	return $status
}

# eppd: E (cuda_ipc producer), PD (cuda_ipc consumer) and the aggregated
# baseline on cuda:0, certified at the Core level by `baton check --certify`,
# which starts them from the profile's launch section (so S-1's accepted
# Shutdown can restart the consumer it shuts down) and stops each through
# Shutdown at the end: every engine must then drain and exit 0 (S-4).
eppd() {
	local dir="$OUT_DIR/eppd" rc=0
	mkdir -p "$dir"
	if [ ! -x "$BIN/baton" ]; then
		echo "FAIL eppd: $BIN/baton missing (run: tools/gpu/gpu-check.sh build)"
		return 1
	fi
	# BATON_GPU_DEVICE=cpu BATON_GPU_BACKEND=tcp rehearses this part on a machine without a GPU.
	local device=${BATON_GPU_DEVICE:-cuda:0} backend=${BATON_GPU_BACKEND:-cuda_ipc}
	local baton port=$((20000 + $$ % 20000)) # three ports from here; the device machine runs nothing else
	baton="$(cd "$BIN" && pwd)/baton"
	local common="--device, \"$device\", --preset, \"${BATON_GPU_PRESET:-base}\", --producer-quota-bytes, \"268435456\""
	cat >"$dir/profile.yaml" <<YAML
name: baton reference engine on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 || echo "no GPU") (E+PD, $backend, --device $device)
implementation: {vendor: baton, product: baton serve, version: "$("$BIN/baton" version 2>/dev/null | head -n 1)"}
level: core
topologies: [E+PD]
backends: [$backend]
endpoints:
  producer: 127.0.0.1:$port
  consumer: 127.0.0.1:$((port + 1))
  baseline: 127.0.0.1:$((port + 2))
observables: true
destructive: true
producer_quota_bytes: 268435456
reference_format: baton-json-v1
case_timeout: 60s
launch:
  work_dir: $dir/launch
  start_timeout: 90s
  roles:
    producer: {start: ["$baton", serve, --role, encoder, --listen, "\${ADDR}", $common, --backend, "$backend", --trusted-consumers, 127.0.0.1]}
    consumer: {start: ["$baton", serve, --role, pd, --listen, "\${ADDR}", $common, --accept-backends, "$backend", --trusted-producers, "\${ENDPOINT_PRODUCER}"]}
    baseline: {start: ["$baton", serve, --role, aggregated, --listen, "\${ADDR}", $common]}
YAML
	local start=$SECONDS
	env -u BATON_GPU_DEVICE -u BATON_GPU_BACKEND -u BATON_GPU_PRESET -u BATON_GPU_REQUIRED \
		"$BIN/baton" check --config "$dir/profile.yaml" --report-dir "$OUT_DIR/report" --certify --progress off >"$dir/check.log" 2>&1
	local crc=$?
	if [ $crc -ne 0 ]; then
		echo "FAIL eppd: baton check --certify exited $crc ($((SECONDS - start)) s); see $dir/check.log and $dir/launch/"
		tail -n 30 "$dir/check.log"
		rc=1
	else
		echo "ok   eppd: baton check --certify, Core, E+PD over $backend on $device ($((SECONDS - start)) s)"
	fi
	# baton check stopped every role through Shutdown: "launch: consumer stopped: exit status 0".
	grep '^launch: .* stopped' "$dir/check.log" >"$dir/exits.txt"
	if [ "$(grep -c 'stopped: exit status 0$' "$dir/exits.txt")" -ne 3 ]; then
		echo "FAIL eppd: not every engine drained and exited 0 after Shutdown (S-4); see $dir/exits.txt and $dir/launch/"
		cat "$dir/exits.txt"
		rc=1
	fi
	return $rc
}

# topo NAME TOPOLOGY LEVEL: tools/gpu/topocheck over the same backend and
# device: a certification run at LEVEL; "faults" puts the fault proxy in
# front of E (a script cannot place the proxy itself) and runs every Core,
# Lifecycle and Faults case, on E+PD or on E+P+D (E, P, D, baseline).
topo() {
	local name=$1 start=$SECONDS
	env -u BATON_GPU_DEVICE -u BATON_GPU_BACKEND -u BATON_GPU_PRESET -u BATON_GPU_REQUIRED \
		"$BIN/topocheck" -baton "$BIN/baton" -device "${BATON_GPU_DEVICE:-cuda:0}" -backend "${BATON_GPU_BACKEND:-cuda_ipc}" \
		-topology "$2" -level "$3" -report-dir "$OUT_DIR/$name" -work "$OUT_DIR/$name-work" >"$OUT_DIR/$name.log" 2>&1
	local rc=$?
	if [ $rc -ne 0 ]; then
		echo "FAIL $name ($((SECONDS - start)) s): see $OUT_DIR/$name.log"
		tail -n 20 "$OUT_DIR/$name.log"
		return 1
	fi
	echo "ok   $name: $2, level $3, over ${BATON_GPU_BACKEND:-cuda_ipc} on ${BATON_GPU_DEVICE:-cuda:0} ($((SECONDS - start)) s)"
}

# summary STATUS: gpu-check.md with the device, the NVML inventory the
# report carries, each binary's result and the check's rule lines.
summary() {
	{
		echo "# baton gpu-check ($(date -u +%Y-%m-%dT%H:%MZ))"
		echo
		echo "Device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo unknown)"
		echo "CUDA (driver): $(nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' || echo unknown)"
		echo "Status: $([ "$1" -eq 0 ] && echo passed || echo FAILED)"
		echo
		echo "## Test binaries"
		echo
		local t
		for t in nvml-cgo nvml-nocgo cuda cuda-nocgo cudaenc xfer; do
			[ -f "$OUT_DIR/$t.log" ] || continue
			echo "- $t: $(tail -n 1 "$OUT_DIR/$t.log") ($(grep -c -- '--- PASS' "$OUT_DIR/$t.log") passed, $(grep -c -- '--- SKIP' "$OUT_DIR/$t.log") skipped, $(grep -c -- '--- FAIL' "$OUT_DIR/$t.log") failed)"
		done
		echo
		echo "## E+PD over ${BATON_GPU_BACKEND:-cuda_ipc} on ${BATON_GPU_DEVICE:-cuda:0}: baton check --certify (Core)"
		echo
		echo '```'
		cat "$OUT_DIR/eppd/check.log" 2>/dev/null | grep -v '^\s*$' | tail -n 60
		echo '```'
		echo
		echo "Engine exits after Shutdown: $(tr '\n' ';' <"$OUT_DIR/eppd/exits.txt" 2>/dev/null)"
		echo
		echo "## E+PD certified at the Faults level, same backend and device, fault proxy between PD and E"
		echo
		echo '```'
		grep -v '^\s*$' "$OUT_DIR/faults.log" 2>/dev/null | grep -v '^\s*PASS' | tail -n 20
		echo '```'
		echo
		echo "## E+P+D certified at the Faults level, same backend and device"
		echo
		echo '```'
		grep -v '^\s*$' "$OUT_DIR/eppd-faults.log" 2>/dev/null | grep -v '^\s*PASS' | tail -n 20
		echo '```'
		echo
		echo "GPU inventory in the report (results.yaml):"
		echo
		echo '```'
		grep -A 12 '^ *gpu:' "$OUT_DIR/report/results.yaml" 2>/dev/null | head -n 16
		echo '```'
	} >"$OUT_DIR/gpu-check.md"
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
