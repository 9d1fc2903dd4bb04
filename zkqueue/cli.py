"""The `zkqueue` command: prove / verify / export-vk (groth16.cli) plus the queue:
submit, wait, status, cancel, worker, serve, demo, ...

The product's entry point, and the one module allowed to import every package: it starts
the worker supervisor (workers.spawn), the HTTP API (api.server), Flower and the demo, each
lazily inside its command, so that `zkqueue prove` loads none of them. The libraries it
drives (coordinator, groth16, ...) never import it.

Exit codes:
    0  success: every proof verified (verify: the proof is valid)
    1  the job failed, was cancelled, timed out or was lost (Redis restarted without its
       data); verify: the proof is invalid
    2  bad input or configuration (a file that cannot be read, an unknown job id, a bad setting)
    3  the job is done with failures: every proof that could be made is verified and written;
       the partitions that failed are listed with their reasons
Errors are one line on stderr, never a traceback.
Settings come from flags, then ZKQUEUE_REDIS_URL / ZKQUEUE_STORE_URL, then defaults.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # as typing.TYPE_CHECKING; pathlib (with re and enum) costs `zkqueue prove` ~10 ms
if TYPE_CHECKING:
    from pathlib import Path

from zkqueue.groth16.cli import (EXIT_INVALID, EXIT_OK, add_commands, finish, new_parser, parse_plain_prove,
                                 run_command)

EXIT_PARTIAL = 3      # done with failures: the verified proofs are written, the failures listed

# The queue's errors (and everything else of the queue, argparse and json included) are
# imported inside the commands that need them: `zkqueue prove/verify/...` is a one-shot
# process whose start-up counts (see main).

# groth16.cli's commands, and groth16.witness.cli's: main runs them without the queue's parser.
CORE_COMMANDS = frozenset({"prove", "verify", "export-vk", "wtns", "fullprove", "zkey"})


def _queue_input_errors() -> tuple[type[BaseException], ...]:
    """The queue's errors that mean bad input or configuration (exit 2)."""
    from zkqueue.coordinator.errors import BadRequest, ConfigError, JobNotFound
    return (BadRequest, ConfigError, JobNotFound)


def _settings(args):
    from zkqueue import config
    return config.fleet(redis_url=args.redis_url, store_url=args.store_url)


def _client(args):
    from zkqueue.coordinator.client import Client
    return Client(settings=_settings(args))


def _job_client(args):
    """What submit, wait, status and cancel use: a Client of one Redis, or, where cells are
    configured (--cells or ZKQUEUE_CELLS) and no --redis-url picks one Redis, a Cells client
    that chooses a new job's cell and finds a job's cell from its id (coordinator/cells.py)."""
    from zkqueue import config
    from zkqueue.coordinator.client import Client
    if args.cells is not None and args.redis_url is not None:
        raise config.ConfigError("give --cells or --redis-url, not both", expected="one", found="both")
    settings = config.fleet(redis_url=args.redis_url, store_url=args.store_url, cells=args.cells)
    if settings.cells and args.redis_url is None:
        from zkqueue.coordinator.cells import Cells
        return Cells.from_settings(settings)
    return Client(settings=settings)


def write_result(result, out_dir: Path) -> None:
    """DIR/proof_<i>.json and DIR/public_<i>.json for every partition, as snarkjs writes them."""
    from zkqueue.groth16.formats.jsonfiles import write_json
    out_dir.mkdir(parents=True, exist_ok=True)
    for p in result.partitions:
        write_json(out_dir / f"proof_{p.index}.json", p.proof)
        write_json(out_dir / f"public_{p.index}.json", p.public_signals)


def _wait_and_write(job, args) -> int:
    from zkqueue.coordinator.errors import JobCancelled, JobFailed, WaitTimeout
    from zkqueue.coordinator.progress import Progress
    progress = None if args.quiet else Progress()
    try:
        result = job.wait(args.timeout, progress=progress)
    except (JobFailed, JobCancelled, WaitTimeout) as exc:
        if progress:
            progress.done()
        print(f"zkqueue: {exc}", file=sys.stderr)
        return EXIT_INVALID
    if progress:
        progress.done()
    if args.out:
        from pathlib import Path  # noqa: PLC0415 - see TYPE_CHECKING
        write_result(result, Path(args.out))
    t = result.timings_s
    done = "done" if result.complete else f"done with {len(result.failed)} failed partition(s)"
    print(f"job {job.id}: {done}, {len(result.partitions)} verified proofs"
          + (f" in {args.out}" if args.out else "")
          + f" (total {t.get('total_s', 0):.2f} s, queued {t.get('queued_s', 0):.3f} s, "
            f"prove {t.get('prove_s', 0):.2f} s, verify {t.get('verify_s', 0):.3f} s)")
    for bad in result.bad_workers:
        print(f"  note: partition {bad['index']} was re-proved: {bad['reason']} from worker {bad['worker']}"
              f" ({bad.get('fingerprint', {}).get('host')}, build {bad.get('fingerprint', {}).get('build')})")
    for failure in result.failed:
        print(f"  failed: {failure.reason}")
    return EXIT_OK if result.complete else EXIT_PARTIAL


