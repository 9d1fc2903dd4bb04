"""Every setting zkqueue reads, and the one module that reads them from the environment.

Two groups:

* **Fleet settings** (`Settings`, `fleet()`): every process of one deployment - clients,
  workers, the reaper, the exporters - must agree on them. A worker that renews its lease
  less often than the reaper expects, or a client that looks for jobs in another Redis,
  loses work; so they are one object, checked together, and passed to whoever needs them.
* **Process settings** (`ProcessSettings`, `process()`): may differ from process to process
  (kernel threads, the backend, local caches, log level, a test's injected fault).

Precedence: a command-line flag (an override) > the environment > the default here. Each
process reads the environment once (`process()` caches; `fleet()` is called once by each
entry point) and passes the values on explicitly: nothing below an entry point reads
`os.environ`. tests/test_config.py checks that, and tests/test_readme.py that the configuration
table of docs/operations.md names every `ZKQUEUE_*` variable read anywhere in the tree.

This module is on `zkqueue prove`'s start-up path: it imports only `os` (pathlib only where a
Path is asked for: it brings re, enum and urllib.parse, about 10 ms of that start-up).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # as typing.TYPE_CHECKING
if TYPE_CHECKING:
    from pathlib import Path

FLEET, PROCESS = "fleet", "process"


class ConfigError(ValueError):
    """A setting that cannot be parsed, or settings that cannot work together.

    `expected` and `found` say what was wanted and what was given.
    """

    def __init__(self, message: str, *, expected=None, found=None):
        super().__init__(message)
        self.expected, self.found = expected, found


class Var:
    """One setting: its field name, environment variable, type, default and meaning."""

    __slots__ = ("field", "env", "kind", "default", "scope", "doc", "shown")

    def __init__(self, field: str, kind: type, default, scope: str, doc: str, *, shown: str = ""):
        self.field, self.kind, self.default, self.scope, self.doc = field, kind, default, scope, doc
        self.env = f"ZKQUEUE_{field.upper()}"
        # The default as docs/operations.md shows it, where the value above is a stand-in ("" or 0).
        self.shown = shown or f"`{_plain(default)}`"

    def parse(self, raw: str):
        """The value of `raw` (from the environment or a flag) as this setting's type.

        Raises:
            ConfigError: not a number where one is needed, or not 0/1 for a switch.
        """
        try:
            if self.kind is bool:
                if raw not in ("0", "1"):
                    raise ValueError
                return raw == "1"
            return self.kind(raw)
        except ValueError:
            what = {int: "an integer", float: "a number", bool: "0 or 1"}.get(self.kind, self.kind.__name__)
            raise ConfigError(f"{self.env}={raw!r} is not {what}", expected=what, found=raw) from None


def _plain(value) -> str:
    """A default as written in docs/operations.md: 6.0 -> 6, True -> 1."""
    if isinstance(value, bool):
        return str(int(value))
    return f"{value:g}" if isinstance(value, float) else str(value)


# Fleet-wide: every process of a deployment must see the same values.
FLEET_VARS = (
    Var("redis_url", str, "redis://127.0.0.1:6379/0", FLEET,
        "broker and job state: `redis://USER:PASSWORD@host:6379/0`, `rediss://...` over TLS, or "
        "`sentinel://USER:PASSWORD@s1:26379,s2:26379,s3:26379/0` (`sentinels://` over TLS) to follow "
        "a failover; the host part must agree fleet-wide, the user is each process's role "
        "(deploy/redis/users.acl)"),
    Var("redis_sentinel_master", str, "zkqueue", FLEET,
        "the name the sentinels monitor the primary under (`sentinel://` URLs only)"),
    Var("cells", str, "", FLEET,
        "clients only (`submit`, `wait`, `status`, `cancel`, `serve`): several cells, each one Redis with its own "
        "workers and reaper, as `NAME=URL` pairs separated by spaces (`a=redis://r1:6379/0 b=redis://r2:6379/0`); "
        "a new job goes to one cell chosen from its request id, lookups find its cell from the job id "
        "(docs/architecture.md, \"Past one Redis\"). A cell's name is its identity: never rename one. "
        "Workers ignore it: each serves the cell of its `ZKQUEUE_REDIS_URL`",
        shown="none (one Redis: `ZKQUEUE_REDIS_URL`)"),
    Var("store_url", str, "", FLEET,
        "artifact store, any fsspec URL; must be shared by every machine (`s3://bucket/prefix`: endpoint, "
        "credentials and region from the usual `AWS_*` variables or profile, see below)",
        shown="`$XDG_DATA_HOME/zkqueue/store` (`~/.local/share/zkqueue/store`)"),
    Var("lease_ttl_s", float, 6.0, FLEET, "a worker silent this long loses its partition to the reaper"),
    Var("reaper_interval_s", float, 1.0, FLEET, "how often the reaper looks for expired deadlines"),
    Var("max_attempts", int, 3, FLEET, "starts per partition (or witness) before its job fails"),
    Var("send_grace_s", float, 10.0, FLEET, "a message still being sent after this long is sent again"),
    Var("heartbeat_interval_s", float, 1.0, FLEET, "worker heartbeat period"),
    Var("heartbeat_ttl_s", float, 5.0, FLEET, "a worker without a heartbeat this long is dead"),
    Var("consumer_stall_s", float, 15.0, FLEET,
        "a worker holding no task while messages wait this long on its queues stops, to be restarted "
        "(its broker consumer stopped taking work)"),
    Var("task_time_limit_s", float, 1800.0, FLEET, "Celery hard limit of one task; must be below the visibility timeout"),
    Var("visibility_timeout_s", float, 3600.0, FLEET,
        "after this long unacknowledged, the copy of a message whose partitions all moved on is dropped"),
    Var("result_ttl_s", float, 7 * 24 * 3600.0, FLEET, "how long a finished job's record and proofs stay in Redis"),
    Var("max_bounces", int, 60, FLEET,
        "re-routes of a partition without an attempt spent (to another worker) before it is given up"),
    Var("key_affinity", bool, True, FLEET,
        "a partition goes first to a worker that holds its key loaded and is free soon enough (`0`: to "
        "whichever worker takes the shared queue first)"),
    Var("affinity_wait_s", float, 30.0, FLEET,
        "a partition handed to a worker that holds its key, not taken within this long, goes back to the "
        "shared queue"),
    Var("queued_check_s", float, 30.0, FLEET,
        "a queued partition's message is checked for this often, and sent again if the broker lost it"),
    Var("orphan_grace_s", float, 3.0, FLEET,
        "a message taken by a worker and not started this long lost its worker: sent again"),
    Var("orphan_timeout_s", float, 30.0, FLEET,
        "a partition no healthy worker can take (parked, holding no worker) fails after this long, naming the "
        "builds at fault; so does a witness to compute while workers are alive but none takes synthesis"),
    Var("quarantine_after", int, 2, FLEET,
        "invalid proofs (of witnesses another build proved valid) that quarantine a build fleet-wide"),
    Var("partition_timeout_s", float, 1500.0, FLEET,
        "longest attempt before its key's proving time was measured; must be below the task time limit"),
    Var("overdue_factor", float, 4.0, FLEET,
        "an attempt running this many times the measured proving time (key load included) is hung: reassigned"),
    Var("overdue_min_s", float, 10.0, FLEET, "... but never sooner than this"),
    Var("submit_batch", int, 1, FLEET,
        "a client sends one broker message per this many partitions of a key up to 2^16 constraints "
        "(its worker claims them in one transition); 1: one message per partition"),
    Var("stop_grace_s", float, 5.0, FLEET,
        "a stopped attempt still inside a kernel call after this long gets its process restarted"),
)

# Per process: may differ between the processes of one deployment.
PROCESS_VARS = (
    Var("threads", int, 0, PROCESS, "CPU kernel threads (`--threads`)", shown="all cores (a worker: its share)"),
    Var("backend", str, "auto", PROCESS, "`cpu`, `cuda` or `auto` for `zkqueue prove`"),
    Var("cache_dir", str, "", PROCESS, "local caches: store artifacts, compiled native kernels, circuits",
        shown="`~/.cache/zkqueue`"),
    Var("store_cache_bytes", int, 20 << 30, PROCESS,
        "a remote store's objects (proving keys, witnesses) kept in `CACHE_DIR/artifacts`, shared by the "
        "host's processes (each object fetched once per host), least recently used evicted beyond this"),
    Var("store_part_bytes", int, 64 << 20, PROCESS,
        "uploads to an object store of at least twice this size go in parts of this size (S3 multipart; "
        "at least 5 MiB)"),
    Var("redis_ca_file", str, "", PROCESS,
        "CA certificates (PEM) that Redis's and the sentinels' TLS certificates must chain to "
        "(`rediss://`, `sentinels://`)", shown="the system's"),
    Var("redis_cert_file", str, "", PROCESS,
        "client certificate (PEM) for a Redis that requires one (`tls-auth-clients yes`)", shown="none"),
    Var("redis_key_file", str, "", PROCESS, "the client certificate's private key (PEM)", shown="none"),
    Var("wasm_cache", str, "", PROCESS, "compiled circom `.wasm` calculators (`off` disables it, or a directory)",
        shown="`CACHE_DIR/wasm`"),
    Var("cpu_arith", str, "", PROCESS,
        "CPU field arithmetic: `x86-adx` (mulx/adx, and AVX-512 IFMA in the MSM where the CPU has it) or `portable`",
        shown="by CPU feature"),
    Var("key_cache_bytes", int, 4 << 30, PROCESS,
        "proving keys kept loaded per worker (`worker --key-cache-bytes`), with the CPU backend's "
        "fixed-base MSM tables for them, which count against it and are built only in the room left"),
    Var("cuda_device", int, 0, PROCESS,
        "device of `zkqueue prove --backend cuda` (workers get theirs from the supervisor)"),
    Var("cuda_cache_bytes", int, 0, PROCESS, "proving-key sections kept on the device",
        shown="half the GPU's memory"),
    Var("cuda_emulation", bool, False, PROCESS,
        "1: the `cuda` backend runs its kernels on a host emulation (for checks without a GPU, not for use)"),
    Var("nvrtc_lib", str, "", PROCESS, "path of libnvrtc when CuPy's own lookup does not find it",
        shown="CuPy's lookup"),
    Var("metrics_port", int, 0, PROCESS,
        "worker *i* of a `zkqueue worker` serves Prometheus `/metrics` on this port + *i*", shown="`0` (off)"),
    Var("task_events", bool, True, PROCESS,
        "workers send Celery task events (Flower's task list) while Flower runs; `0` never"),
    Var("loglevel", str, "INFO", PROCESS, "worker log level"),
    Var("flower_auth", str, "", PROCESS, "`user:password` for `zkqueue flower`'s HTTP basic auth",
        shown="none (required)"),
    Var("flower_port", int, 5555, PROCESS, "`zkqueue flower`'s port (`--port`)"),
    Var("canary", bool, True, PROCESS,
        "a worker proves the bundled canary circuits on its backend before it takes any work (`workers/canary.py`); "
        "`0` skips that: only for a test of a worker whose backend cannot prove here on purpose, never in a fleet"),
    Var("fault", str, "", PROCESS, "test only: injected worker faults (`workers/faults.py`)", shown="none"),
    Var("alive_file", str, "", PROCESS,
        "set by `zkqueue worker` for each worker process: a file it touches every heartbeat, which the "
        "supervisor watches", shown="none"),
    # `zkqueue serve`, the HTTP API (api/): per process, so that instances behind one load
    # balancer may differ (a bigger upload limit on the instance that takes circuit uploads).
    Var("api_host", str, "127.0.0.1", PROCESS, "`zkqueue serve`'s bind address (`--host`)"),
    Var("api_port", int, 8080, PROCESS, "`zkqueue serve`'s port (`--port`)"),
    Var("api_max_upload_bytes", int, 16 << 30, PROCESS,
        "largest multipart body `zkqueue serve` takes (a circuit's files, or a proof request's witnesses); "
        "an API key's own limit may be lower", shown="`17179869184` (16 GiB)"),
    Var("api_max_json_bytes", int, 64 << 20, PROCESS, "largest JSON body `zkqueue serve` takes (a proof request's inputs)",
        shown="`67108864` (64 MiB)"),
    Var("api_max_partitions", int, 1024, PROCESS, "most proofs one API request may ask for"),
    Var("api_request_timeout_s", float, 30.0, PROCESS,
        "an API request other than an upload or an event stream that takes longer gets 504"),
    Var("api_upload_idle_timeout_s", float, 60.0, PROCESS, "an API upload that sends nothing for this long gets 408"),
    Var("api_sse_keepalive_s", float, 15.0, PROCESS,
        "an idle event stream (`/v1/jobs/{id}/events`) gets a comment line this often"),
    Var("api_metrics_port", int, 0, PROCESS,
        "`zkqueue serve` serves Prometheus `/metrics` (requests by route and status) on this port",
        shown="`0` (off)"),
)

ALL_VARS = FLEET_VARS + PROCESS_VARS


def _values(variables, environ, overrides: dict) -> dict:
    """Defaults, then the environment, then `overrides` (None values ignored)."""
    values = {}
    for var in variables:
        raw = environ.get(var.env)
        values[var.field] = var.default if raw in (None, "") else var.parse(raw)
    unknown = set(overrides) - {v.field for v in variables}
    if unknown:
        raise TypeError(f"unknown settings {sorted(unknown)}")
    values.update({k: v for k, v in overrides.items() if v is not None})
    return values


class _Frozen:
    """Attributes set once in __init__; `replace` makes a changed copy."""

    __slots__ = ()
    VARS: tuple = ()

    def __init__(self, **values):
        for var in self.VARS:
            object.__setattr__(self, var.field, values.pop(var.field, var.default))
        if values:
            raise TypeError(f"unknown settings {sorted(values)}")

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is read-only; use replace()")

    def replace(self, **changes):
        """A copy with `changes` applied (and checked, for fleet settings)."""
        values = {v.field: getattr(self, v.field) for v in self.VARS}
        values.update(changes)
        copy = type(self)(**values)
        copy.check()
        return copy

    def check(self) -> None:
        """Raises ConfigError when the values cannot work together (nothing to check here)."""

    def as_dict(self) -> dict:
        return {v.field: getattr(self, v.field) for v in self.VARS}

    def __eq__(self, other):
        return type(other) is type(self) and self.as_dict() == other.as_dict()

    def __hash__(self):
        return hash(tuple(self.as_dict().items()))

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.as_dict().items())})"


class Settings(_Frozen):
    """Everything the client, the workers and the reaper must agree on (see FLEET_VARS)."""

    VARS = FLEET_VARS
    __slots__ = tuple(v.field for v in FLEET_VARS)

    @property
    def lease_refresh_s(self) -> float:
        """How often a lease holder renews: four chances before its lease expires."""
        return self.lease_ttl_s / 4

    @classmethod
    def from_env(cls, environ=None, **overrides) -> "Settings":
        """Settings from ZKQUEUE_* variables, then `overrides` (None values ignored).

        Raises:
            ConfigError: a variable that is not a number, or settings that cannot work together.
        """
        values = _values(FLEET_VARS, os.environ if environ is None else environ, overrides)
        if not values["store_url"]:
            values["store_url"] = default_store_url(os.environ if environ is None else environ)
        settings = cls(**values)
        settings.check()
        return settings

    def check(self) -> None:
        """Refuses settings under which a message could be redelivered while still running.

        Raises:
            ConfigError: task_time_limit_s >= visibility_timeout_s, a lease that cannot be
                refreshed in time, or limits in the wrong order.
        """
        if self.task_time_limit_s >= self.visibility_timeout_s:
            raise ConfigError(
                f"task_time_limit_s ({self.task_time_limit_s:g}) must be below the Redis "
                f"visibility_timeout_s ({self.visibility_timeout_s:g}): otherwise Redis redelivers "
                "a task that is still running", expected=f"< {self.visibility_timeout_s:g}",
                found=self.task_time_limit_s)
        if self.lease_ttl_s <= 0 or self.reaper_interval_s <= 0 or self.max_attempts < 1:
            raise ConfigError("lease_ttl_s and reaper_interval_s must be > 0 and max_attempts >= 1",
                              found=(self.lease_ttl_s, self.reaper_interval_s, self.max_attempts))
        if self.partition_timeout_s >= self.task_time_limit_s:
            raise ConfigError(
                f"partition_timeout_s ({self.partition_timeout_s:g}) must be below task_time_limit_s "
                f"({self.task_time_limit_s:g}): the queue, not Celery's hard limit, decides when an attempt "
                "is overdue", expected=f"< {self.task_time_limit_s:g}", found=self.partition_timeout_s)
        if self.quarantine_after < 1:
            raise ConfigError("quarantine_after must be >= 1", expected=">= 1", found=self.quarantine_after)
        if self.submit_batch < 1:
            raise ConfigError("submit_batch must be >= 1", expected=">= 1", found=self.submit_batch)
        if self.heartbeat_interval_s >= self.heartbeat_ttl_s:
            raise ConfigError("heartbeat_interval_s must be below heartbeat_ttl_s",
                              expected=f"< {self.heartbeat_ttl_s:g}", found=self.heartbeat_interval_s)


class ProcessSettings(_Frozen):
    """What may differ from one process to the next (see PROCESS_VARS)."""

    VARS = PROCESS_VARS
    __slots__ = tuple(v.field for v in PROCESS_VARS)

    @classmethod
    def from_env(cls, environ=None, **overrides) -> "ProcessSettings":
        """Process settings from ZKQUEUE_* variables, then `overrides` (None values ignored).

        Raises:
            ConfigError: a variable that is not a number where one is needed.
        """
        environ = os.environ if environ is None else environ
        values = _values(PROCESS_VARS, environ, overrides)
        if not values["cache_dir"]:
            # os.path, not pathlib: `zkqueue prove` reads this setting to find its native
            # build, and pathlib costs its start-up about 10 ms (groth16/native.py)
            home = environ.get("HOME") or os.path.expanduser("~")
            values["cache_dir"] = os.path.join(home, ".cache", "zkqueue")
        if not values["wasm_cache"]:
            values["wasm_cache"] = os.path.join(values["cache_dir"], "wasm")
        return cls(**values)

    @property
    def cache_path(self) -> Path:
        """The local cache directory as a Path."""
        from pathlib import Path  # noqa: PLC0415 - see from_env
        return Path(self.cache_dir)


def markdown_table() -> str:
    """The table of every setting in docs/operations.md (tests/test_readme.py checks the page has it)."""
    rows = ["| Variable | Default | Scope | Meaning |", "|---|---|---|---|"]
    rows += [f"| `{v.env}` | {v.shown} | {v.scope} | {v.doc} |" for v in ALL_VARS]
    return "\n".join(rows)


def default_store_url(environ=None) -> str:
    """A local directory: $XDG_DATA_HOME/zkqueue/store (~/.local/share/zkqueue/store)."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "zkqueue", "store")


