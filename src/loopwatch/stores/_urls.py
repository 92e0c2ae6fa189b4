"""Store URL parsing: the pure part of ``store_from_url`` (a leaf of the stores layer).

Backends import their own parser from here (the Redis store reads ``parse_redis_url``), and
:mod:`loopwatch.stores.url` dispatches on the scheme: no backend imports the dispatcher, so
the dispatcher can import every backend.

A hook process parses one ``sqlite://`` URL (a prefix and a path), so what only a Redis
URL needs is loaded on its first use: ``urllib.parse`` (which imports ``ipaddress``) and
the patterns (see :mod:`loopwatch.core.lazyre`).
"""

from __future__ import annotations

import os
from typing import Final, NamedTuple

from loopwatch.core.lazyre import lazy_compile

#: The schemes :func:`store_from_url` understands.
SCHEMES: Final = ("memory", "redis", "rediss", "redis+unix", "sqlite")

_DB: Final = lazy_compile(r"^[0-9]+$")


class RedisTarget(NamedTuple):
    """A validated Redis URL, in the form redis-py's ``from_url`` reads (a named tuple:
    a dataclass costs about a millisecond to build at import)."""

    url: str
    unix: bool


_AUTHORITY: Final = lazy_compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)([^/?#]*)")
_SECRET_QUERY: Final = lazy_compile(r"(?i)([?&](?:password|pass|pwd)=)[^&#]*")
REDACTED: Final = "***"


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***``, for error messages and logs.

    The password of ``user:password@``, a lone ``secret@`` (redis-py reads it as the
    password too) and a ``password=`` query parameter are hidden; the rest stays, so the
    message still says which URL was wrong.
    """
    match = _AUTHORITY.match(url)
    if match is not None and "@" in match.group(2):
        userinfo, _, host = match.group(2).rpartition("@")
        user, colon, _password = userinfo.partition(":")
        hidden = f"{user}:{REDACTED}" if colon else REDACTED
        url = f"{match.group(1)}{hidden}@{host}{url[match.end() :]}"
    return _SECRET_QUERY.sub(lambda m: m.group(1) + REDACTED, url)


def _check_db(value: str, url: str) -> None:
    if not _DB.match(value):
        raise ValueError(
            f"invalid Redis URL {redact_url(url)!r}: the database must be an integer >= 0"
        )


def parse_redis_url(url: str) -> RedisTarget:
    """Validate a ``redis://``, ``rediss://`` or ``redis+unix://`` URL.

    Returns:
        The URL to hand to redis-py (``redis+unix://`` becomes its ``unix://``).

    Raises:
        TypeError: ``url`` is not a string.
        ValueError: what is wrong with it, in words.
    """
    if not isinstance(url, str):
        raise TypeError(f"a store URL must be a string, not {type(url).__name__}")
    from urllib.parse import parse_qs, urlsplit

    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ValueError(f"invalid Redis URL {redact_url(url)!r}: {exc}") from None
    scheme = parts.scheme.lower()
    query = parse_qs(parts.query, keep_blank_values=True)
    for db in query.get("db", []):
        _check_db(db, url)
    if parts.fragment:
        raise ValueError(
            f"invalid Redis URL {redact_url(url)!r}: unexpected fragment '#{parts.fragment}'"
        )
    if scheme == "redis+unix":
        if parts.hostname:
            raise ValueError(
                f"invalid Redis URL {redact_url(url)!r}: a unix socket URL has no host "
                "(write redis+unix:///path/to/redis.sock)"
            )
        if not parts.path or parts.path == "/":
            raise ValueError(f"invalid Redis URL {redact_url(url)!r}: the socket path is missing")
        return RedisTarget(url="unix" + url[len(parts.scheme) :], unix=True)
    if scheme not in ("redis", "rediss"):
        raise ValueError(
            f"unsupported store URL {redact_url(url)!r}: expected one of "
            + ", ".join(f"{s}://" for s in SCHEMES)
        )
    if not parts.hostname:
        raise ValueError(f"invalid Redis URL {redact_url(url)!r}: the host is missing")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(
            f"invalid Redis URL {redact_url(url)!r}: the port must be an integer in 1-65535"
        ) from None
    if port == 0:
        raise ValueError(
            f"invalid Redis URL {redact_url(url)!r}: the port must be an integer in 1-65535"
        )
    path = parts.path.strip("/")
    if path:
        _check_db(path, url)
    return RedisTarget(url=url, unix=False)


def parse_sqlite_url(url: str) -> str:
    """The file path of a ``sqlite:///path/to/file.db`` URL (``~`` is expanded).

    Everything after ``sqlite://`` is the path, so ``sqlite:///tmp/x.db`` is the absolute
    ``/tmp/x.db``; a query or fragment is refused rather than taken as part of the name.

    Raises:
        ValueError: no path, or a query or fragment.
    """
    path = url[len("sqlite://") :]
    if not path:
        raise ValueError(f"invalid SQLite URL {url!r}: the file path is missing")
    if "?" in path or "#" in path:
        raise ValueError(
            f"invalid SQLite URL {url!r}: no query or fragment (pass idle_ttl_s= and the "
            "other options as keyword arguments)"
        )
    return os.path.expanduser(path)


__all__ = [
    "REDACTED",
    "SCHEMES",
    "RedisTarget",
    "parse_redis_url",
    "parse_sqlite_url",
    "redact_url",
]