def cmd_submit(args) -> int:
    with _job_client(args) as client:
        common = dict(r1cs=args.r1cs, priority=args.priority, request_id=args.request_id,
                      all_or_nothing=args.all_or_nothing)
        if args.wasm:      # the files are circuit inputs: workers compute the witnesses
            job = client.submit(args.zkey, inputs=args.witnesses, wasm=args.wasm, **common)
        else:
            job = client.submit(args.zkey, args.witnesses, **common)
        if not args.wait:
            print(job.id)
            return EXIT_OK
        print(f"submitted job {job.id} ({len(args.witnesses)} partitions"
              + (", witnesses computed by workers)" if args.wasm else ")"), file=sys.stderr)
        return _wait_and_write(job, args)


def cmd_wait(args) -> int:
    with _job_client(args) as client:
        return _wait_and_write(client.job(args.job), args)


def _status_dict(st) -> dict:
    return {"job": st.job_id, "state": st.state.value, "priority": st.priority.value,
            "partitions": [{"index": p.index, "state": p.state.value, "phase": p.phase, "attempts": p.attempts,
                            "synth_attempts": p.synth_attempts, "source": p.source, "error": p.error, "waiting": p.waiting,
                            "worker": p.worker, "timings_s": p.timings_s} for p in st.partitions],
            "timings_s": st.timings_s, "error": st.error, "bad_workers": st.bad_workers,
            "request_id": st.request_id}


def cmd_status(args) -> int:
    import json  # noqa: PLC0415

    with _job_client(args) as client:
        if args.job:
            return _print_job(client.job(args.job), args.json)
        from zkqueue.coordinator.cells import Cells
        if not isinstance(client, Cells):
            listing = _listing(client, args.limit, args.json)
            if args.json:
                print(json.dumps(listing, indent=1))
            return EXIT_OK
        # Cells: each cell's own listing (its workers serve it alone), or why it is missing.
        out = {}
        for name, cell in client.clients.items():
            where = f"cell {name} ({client.specs[name].safe_url()})"
            if not client.reachable(name):
                out[name] = {"error": f"unreachable: {client.down_reason(name)}"}
                if not args.json:
                    print(f"{where}: UNREACHABLE ({client.down_reason(name)})")
                continue
            if not args.json:
                print(f"{where}:")
            out[name] = _listing(cell, args.limit, args.json)
        if args.json:
            print(json.dumps({"cells": out}, indent=1))
        return EXIT_OK


def _print_job(job, as_json: bool) -> int:
    """`zkqueue status JOB`: the job's progress and each partition."""
    import json  # noqa: PLC0415

    from zkqueue.coordinator.progress import summary
    st = job.status()
    if as_json:
        print(json.dumps(_status_dict(st), indent=1))
        return EXIT_OK
    print(summary(job.progress()))
    if st.error:
        print(f"  error: {st.error}")
    for p in st.partitions:
        t = " ".join(f"{k}={v:.3f}" for k, v in p.timings_s.items())
        phase = f" ({p.phase})" if p.phase != p.state.value else ""
        print(f"  partition {p.index}: {p.state.value}{phase}, {p.attempts} attempt(s)"
              f"{', worker ' + p.worker if p.worker else ''}{'  ' + t if t else ''}"
              f"{'  ' + p.error if p.error else ''}{'  waiting: ' + p.waiting if p.waiting else ''}")
    for bad in st.bad_workers:
        print(f"  invalid proof of partition {bad['index']} from worker {bad['worker']}: {bad['reason']}")
    return EXIT_OK