def fleet(**overrides) -> Settings:
    """The fleet settings from this process's environment and `overrides` (flags).

    Raises:
        ConfigError: see Settings.from_env.
    """
    return Settings.from_env(**overrides)


_process: ProcessSettings | None = None


def process() -> ProcessSettings:
    """This process's own settings, read from the environment on first use.

    Raises:
        ConfigError: a variable that is not a number where one is needed.
    """
    global _process
    if _process is None:
        _process = ProcessSettings.from_env()
    return _process


def set_process(settings: ProcessSettings | None) -> None:
    """Makes `settings` this process's own (an entry point that took flags; None: read the
    environment again on next use, as a test that changed it needs)."""
    global _process
    _process = settings


def compiler() -> str | None:
    """The C++ compiler the environment names ($CXX), if any."""
    return os.environ.get("CXX") or None


def child_environ(settings: Settings | None = None, proc: ProcessSettings | None = None, **extra) -> dict:
    """The environment for a zkqueue child process: this one's, with `settings` and `proc`
    written as ZKQUEUE_* variables (so the child reads what this process was given as flags)
    and `extra` (name -> value) added."""
    env = dict(os.environ)
    for obj in (settings, proc):
        if obj is None:
            continue
        for var in obj.VARS:
            value = getattr(obj, var.field)
            env[var.env] = ("1" if value else "0") if var.kind is bool else str(value)
    env.update({k: str(v) for k, v in extra.items()})
    return env
