#!/usr/bin/env bash
# bench/gpu_check.sh - everything the CUDA backend needs checked on a GPU machine, in one run.
#
#   bash bench/gpu_check.sh            # from anywhere; no network needed
#
# 1. compiles both curves' kernel modules with NVRTC (in parallel; CuPy caches them on disk)
#    and the CPU backend's native library (the reference the GPU tests compare with);
# 2. runs the GPU tests (tests/test_cuda_backend.py: CUDA vs CPU backend, vs a Python
#    reference, full proofs checked by the verifier);
# 3. times MSM G1/G2 and NTT at 2^16..2^24 on both curves and full proofs of the fixtures
#    (bench/gpu_kernels.py) within what is left of an 8-minute budget, and prints one table.
# The table also goes to $OUT/gpu_check.txt when OUT is set, logs to $OUT/*.log.
# Exit status: 0 when everything passed; 1 on any test failure or result mismatch.
#
# Python packages: uses the machine's python3 (the GPU image has numpy, CuPy and pytest).
# Wheels for anything missing can be carried in .whl/ at the repository root: they are
# installed offline into /tmp/zkq-site first (pip download them elsewhere, see the README).
set -uo pipefail
cd "$(dirname "$0")/.."
START=$(date +%s)
TOTAL_S=${GPU_CHECK_BUDGET_S:-470}   # stay inside 8 minutes, with a margin
PY=${PYTHON:-python3}
LOGS=${OUT:-/tmp/zkq-gpu-check}
mkdir -p "$LOGS"
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
elapsed() { echo $(( $(date +%s) - START )); }

if compgen -G ".whl/*.whl" >/dev/null; then
    echo "== installing carried wheels from .whl/"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/zkq-site .whl/*.whl \
        || { echo "FAIL: could not install the carried wheels"; exit 1; }
    export PYTHONPATH="$PYTHONPATH:/tmp/zkq-site"
fi

echo "== machine"
nvidia-smi -L 2>/dev/null || echo "(no nvidia-smi)"
"$PY" - <<'EOF' || { echo "FAIL: no usable GPU for the CUDA backend"; exit 1; }
import sys
from groth16.backends import cuda_status
ok, why = cuda_status()
print(("usable: " if ok else "NOT usable: ") + why)
sys.exit(0 if ok else 1)
EOF

echo "== compiling (NVRTC for both curves, native CPU library) at $(elapsed)s"
"$PY" bench/gpu_kernels.py --compile-only bn128 >"$LOGS/compile_bn128.log" 2>&1 & P1=$!
"$PY" bench/gpu_kernels.py --compile-only bls12381 >"$LOGS/compile_bls12381.log" 2>&1 & P2=$!
"$PY" -c "from groth16 import native; native.load()" >"$LOGS/compile_cpu.log" 2>&1 & P3=$!
BUILD_OK=1
for p in $P1 $P2 $P3; do wait $p || BUILD_OK=0; done
cat "$LOGS"/compile_*.log | tail -n 40
if [ $BUILD_OK != 1 ]; then echo "FAIL: a build failed (logs above)"; exit 1; fi

echo "== GPU tests at $(elapsed)s"
TEST_LIMIT=$(( TOTAL_S - $(elapsed) - 150 ))   # leave the timings at least 150 s
[ $TEST_LIMIT -lt 60 ] && TEST_LIMIT=60
timeout "$TEST_LIMIT" "$PY" -m pytest -q -m gpu -p no:cacheprovider tests/test_cuda_backend.py \
    2>&1 | tee "$LOGS/gpu_tests.log"
TESTS_RC=${PIPESTATUS[0]}
if [ $TESTS_RC != 0 ]; then
    echo "FAIL: GPU tests failed or ran out of time (exit $TESTS_RC); timings follow anyway"
fi

echo "== timings at $(elapsed)s"
BENCH_BUDGET=$(( TOTAL_S - $(elapsed) - 30 ))
[ $BENCH_BUDGET -lt 30 ] && BENCH_BUDGET=30
timeout $(( BENCH_BUDGET + 25 )) "$PY" bench/gpu_kernels.py --budget-s "$BENCH_BUDGET" ${OUT:+--out "$OUT"} \
    2>&1 | tee "$LOGS/gpu_bench.log"
BENCH_RC=${PIPESTATUS[0]}

echo "== done in $(elapsed)s: tests exit $TESTS_RC, timings exit $BENCH_RC"
[ $TESTS_RC = 0 ] && [ $BENCH_RC = 0 ]