def _listing(client, limit: int, as_json: bool) -> dict | None:
    """`zkqueue status` of one Redis: its live workers, quarantined builds, failed canaries,
    dead letters and recent jobs; printed, or returned as a dict (`as_json`)."""
    from zkqueue.coordinator import canary, deadletter, quarantine
    from zkqueue.coordinator.progress import summary
    jobs = client.recent_jobs(limit)
    workers = client.workers()
    dead = deadletter.count(client.r)
    failing = canary.failing(client.r)
    if as_json:
        return {"jobs": [_status_dict(j.status()) for j in jobs], "workers": workers,
                "quarantined": quarantine.quarantined(client.r), "canary_failed": failing, "dead_letters": dead}
    held = quarantine.quarantined(client.r)
    print(f"{len(workers)} live worker(s)")
    for w in workers:
        fp = w.get("fingerprint", {})
        print(f"  {w['worker']}: {fp.get('backend')} on {fp.get('device_name')} ({fp.get('host')}), "
              f"build {fp.get('build')}{_memory_words(w.get('memory'))}"
              + ("  QUARANTINED" if fp.get("id") in held else ""))
    for fp_id, rec in held.items():
        print(f"quarantined {quarantine.describe(fp_id, rec)}")
    for fp_id, rec in failing.items():
        print(f"CANARY FAILED {canary.describe(fp_id, rec)}")
    if dead:
        print(f"{dead} message(s) on the dead-letter list (`zkqueue dead-letters list`)")
    for job in jobs:
        progress = job.progress()
        print(summary(progress) + (f" - {progress.error}" if progress.error else ""))
    return None


def _memory_words(memory: dict | None) -> str:
    """", memory 512 MiB (cgroup v1 /sys/fs/...), room for keys 380 MiB": a heartbeat's figures."""
    if not memory:
        return ""
    out = (f", memory {memory['limit_bytes'] >> 20} MiB ({memory.get('source')}), room for keys "
           f"{memory.get('capacity_bytes', 0) >> 20} MiB")
    if "device_total_bytes" in memory:
        out += f", GPU {memory['device_free_bytes'] >> 20} of {memory['device_total_bytes'] >> 20} MiB free"
    return out


def cmd_quarantine(args) -> int:
    import json  # noqa: PLC0415

    from zkqueue.coordinator.errors import BadRequest
    from zkqueue.coordinator import quarantine
    with _client(args) as client:
        if args.action == "list":
            found = quarantine.quarantined(client.r)
            if args.json:
                print(json.dumps(found, indent=1))
            for fp_id, rec in found.items():
                if not args.json:
                    print(quarantine.describe(fp_id, rec))
            if not found and not args.json:
                print("no quarantined builds")
            return EXIT_OK
        if not args.fingerprints and not args.all:
            raise BadRequest("name the fingerprints to clear, or --all", expected="FINGERPRINT... or --all",
                             found="nothing")
        cleared = quarantine.clear(client.r, None if args.all else args.fingerprints)
        print(f"cleared {len(cleared)}: {' '.join(cleared)}" if cleared else "nothing to clear")
        return EXIT_OK


def cmd_dead_letters(args) -> int:
    import json  # noqa: PLC0415

    from zkqueue.coordinator import deadletter
    with _client(args) as client:
        if args.action == "clear":
            print(f"cleared {deadletter.clear(client.r)} dead letter(s)")
            return EXIT_OK
        entries = deadletter.listing(client.r, args.limit)
        if args.json:
            print(json.dumps({"count": deadletter.count(client.r), "newest": entries}, indent=1))
            return EXIT_OK
        print(f"{deadletter.count(client.r)} dead letter(s); the newest {len(entries)}:")
        for e in entries:
            print(f"  {e.get('at', 0):.3f} {e.get('queue', '?')}: {e.get('reason')} ({e.get('bytes', '?')} bytes)")
        return EXIT_OK


def cmd_cancel(args) -> int:
    with _job_client(args) as client:
        if client.job(args.job).cancel():
            print(f"job {args.job} cancelled")
        else:
            print(f"job {args.job} was already over")
    return EXIT_OK


