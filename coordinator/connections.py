"""Every Redis connection zkqueue makes, built here from the settings and nowhere else.

The client, the workers (their tasks, heartbeats and reaper), the Celery broker (workers and
senders), Flower and the metrics exporter all reach Redis through this module, so TLS, the
role's user and password, and Sentinel failover work the same for each of them.

`ZKQUEUE_REDIS_URL` takes four forms:

    redis://USER:PASSWORD@host:6379/0                      one Redis
    rediss://USER:PASSWORD@host:6380/0                     one Redis over TLS
    sentinel://USER:PASSWORD@s1:26379,s2:26379,s3:26379/0  the primary the sentinels name
    sentinels://USER:PASSWORD@s1:26379,.../0               the same, everything over TLS

USER and PASSWORD are the process's role (deploy/redis/users.acl: worker, client, admin);
`redis://:PASSWORD@host` is the `default` user. Over TLS the server's certificate is checked
against `ZKQUEUE_REDIS_CA_FILE` (the system's CAs when unset) and its host name or address;
`ZKQUEUE_REDIS_CERT_FILE` and `ZKQUEUE_REDIS_KEY_FILE` add a client certificate. With
Sentinel, the sentinels are asked for the primary of `ZKQUEUE_REDIS_SENTINEL_MASTER` and
asked again whenever a connection to it fails or finds a replica (after a failover); the
sentinels themselves are reached without a password (their own ACLs, if any, are not set
by zkqueue).
"""

from __future__ import annotations

import re
import ssl
import weakref
from dataclasses import dataclass
from typing import Callable
from urllib.parse import unquote, urlsplit

import redis

from zkqueue.config import ConfigError, ProcessSettings, Settings

SCHEMES = {"redis": (False, False), "rediss": (True, False), "sentinel": (False, True), "sentinels": (True, True)}
DEFAULT_PORTS = {False: 6379, True: 26379}
_HOST = re.compile(r"^(?:\[(?P<v6>[^\]]+)\]|(?P<host>[^:\[\]]*))(?::(?P<port>\d+))?$")

# A Redis that vanishes without closing the connection (a host cut off, a failover behind a
# NAT) must turn into an error, not a hang: every socket gets a timeout. Blocking reads
# (pub/sub, BRPOP) stay below it on their own (wait() polls every second; a consumer's BRPOP
# times out after transport.BRPOP_TIMEOUT_S, 5 s, and kombu's health checks reconnect a
# connection silent for longer).
SOCKET_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 10.0
HEALTH_CHECK_S = 10


@dataclass(frozen=True)
class Target:
    """A parsed ZKQUEUE_REDIS_URL: where Redis is, as whom, and whether over TLS/Sentinel."""

    tls: bool
    sentinel: bool
    hosts: tuple[tuple[str, int], ...]
    username: str | None
    password: str | None
    db: int

    @property
    def scheme(self) -> str:
        return {v: k for k, v in SCHEMES.items()}[(self.tls, self.sentinel)]

    def safe(self) -> str:
        """The URL with the password masked, for logs and error messages."""
        user = (self.username or "") + (":***" if self.password else "")
        hosts = ",".join(f"{_host(h)}:{p}" for h, p in self.hosts)
        return f"{self.scheme}://{user + '@' if user else ''}{hosts}/{self.db}"


def parse(url: str) -> Target:
    """The Target of a Redis URL in one of the four forms above.

    Raises:
        ConfigError: another scheme, a host list without a sentinel scheme, or a bad port/db.
    """
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise ConfigError(f"ZKQUEUE_REDIS_URL {url!r}: the scheme must be one of {', '.join(SCHEMES)}",
                          expected=sorted(SCHEMES), found=parts.scheme)
    tls, sentinel = SCHEMES[parts.scheme]
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    username, _, password = userinfo.partition(":")
    hosts = []
    for item in hostlist.split(","):
        m = _HOST.match(item)
        if not m:
            raise ConfigError(f"ZKQUEUE_REDIS_URL: bad host {item!r}", expected="host:port", found=item)
        host, port = m.group("v6") or m.group("host") or "127.0.0.1", m.group("port")
        hosts.append((host, int(port) if port else DEFAULT_PORTS[sentinel]))
    if len(hosts) > 1 and not sentinel:
        raise ConfigError("ZKQUEUE_REDIS_URL: several hosts are sentinels: use sentinel:// or sentinels://",
                          expected="sentinel://h1:26379,h2:26379/0", found=parts.scheme)
    path = parts.path.strip("/")
    try:
        db = int(path) if path else 0
    except ValueError:
        raise ConfigError(f"ZKQUEUE_REDIS_URL: database {path!r} is not a number", expected="/0", found=path) from None
    return Target(tls=tls, sentinel=sentinel, hosts=tuple(hosts), username=unquote(username) or None,
                  password=unquote(password) or None, db=db)


