"""The job state machine as atomic Redis Lua scripts, and the one way to call them.

Celery's chord counter is not used: it double-counts a redelivered member and a member
killed without reject-on-worker-lost sinks the whole chord. Instead every slot of a job (a
partition to prove, a witness to compute, the finalize step) carries a `token` that is
bumped whenever it is (re)enqueued; a message whose token is not the slot's current one is
stale and does nothing, and every transition checks the token (fencing). A worker claims a
slot (attempts += 1, lease deadline in zkq:deadlines), refreshes its lease while working,
and records the result with HSETNX, so a duplicate run changes nothing. The write that
completes the set elects itself with HSETNX finalize_sent and gets the finalize token.

The scripts live in coordinator/lua/, one transition each; prelude.lua is put in front of
each. A script's header names what it takes:

    -- args: token worker pid fingerprint run_s     its own arguments, passed by name
    -- settings: lease_ttl_s max_attempts            fleet settings it reads (from Settings)
    -- keys: quarantine                               shared keys it touches (SHARED_KEYS)

`Transitions.run(name, job, slot, **args)` refuses arguments the header does not name and
requires every one it does; tests/test_lua_scripts.py checks each header against its
script's body and every caller in the tree. Only coordinator/scheduler.py calls `run`: it
pairs each transition with the messages it calls for, and turns each script's raw reply
(an `Outcome`: a kind and strings, as Redis returns a Lua table) into a typed reply once.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import redis

from . import keys
from .broker import UNACKED_HASH, UNACKED_INDEX

LUA_DIR = Path(__file__).with_name("lua")

# Settings every script gets, because the prelude's own helpers read them.
PRELUDE_SETTINGS = ("result_ttl_s", "send_grace_s")

# The keys outside one job that a script may name on its "keys:" line. Per-job keys (the
# results hash, another slot, the request id) are built inside the scripts from the prefix.
SHARED_KEYS = {
    "jobs": keys.jobs(),
    "quarantine": keys.quarantine(),
    "strikes": keys.strikes(),
    "fingerprints": keys.fingerprints(),
    "runtime": keys.runtime(),
    "unacked": UNACKED_HASH,
    "unacked_index": UNACKED_INDEX,
}

_HEADER = re.compile(r"^-- (args|settings|keys):(.*)$", re.MULTILINE)


@dataclass(frozen=True)
class ScriptSpec:
    """What one script takes, as its header says."""

    name: str
    args: tuple[str, ...]
    settings: tuple[str, ...]
    keys: tuple[str, ...]
    body: str


@cache
def script_spec(name: str) -> ScriptSpec:
    """The header and body of coordinator/lua/NAME.lua.

    Raises:
        ValueError: the header lacks its "args:" line.
    """
    body = (LUA_DIR / f"{name}.lua").read_text()
    found = {kind: tuple(rest.split()) for kind, rest in _HEADER.findall(body)}
    if "args" not in found:
        raise ValueError(f"{name}.lua: its header has no '-- args:' line")
    return ScriptSpec(name, found["args"], found.get("settings", ()), found.get("keys", ()), body)


def script_names() -> tuple[str, ...]:
    """Every transition script (prelude.lua is not one)."""
    return tuple(sorted(p.stem for p in LUA_DIR.glob("*.lua") if p.stem != "prelude"))


@cache
def script_source(name: str) -> str:
    """prelude.lua followed by NAME.lua."""
    return (LUA_DIR / "prelude.lua").read_text() + "\n" + script_spec(name).body


@dataclass(frozen=True)
class Outcome:
    """A script's raw reply, as it crossed the wire: `kind` (e.g. "ok", "stale", "send") and
    its other items as strings. Read only by coordinator/scheduler.py, which parses each
    script's reply into a typed one (Claimed, Lost, Recorded, ...)."""

    kind: str
    detail: tuple[str, ...] = ()


def _outcome(raw) -> Outcome:
    if isinstance(raw, list):
        items = [x.decode() if isinstance(x, bytes) else str(x) for x in raw]
        return Outcome(items[0] if items else "", tuple(items[1:]))
    return Outcome(raw.decode() if isinstance(raw, bytes) else str(raw))


class Transitions:
    """Runs the transition scripts on one Redis database with one set of fleet settings.

    Raises redis.RedisError (from run) when Redis cannot be reached.
    """

    def __init__(self, client: redis.Redis, settings):
        self.r = client
        self.settings = settings
        self._scripts = {name: client.register_script(script_source(name)) for name in script_names()}

    def run(self, name: str, job_id: str, slot, **args) -> Outcome:
        """Runs NAME.lua on `slot` of `job_id` with its named arguments.

        Raises:
            TypeError: an argument the script's header does not name, or one it names missing.
            redis.RedisError: Redis cannot be reached, or the script failed.
        """
        spec = script_spec(name)
        missing, unknown = set(spec.args) - set(args), set(args) - set(spec.args)
        if missing or unknown:
            raise TypeError(f"{name}.lua takes {', '.join(spec.args) or 'no arguments'}"
                            + (f"; missing {', '.join(sorted(missing))}" if missing else "")
                            + (f"; unknown {', '.join(sorted(unknown))}" if unknown else ""))
        slot = str(slot)
        context = {
            "job": job_id, "slot": slot, "prefix": keys.PREFIX, "sep": keys.MEMBER_SEP, "keys": list(spec.keys),
            "settings": {s: getattr(self.settings, s) for s in PRELUDE_SETTINGS + spec.settings},
        }
        key_names = [keys.job(job_id), keys.slot(job_id, slot), keys.deadlines(), keys.events(job_id), keys.routed(),
                     keys.checks()]
        key_names += [SHARED_KEYS[k] for k in spec.keys]
        return _outcome(self._scripts[name](keys=key_names, args=[json.dumps(context), json.dumps(args)]))