def cmd_worker(args) -> int:
    from zkqueue.coordinator.errors import ConfigError
    from zkqueue import config
    settings = _settings(args)   # checked here, so a bad setting fails before any process starts
    proc = config.process()
    if args.key_cache_bytes:
        proc = proc.replace(key_cache_bytes=args.key_cache_bytes)
    from zkqueue.workers import spawn   # the worker runtime's supervisor
    try:
        extra = [] if args.synthesize is None else ["--synthesize" if args.synthesize else "--no-synthesize"]
        extra += ["--batch", str(args.batch)] if args.batch is not None else []
        extra += ["--preload", *args.preload] if args.preload else []
        return spawn.run(args.cpu, threads=args.threads, backend=args.backend, extra_args=extra,
                         env=config.child_environ(settings, proc), metrics_port=proc.metrics_port)
    except LookupError as exc:
        raise ConfigError(str(exc)) from None


def cmd_demo(args) -> int:
    from zkqueue import demo
    return demo.run(_settings(args), timeout_s=args.timeout, external=args.external)


def cmd_metrics(args) -> int:
    from zkqueue.coordinator import metrics
    settings = _settings(args)
    print(f"zkqueue metrics: serving queue metrics on http://{args.addr}:{args.port}/metrics", file=sys.stderr)
    metrics.serve(settings, args.port, args.addr)
    return EXIT_OK


def cmd_flower(args) -> int:
    """Flower on the zkqueue broker, with HTTP basic auth from $ZKQUEUE_FLOWER_AUTH (user:password)."""
    from zkqueue.coordinator.errors import ConfigError
    from zkqueue import config
    settings = _settings(args)
    auth = config.process().flower_auth
    if ":" not in auth:
        raise ConfigError("set ZKQUEUE_FLOWER_AUTH=user:password (Flower is never served without auth)",
                          expected="user:password", found="unset" if not auth else "no ':'")
    from celery import Celery

    from zkqueue.coordinator.broker import celery_config
    from zkqueue.coordinator import connections
    from zkqueue.coordinator.monitors import announce_flower
    app = Celery("zkqueue", set_as_current=True)
    app.conf.update(celery_config(settings))
    announce_flower(connections.client(settings))     # workers starting now send task events
    port = args.port or config.process().flower_port
    # Flower reads its options from FLOWER_* variables too: the password stays off the command line.
    os.environ["FLOWER_BASIC_AUTH"] = auth
    # The task list shows each task's arguments: "job=<id> partition=<i> attempt_token=<t>".
    os.environ.setdefault("FLOWER_TASKS_COLUMNS", "name,args,state,worker,received,runtime,uuid")
    app.start(argv=["flower", f"--port={port}", f"--address={args.addr}"])
    return EXIT_OK


def cmd_serve(args) -> int:
    """The HTTP API (api/), started lazily like `worker`."""
    from zkqueue import config
    settings = _settings(args)
    overrides = {k: v for k, v in (("api_host", args.host), ("api_port", args.port)) if v is not None}
    proc = config.process().replace(**overrides) if overrides else config.process()
    from zkqueue.api import server
    server.serve(settings, proc)
    return EXIT_OK


def cmd_api_keys(args) -> int:
    import json  # noqa: PLC0415

    from zkqueue.coordinator.errors import BadRequest
    from zkqueue.api.auth import KeyStore

    from zkqueue.coordinator.scheduler import connect
    store = KeyStore(connect(_settings(args)))
    if args.action == "create":
        if not args.name:
            raise BadRequest("name the key: zkqueue api-keys create NAME", expected="NAME", found="nothing")
        try:
            key, token = store.create(args.name, proofs_per_hour=args.proofs_per_hour,
                                      max_upload_bytes=args.max_upload_bytes)
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        print(json.dumps({**key.as_dict(), "token": token}) if args.json else token)
        if not args.json:
            print(f"API key {key.id} ({key.name}): the token above is shown only now", file=sys.stderr)
        return EXIT_OK
    if args.action == "list":
        found = store.list()
        if args.json:
            print(json.dumps([k.as_dict() for k in found], indent=1))
            return EXIT_OK
        for k in found:
            limits = ", ".join(filter(None, [f"{k.proofs_per_hour} proofs/hour" if k.proofs_per_hour else "",
                                             f"uploads <= {k.max_upload_bytes} bytes" if k.max_upload_bytes else ""]))
            print(f"{k.id}  {k.name}" + (f"  ({limits})" if limits else "") + ("  REVOKED" if k.revoked else ""))
        if not found:
            print("no API keys")
        return EXIT_OK
    if not args.name:
        raise BadRequest("name the key id to revoke: zkqueue api-keys revoke KEY_ID", expected="KEY_ID",
                         found="nothing")
    if not store.revoke(args.name):
        raise BadRequest(f"no live API key {args.name}", found=args.name)
    print(f"API key {args.name} revoked")
    return EXIT_OK


