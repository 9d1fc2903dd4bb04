"""API keys: bearer tokens whose secrets are kept hashed in Redis, with optional quotas.

A token reads ``zkq_<key id>_<secret>``: the id (12 hex) finds the key's record in one
lookup, the secret (32 random bytes, base64url) is checked against the stored sha256 of
it with a constant-time comparison. A plain sha256 is enough here - unlike a password, the
secret has 256 bits of entropy, so nothing can be guessed from its hash - and it keeps each
request's check to microseconds. The token is shown once, by `zkqueue api-keys create`.

Quotas: proofs per clock hour (counted in Redis, so every instance of the API sees the same
count) and the largest upload. A key with neither has only the server's limits.

Used by the API's routes (`require`) and by the CLI (`zkqueue api-keys create|list|revoke`);
imports no web framework, so the CLI stays light.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from dataclasses import asdict, dataclass

import redis

from zkqueue.coordinator import keys

TOKEN = re.compile(r"zkq_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")
HOUR_S = 3600


@dataclass(frozen=True)
class ApiKey:
    """One API key's record (never its secret)."""

    id: str
    name: str
    created_at: float
    revoked_at: float | None = None
    proofs_per_hour: int = 0       # 0: no quota of its own
    max_upload_bytes: int = 0      # 0: the server's limit only

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    def as_dict(self) -> dict:
        return {**asdict(self), "revoked": self.revoked}


class QuotaExceeded(Exception):
    """The key's proofs for this hour are spent; `retry_after_s` until the next hour starts."""

    def __init__(self, message: str, *, used: int, limit: int, retry_after_s: int):
        super().__init__(message)
        self.used, self.limit, self.retry_after_s = used, limit, retry_after_s


def _secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _decode(rec: dict) -> dict:
    return {k.decode(): v.decode() for k, v in rec.items()}


class KeyStore:
    """API keys in Redis (coordinator/keys.py: zkq:apikey:*). Every method may raise
    redis.RedisError when Redis cannot be reached."""

    def __init__(self, r: redis.Redis):
        self.r = r

    def create(self, name: str, *, proofs_per_hour: int = 0, max_upload_bytes: int = 0) -> tuple[ApiKey, str]:
        """A new key and its token (shown once: only the secret's hash is stored).

        Raises:
            ValueError: an empty name or a negative limit.
        """
        if not name.strip():
            raise ValueError("an API key needs a name")
        if proofs_per_hour < 0 or max_upload_bytes < 0:
            raise ValueError("limits are >= 0 (0: none)")
        key_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)
        now = time.time()
        with self.r.pipeline() as p:
            p.hset(keys.api_key(key_id), mapping={
                "name": name, "secret_sha256": _secret_hash(secret), "created_at": repr(now), "revoked_at": "",
                "proofs_per_hour": proofs_per_hour, "max_upload_bytes": max_upload_bytes})
            p.zadd(keys.api_keys(), {key_id: now})
            p.execute()
        return ApiKey(key_id, name, now, None, proofs_per_hour, max_upload_bytes), f"zkq_{key_id}_{secret}"

    def get(self, key_id: str) -> ApiKey | None:
        rec = _decode(self.r.hgetall(keys.api_key(key_id)))
        return self._key(key_id, rec) if rec else None

    @staticmethod
    def _key(key_id: str, rec: dict) -> ApiKey:
        return ApiKey(id=key_id, name=rec["name"], created_at=float(rec["created_at"]),
                      revoked_at=float(rec["revoked_at"]) if rec.get("revoked_at") else None,
                      proofs_per_hour=int(rec.get("proofs_per_hour") or 0),
                      max_upload_bytes=int(rec.get("max_upload_bytes") or 0))

    def list(self) -> list[ApiKey]:
        """Every key, revoked ones included, oldest first."""
        out = []
        for raw in self.r.zrange(keys.api_keys(), 0, -1):
            key = self.get(raw.decode())
            if key is not None:
                out.append(key)
        return out

    def revoke(self, key_id: str) -> bool:
        """Revokes a key at once (its next request gets 401); False when there is no such key
        or it was already revoked. The record stays, so `list` shows when it was revoked."""
        rec = _decode(self.r.hgetall(keys.api_key(key_id)))
        if not rec or rec.get("revoked_at"):
            return False
        self.r.hset(keys.api_key(key_id), "revoked_at", repr(time.time()))
        return True

    def authenticate(self, token: str) -> ApiKey | None:
        """The live key a bearer token belongs to, or None (malformed, unknown, wrong secret,
        revoked)."""
        m = TOKEN.fullmatch(token or "")
        if not m:
            return None
        rec = _decode(self.r.hgetall(keys.api_key(m.group(1))))
        if not rec or not hmac.compare_digest(rec.get("secret_sha256", ""), _secret_hash(m.group(2))):
            return None
        key = self._key(m.group(1), rec)
        return None if key.revoked else key

    def charge(self, key: ApiKey, proofs: int) -> None:
        """Counts `proofs` against the key's hourly quota (nothing to do without one).

        The hour is Redis's clock hour, so every API instance counts in the same window; a
        request that would go over is refused whole and not counted.

        Raises:
            QuotaExceeded: the hour's proofs would go over the key's limit.
        """
        if not key.proofs_per_hour:
            return
        now = float(self.r.time()[0])
        hour = int(now // HOUR_S)
        counter = keys.api_key_usage(key.id, hour)
        with self.r.pipeline() as p:
            p.incrby(counter, proofs)
            p.expire(counter, 2 * HOUR_S)
            used, _ = p.execute()
        if used > key.proofs_per_hour:
            self.r.decrby(counter, proofs)
            retry = int((hour + 1) * HOUR_S - now) + 1
            raise QuotaExceeded(
                f"API key {key.name!r} may request {key.proofs_per_hour} proofs per hour; "
                f"{used - proofs} used this hour, {proofs} more asked", used=used - proofs,
                limit=key.proofs_per_hour, retry_after_s=retry)

    def refund(self, key: ApiKey, proofs: int) -> None:
        """Gives back proofs charged for a request that was then refused."""
        if key.proofs_per_hour:
            hour = int(float(self.r.time()[0]) // HOUR_S)
            self.r.decrby(keys.api_key_usage(key.id, hour), proofs)
