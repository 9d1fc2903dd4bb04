"""Past one Redis: several cells behind one client.

A cell is one whole zkqueue deployment as it runs on one Redis: that Redis (broker and job
state), the workers whose ZKQUEUE_REDIS_URL names it, and their reaper. Cells share nothing
but the artifact store (content addressed, so sharing it is safe) and know nothing of each
other. A job lives wholly in one cell; `Cells` only decides which, and finds it again:

* **Which cell takes a new job**: rendezvous hashing (highest random weight) of the request
  id over the cells' names: every client ranks the cells the same way for the same request
  id, so a resubmission reaches the cell that has the first job, and adding a cell moves only
  the share of new requests that the new cell wins. The first reachable cell in that order
  takes the job; a job without a request id is ranked by a fresh random id (an even spread).
* **Which cell holds a job**: the job id names it. Ids stay 32 hex digits (the broker
  guard, the HTTP API and every key name expect that), minted so that the cell they rank
  first is the cell that took the job: a lookup ranks the id and asks that cell (the others
  only when it does not have the job: one made before cells, or before a cell was added).
* **A cell that is down**: new jobs go to the next cell in rendezvous order; a lookup of a
  job whose cell is down fails with `CellDown`, naming the cell and its URL.

Cells are named (`NAME=URL`): the name, not the URL, is hashed, so a cell's Redis can move to
another host without moving a job; renaming a cell moves the jobs' homes (lookups still
find them, by asking every cell). See docs/architecture.md, "Past one Redis".
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from zkqueue.config import ConfigError, Settings

from . import connections, keys
from .client import Client, Job
from .errors import JobNotFound, ZkqueueError
from .jobs import Priority

log = logging.getLogger("zkqueue.cells")

NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
# A cell found unreachable is not asked again for this long: a client serving many requests
# (the HTTP API, a batch of submits) would otherwise wait for each connect attempt again.
RECHECK_S = 5.0
# How long a reachability probe may wait on a socket: a cell that does not answer a PING in
# this long is taken as down for this request.
PROBE_TIMEOUT_S = 2.0


class CellDown(ZkqueueError):
    """A cell's Redis cannot be reached (`cell` names it), or no cell can take a new job.

    Retryable: the cell may come back (restarted from its append-only file, a failover)."""

    retryable = True

    def __init__(self, message: str, *, cell: str | None = None, job_id: str | None = None):
        self.cell, self.job_id = cell, job_id
        super().__init__(message)


@dataclass(frozen=True)
class CellSpec:
    """One cell: its name (its identity, hashed) and its Redis URL."""

    name: str
    redis_url: str

    def safe_url(self) -> str:
        """The URL with its password masked, for messages."""
        return connections.parse(self.redis_url).safe()


def parse_cells(text: str) -> list[CellSpec]:
    """The cells of a ZKQUEUE_CELLS value: `NAME=URL` pairs separated by whitespace (not
    commas: a `sentinel://` URL lists its sentinels with commas).

    Raises:
        ConfigError: a pair without `=`, a bad name, a URL zkqueue cannot use, a name or
            URL given twice, or fewer than one cell.
    """
    specs: list[CellSpec] = []
    for pair in text.split():
        name, sep, url = pair.partition("=")
        if not sep or not url:
            raise ConfigError(f"ZKQUEUE_CELLS: {pair!r} is not NAME=URL", expected="NAME=redis://host:port/db",
                              found=pair)
        if not NAME.match(name):
            raise ConfigError(f"ZKQUEUE_CELLS: cell name {name!r} must be 1-32 of a-z 0-9 _ - (starting with a "
                              "letter or digit)", expected=NAME.pattern, found=name)
        try:
            connections.parse(url)      # a malformed URL is refused here, not at first use
        except ConfigError as exc:
            raise ConfigError(f"ZKQUEUE_CELLS: cell {name}: {exc}", expected=exc.expected, found=exc.found) from None
        specs.append(CellSpec(name, url))
    if not specs:
        raise ConfigError("ZKQUEUE_CELLS names no cell", expected="NAME=URL [NAME=URL ...]", found=text)
    for what, values in (("name", [s.name for s in specs]), ("URL", [s.safe_url() for s in specs])):
        twice = sorted({v for v in values if values.count(v) > 1})
        if twice:
            raise ConfigError(f"ZKQUEUE_CELLS: {what} {twice[0]} is given twice: each cell is its own Redis",
                              expected=f"distinct {what}s", found=twice[0])
    return specs


def rank(key: str, names: Iterable[str]) -> list[str]:
    """`names` in rendezvous order for `key`: highest weight first, the weight of a name being
    a hash of (name, key). Every process ranks alike; removing a name moves only the keys it
    ranked first, adding one moves only the keys it now ranks first."""
    def weight(name: str) -> bytes:
        return hashlib.blake2b(f"{name}\0{key}".encode(), digest_size=8).digest()
    return sorted(names, key=weight, reverse=True)


class Cells:
    """One client over several cells: submit picks a job's cell, job() finds it again.

    Built from the fleet settings' `cells` (ZKQUEUE_CELLS) or from a list of specs; every
    cell's Client shares the other fleet settings (the store URL first of all). The Job
    objects returned are each cell's own (`Job.client` is that cell's Client).
    """

    def __init__(self, specs: list[CellSpec], settings: Settings):
        if not specs:
            raise ConfigError("no cells", expected=">= 1 cell", found=0)
        self.specs = {s.name: s for s in specs}
        self.settings = settings
        self.clients: dict[str, Client] = {}
        self._probes: dict[str, redis.Redis] = {}
        self._down: dict[str, tuple[float, str]] = {}     # name -> (recheck at, why)
        for s in specs:
            cell_settings = settings.replace(redis_url=s.redis_url)
            self.clients[s.name] = Client(settings=cell_settings, new_job_id=self._minter(s.name))
            probe = connections.client(cell_settings, socket_timeout_s=PROBE_TIMEOUT_S)
            probe.set_retry(Retry(NoBackoff(), 0))      # one try: a refused connect is an answer
            self._probes[s.name] = probe

    @classmethod
    def from_settings(cls, settings: Settings) -> "Cells":
        """The cells of `settings.cells` (ZKQUEUE_CELLS).

        Raises:
            ConfigError: see parse_cells.
        """
        return cls(parse_cells(settings.cells), settings)

    @classmethod
    def from_urls(cls, urls: dict[str, str], *, store_url: str | None = None,
                  settings: Settings | None = None) -> "Cells":
        """Cells named by `urls` (name -> Redis URL), the other settings from `settings` (or the
        environment) and `store_url`.

        Raises:
            ConfigError: see parse_cells.
        """
        settings = settings or Settings.from_env(store_url=store_url)
        if store_url is not None:
            settings = settings.replace(store_url=store_url)
        return cls(parse_cells(" ".join(f"{n}={u}" for n, u in urls.items())), settings)

    def close(self) -> None:
        for c in self.clients.values():
            c.close()
        for p in self._probes.values():
            p.close()

    def __enter__(self) -> "Cells":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- which cell ------------------------------------------------------------------------

    def home(self, job_id: str) -> str:
        """The cell a job id names (the cell its id ranks first)."""
        return rank(job_id, self.specs)[0]

    def cell_of(self, job: Job) -> str:
        """The name of the cell `job` (a Job from this object) lives in."""
        return next(name for name, c in self.clients.items() if c is job.client)

    def _minter(self, name: str):
        def mint() -> str:
            # Expected tries: the number of cells (each fresh id ranks `name` first with
            # probability 1/N); the hash is a microsecond.
            while True:
                job_id = uuid.uuid4().hex
                if self.home(job_id) == name:
                    return job_id
        return mint

    def reachable(self, name: str) -> bool:
        """Whether cell `name` answers a PING now (a cell found down is not asked again for
        RECHECK_S)."""
        down = self._down.get(name)
        if down and time.monotonic() < down[0]:
            return False
        try:
            self._probes[name].ping()
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            self._down[name] = (time.monotonic() + RECHECK_S, str(exc))
            log.warning("cell %s (%s) is unreachable: %s", name, self.specs[name].safe_url(), exc)
            return False
        self._down.pop(name, None)
        return True

    def down_reason(self, name: str) -> str:
        """Why cell `name` was last found unreachable (the connection error), for messages."""
        return self._down.get(name, (0.0, "unreachable"))[1]

    def _why_down(self, name: str) -> str:
        return f"cell {name} ({self.specs[name].safe_url()}): {self.down_reason(name)}"

    # -- submitting ------------------------------------------------------------------------

    def _target(self, request_id: str | None) -> tuple[str, Job | None]:
        """The cell for a new job of `request_id`, or the job that request already made.

        Raises:
            CellDown: no cell can be reached.
        """
        order = rank(request_id or uuid.uuid4().hex, self.specs)
        live = [name for name in order if self.reachable(name)]
        if request_id:
            found = self._request_in(request_id, live)
            if found is not None:
                return self.cell_of(found), found
            above = order[:order.index(live[0])] if live else []
            if above:
                # Availability over exactly-once: a resubmission whose first job is in a
                # cell that is down now makes a second job here (docs/architecture.md).
                log.warning("request %s: cell(s) %s ranked first for it are unreachable; a job this request "
                            "made there cannot be seen, so the job goes to cell %s", request_id,
                            ", ".join(above), live[0])
        if not live:
            raise CellDown("no cell can be reached to take the job: "
                           + "; ".join(self._why_down(n) for n in order))
        return live[0], None

    def _request_in(self, request_id: str, names: list[str]) -> Job | None:
        # Every live cell is asked, not just the first: while a cell ranked above was down,
        # the first job of this request went further down the order.
        for name in names:
            found = self.clients[name].r.get(keys.request(request_id))
            if found:
                return Job(self.clients[name], found.decode())
        return None

    def existing(self, request_id: str) -> Job | None:
        """The job `request_id` made before, from any reachable cell (None: none there)."""
        return self._request_in(request_id, [n for n in rank(request_id, self.specs) if self.reachable(n)])

    def submit(self, zkey: str | Path, witnesses: Iterable[str | Path] | None = None, *,
               request_id: str | None = None, **kw) -> Job:
        """Client.submit on the cell chosen for this request (see the module's docstring); the
        same arguments. The same `request_id` again returns the first job while its cell is up.

        Raises:
            CellDown: no cell can be reached.
            BadRequest, StoreError, redis.RedisError: as Client.submit (a cell that fails
                after it answered the probe is not replaced by another).
        """
        name, existing = self._target(request_id)
        if existing is not None:
            return existing
        return self.clients[name].submit(zkey, witnesses, request_id=request_id, **kw)

    def submit_stored(self, zkey_sha: str, *, request_id: str | None = None,
                      priority: Priority | str = Priority.NORMAL, **kw) -> Job:
        """Client.submit_stored on the cell chosen for this request; the same arguments.

        Raises:
            CellDown: no cell can be reached.
            BadRequest, redis.RedisError: as Client.submit_stored.
        """
        name, existing = self._target(request_id)
        if existing is not None:
            return existing
        return self.clients[name].submit_stored(zkey_sha, request_id=request_id, priority=priority, **kw)

    # -- finding a job ---------------------------------------------------------------------

    def job(self, job_id: str) -> Job:
        """The job with this id, from the cell its id names (then from the others: a job
        submitted by a plain Client before cells, or before a cell was added).

        Raises:
            CellDown: the job's cell cannot be reached (the message names the cell and URL).
            JobNotFound: no reachable cell has the job (never submitted, or expired).
        """
        order = rank(job_id, self.specs)
        for name in order:
            if self.reachable(name) and self.clients[name].r.exists(keys.job(job_id)):
                return Job(self.clients[name], job_id)
        home = order[0]
        if not self.reachable(home):
            raise CellDown(f"job {job_id} belongs to cell {home} ({self.specs[home].safe_url()}), which cannot "
                           f"be reached: {self.down_reason(home)}", cell=home, job_id=job_id)
        unreachable = [n for n in order if not self.reachable(n)]
        raise JobNotFound(f"no job {job_id} in cell {home}" + (
            f" (nor in any other reachable cell; unreachable: {', '.join(unreachable)})" if unreachable
            else " nor in any other cell"), job_id=job_id)