def add_queue_commands(sub) -> None:
    """Registers submit, wait, status, cancel, quarantine, worker, demo, metrics, flower, serve and
    api-keys."""
    import argparse  # noqa: PLC0415

    from zkqueue.coordinator.jobs import Priority

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--redis-url", default=None, help="default: $ZKQUEUE_REDIS_URL or redis://127.0.0.1:6379/0")
    common.add_argument("--store-url", default=None,
                        help="artifact store, any fsspec URL (default: $ZKQUEUE_STORE_URL or a local directory)")

    waiting = argparse.ArgumentParser(add_help=False)
    waiting.add_argument("--out", help="write DIR/proof_<i>.json and DIR/public_<i>.json")
    waiting.add_argument("--timeout", type=float, default=None, help="seconds to wait (default: forever)")
    waiting.add_argument("-q", "--quiet", action="store_true", help="no progress display")

    # submit, wait, status and cancel can address several cells (coordinator/cells.py)
    routed = argparse.ArgumentParser(add_help=False)
    routed.add_argument("--cells", default=None, metavar="'NAME=URL ...'",
                        help="several cells, each one Redis with its own workers: a new job goes to one "
                             "chosen from its request id, a job is found from its id (default: $ZKQUEUE_CELLS; "
                             "--redis-url addresses one Redis instead)")

    s = sub.add_parser("submit", parents=[common, routed, waiting],
                       help="queue a proving job: one partition per witness (or per input.json, with --wasm)")
    s.add_argument("zkey")
    s.add_argument("witnesses", nargs="+", metavar="FILE",
                   help=".wtns witnesses, or input.json files when --wasm is given")
    s.add_argument("--wasm", default=None,
                   help="the circuit's circom .wasm: FILEs are its input JSON, workers compute the witnesses")
    s.add_argument("--wait", action="store_true", help="wait for the verified proofs")
    s.add_argument("--priority", choices=[p.value for p in Priority], default="normal")
    s.add_argument("--request-id", default=None, help="idempotency key: the same id returns the same job")
    s.add_argument("--r1cs", default=None,
                   help="the circuit's .r1cs: a witness whose proof fails is checked against it, and a broken "
                        "constraint is named at once")
    s.add_argument("--all-or-nothing", action="store_true",
                   help="any failed partition fails the whole job (default: the others are delivered)")
    s.set_defaults(func=cmd_submit)

    w = sub.add_parser("wait", parents=[common, routed, waiting], help="wait for a job and write its proofs")
    w.add_argument("job")
    w.set_defaults(func=cmd_wait)

    st = sub.add_parser("status", parents=[common, routed], help="a job's status, or recent jobs and live workers")
    st.add_argument("job", nargs="?")
    st.add_argument("--json", action="store_true")
    st.add_argument("--limit", type=int, default=20)
    st.set_defaults(func=cmd_status)

    c = sub.add_parser("cancel", parents=[common, routed], help="cancel a job")
    c.add_argument("job")
    c.set_defaults(func=cmd_cancel)

    q = sub.add_parser("quarantine", parents=[common], help="list or clear quarantined builds")
    q.add_argument("action", choices=("list", "clear"))
    q.add_argument("fingerprints", nargs="*", help="fingerprint ids to clear")
    q.add_argument("--all", action="store_true", help="clear every quarantined build")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_quarantine)

    d = sub.add_parser("dead-letters", parents=[common],
                       help="list or clear the messages taken off the queues because no worker could run them")
    d.add_argument("action", choices=("list", "clear"))
    d.add_argument("--limit", type=int, default=100, help="how many of the newest to list")
    d.add_argument("--json", action="store_true")
    d.set_defaults(func=cmd_dead_letters)

    wk = sub.add_parser("worker", parents=[common],
                        help="run one worker process per GPU (pynvml), or --cpu N CPU workers")
    wk.add_argument("--cpu", type=int, default=None, metavar="N", help="N CPU worker processes instead of GPUs")
    wk.add_argument("--threads", type=int, default=None, help="backend threads per worker (CPU)")
    wk.add_argument("--backend", choices=("cpu", "cuda"), default=None)
    wk.add_argument("--key-cache-bytes", type=int, default=None,
                    help="proving keys kept loaded per worker (default: $ZKQUEUE_KEY_CACHE_BYTES or 4 GiB)")
    wk.add_argument("--synthesize", action=argparse.BooleanOptionalAction, default=None,
                    help="take witness synthesis too (default: CPU workers do, GPU workers only prove)")
    wk.add_argument("--batch", type=int, default=None, metavar="B",
                    help="claim up to B partitions of one small key (<= 2^16) at once (default: 16 on a GPU, 1 on a CPU)")
    wk.add_argument("--preload", nargs="+", default=[], metavar="KEY",
                    help="proving keys (.zkey files, or sha256 names in the store) each worker loads at start")
    wk.set_defaults(func=cmd_worker)

    d = sub.add_parser("demo", parents=[common],
                       help="prove a bundled 4-partition job on 2 local CPU workers (starts Redis if needed)")
    d.add_argument("--timeout", type=float, default=300.0)
    d.add_argument("--external", action="store_true",
                   help="use the workers already serving the broker: start neither Redis nor workers")
    d.set_defaults(func=cmd_demo)

    m = sub.add_parser("metrics", parents=[common], help="serve the queue's Prometheus metrics (depth, in-flight age)")
    m.add_argument("--port", type=int, default=9100)
    m.add_argument("--addr", default="0.0.0.0")
    m.set_defaults(func=cmd_metrics)

    f = sub.add_parser("flower", parents=[common],
                       help="the Flower dashboard on the broker (basic auth from $ZKQUEUE_FLOWER_AUTH)")
    f.add_argument("--port", type=int, default=None, help="default: $ZKQUEUE_FLOWER_PORT or 5555")
    f.add_argument("--addr", default="0.0.0.0")
    f.set_defaults(func=cmd_flower)

    sv = sub.add_parser("serve", parents=[common], help="the HTTP API (docs at /docs, OpenAPI at /openapi.json)")
    sv.add_argument("--host", default=None, help="bind address (default: $ZKQUEUE_API_HOST or 127.0.0.1)")
    sv.add_argument("--port", type=int, default=None, help="default: $ZKQUEUE_API_PORT or 8080")
    sv.set_defaults(func=cmd_serve)

    ak = sub.add_parser("api-keys", parents=[common], help="create, list or revoke the HTTP API's keys")
    ak.add_argument("action", choices=("create", "list", "revoke"))
    ak.add_argument("name", nargs="?", help="create: the key's name; revoke: its id")
    ak.add_argument("--proofs-per-hour", type=int, default=0, help="create: quota (default 0: none)")
    ak.add_argument("--max-upload-bytes", type=int, default=0,
                    help="create: largest upload (default 0: the server's ZKQUEUE_API_MAX_UPLOAD_BYTES)")
    ak.add_argument("--json", action="store_true")
    ak.set_defaults(func=cmd_api_keys)


