"""Django's Redis cache shares one connection pool per process (console/cache.py)."""

from __future__ import annotations

from django.core.cache.backends.redis import RedisCache

URL = "redis://127.0.0.1:1/0"  # never connected to: pools connect on first command


def _pool(options: dict[str, object]) -> object:
    """The write pool of a new cache object, as Django makes one per request context."""
    cache = RedisCache(URL, {"OPTIONS": options})
    return cache._cache._get_connection_pool(True)


def test_every_cache_object_of_the_process_shares_one_pool() -> None:
    shared = {"socket_timeout": 2, "pool_class": "console.cache.SharedConnectionPool"}
    assert _pool(shared) is _pool(dict(shared))
    assert _pool({**shared, "socket_timeout": 3}) is not _pool(shared)


def test_django_alone_makes_a_pool_per_cache_object() -> None:
    assert _pool({"socket_timeout": 2}) is not _pool({"socket_timeout": 2})