def _host(host: str) -> str:
    """A host as a URL writes it: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host else host


def _proc(proc: ProcessSettings | None) -> ProcessSettings:
    from zkqueue import config
    return proc if proc is not None else config.process()


def tls_kwargs(proc: ProcessSettings) -> dict:
    """redis-py's (and kombu's) TLS arguments from the process's CA and client certificate."""
    kw = {"ssl_cert_reqs": ssl.CERT_REQUIRED, "ssl_ca_certs": proc.redis_ca_file or None}
    if proc.redis_cert_file:
        kw.update(ssl_certfile=proc.redis_cert_file, ssl_keyfile=proc.redis_key_file or None)
    return kw


def client(settings: Settings, proc: ProcessSettings | None = None, *,
           socket_timeout_s: float = SOCKET_TIMEOUT_S) -> redis.Redis:
    """A redis-py client for the settings' Redis (its primary, with Sentinel).

    Raises:
        ConfigError: a malformed ZKQUEUE_REDIS_URL.
    """
    target, proc = parse(settings.redis_url), _proc(proc)
    # No redis-py health checks: with them a refused password takes a minute of retries to
    # surface; a dead peer is noticed by the socket timeout and TCP keepalive instead.
    kw = dict(username=target.username, password=target.password, db=target.db,
              socket_timeout=socket_timeout_s, socket_connect_timeout=CONNECT_TIMEOUT_S,
              socket_keepalive=True)
    if target.tls:
        kw.update(ssl=True, **tls_kwargs(proc))
    if not target.sentinel:
        host, port = target.hosts[0]
        return redis.Redis(host=host, port=port, **kw)
    from redis.sentinel import Sentinel
    sentinel_kw = {"socket_timeout": CONNECT_TIMEOUT_S, "socket_connect_timeout": CONNECT_TIMEOUT_S}
    if target.tls:
        sentinel_kw.update(ssl=True, **tls_kwargs(proc))
    db = kw.pop("db")
    return Sentinel(list(target.hosts), sentinel_kwargs=sentinel_kw, **kw).master_for(
        settings.redis_sentinel_master, db=db)


def celery_broker(settings: Settings, proc: ProcessSettings | None = None) -> dict:
    """The Celery settings that reach the broker: broker_url, broker_use_ssl and the
    connection's transport options (merged into celery_config's by coordinator/broker.py).

    Raises:
        ConfigError: a malformed ZKQUEUE_REDIS_URL.
    """
    target, proc = parse(settings.redis_url), _proc(proc)
    options = {"socket_timeout": SOCKET_TIMEOUT_S, "socket_connect_timeout": CONNECT_TIMEOUT_S,
               "socket_keepalive": True, "health_check_interval": HEALTH_CHECK_S, "retry_on_timeout": True}
    conf: dict = {"broker_transport_options": options}
    if target.tls:
        conf["broker_use_ssl"] = tls_kwargs(proc)
    if not target.sentinel:
        conf["broker_url"] = settings.redis_url
        return conf
    # kombu's Sentinel transport: one sentinel:// URL per sentinel, joined by ';'; the
    # primary's name and the sentinels' own connection options as transport options.
    from urllib.parse import quote
    user = quote(target.username or "", safe="") + (":" + quote(target.password, safe="") if target.password else "")
    conf["broker_url"] = ";".join(f"sentinel://{user + '@' if user else ''}{_host(h)}:{p}/{target.db}"
                                  for h, p in target.hosts)
    sentinel_kw = {"socket_timeout": CONNECT_TIMEOUT_S, "socket_connect_timeout": CONNECT_TIMEOUT_S}
    if target.tls:
        sentinel_kw.update(ssl=True, **tls_kwargs(proc))
    options.update(master_name=settings.redis_sentinel_master, sentinel_kwargs=sentinel_kw)
    return conf


class Reconnects:
    """Calls `again()` whenever a connection of `client` that was connected before connects
    again: Redis restarted or failed over, or the connection broke. What Redis acknowledged
    shortly before may be gone with it (a SIGKILLed Redis loses up to its last second or two of
    writes under `appendfsync everysec`; a replica promoted by Sentinel, what it had not
    received). redis-py reconnects and retries on its own, so callers see no error then.

    Watches the connections the client's pool makes from now on: build it before the client
    is used."""

    def __init__(self, client: redis.Redis, again: Callable[[], None]):
        self._again = again
        self._seen: weakref.WeakSet = weakref.WeakSet()     # connections connected once
        pool = client.connection_pool
        make = pool.make_connection

        def make_watched():
            conn = make()
            conn.register_connect_callback(self._connected)     # a weak method: make_watched keeps self
            return conn
        pool.make_connection = make_watched

    def _connected(self, conn) -> None:
        if conn in self._seen:
            self._again()
        else:
            self._seen.add(conn)