def _command_of(words: list[str]) -> str | None:
    """The subcommand `words` name: the first that is not a global flag (-v, -h)."""
    return next((w for w in words if not w.startswith("-")), None)


def main(argv: list[str] | None = None) -> int:
    """Runs the `zkqueue` command line `argv` (default: this process's arguments)."""
    words = sys.argv[1:] if argv is None else argv
    args = parse_plain_prove(words)
    if args is not None:
        # a plain `zkqueue prove`, the one-shot process whose start-up is part of its wall
        # time: no parser is built (argparse still parses any other command line)
        return finish(args, run_command(args), as_program=argv is None)
    parser, sub = new_parser()
    add_commands(sub)
    if _command_of(words) in CORE_COMMANDS:
        # prove, verify, ...: no queue command can run, so neither its parser nor its
        # modules are loaded (a one-shot prove's start-up is part of its wall time)
        args = parser.parse_args(argv)
        return finish(args, run_command(args), as_program=argv is None)
    add_queue_commands(sub)
    args = parser.parse_args(argv)
    try:
        return finish(args, run_command(args, input_errors=_queue_input_errors()), as_program=argv is None)
    except Exception as exc:
        # Redis or the store unreachable, or a queue error that is not the input's fault.
        from kombu.exceptions import OperationalError
        from redis import RedisError

        from zkqueue.coordinator.errors import ZkqueueError
        if isinstance(exc, (ZkqueueError, RedisError, OperationalError)):
            print(f"zkqueue: error: {exc}", file=sys.stderr)
            return EXIT_INVALID
        raise


if __name__ == "__main__":
    sys.exit(main())
