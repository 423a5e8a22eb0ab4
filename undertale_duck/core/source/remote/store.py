"""One object store: its fsspec client per process, retries, version checks, downloads."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import errno
import logging
import os
import queue
import random
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from typing import Any, Protocol, TypeVar

from ....common.text import first_line, redact_url
from ....errors import (
    ArgumentError,
    ShardChangedError,
    SourceError,
    StorageError,
    UndertaleDuckError,
)
from ...runtime import cancelled_at_exit, exiting, sleep_unless_exiting
from ..local import MAGIC
from ..shard import Shard
from .fsclient import check_options, duckdb_filesystem, endpoint_of, make_filesystem
from .ranges import chunk_ranges, coalesce, footer_length, parse_footer, write_sparse
from .shard_cache import NoRoomError, ShardCache, key_of, local_shard
from .traffic import StorageStats, Traffic

__all__ = [
    "BACKOFF_MAX_S", "BACKOFF_S", "CHECK_THREADS", "IDENTITY_KEYS", "LISTED_KEY", "RETRIES",
    "Listed", "ListedObject", "RemoteShard", "Store", "identity", "is_remote", "open_store",
    "protocol_of", "unsigned", "version_name",
]

T = TypeVar("T")

#: Logs under ``undertale_duck`` (silent unless the application configures logging).
_log = logging.getLogger(__name__)

#: Objects checked at once by :meth:`Store.check_all`.
CHECK_THREADS = 32
#: Default retries after a transient failure (so ``1 + RETRIES`` attempts), and the backoff.
RETRIES = 3
BACKOFF_S = 0.5
BACKOFF_MAX_S = 8.0
#: Keys of an fsspec ``info()`` that identify one version of an object, most precise first.
IDENTITY_KEYS = (
    "VersionId",
    "version_id",
    "generation",
    "ETag",
    "etag",
    "blob_id",
    "md5Hash",
    "Content-MD5",
    "content_md5",
    "Digest",
    "undertale_duck_listed",
    "LastModified",
    "last_modified",
    "Last-Modified",
    "mtime",
    "created",
)
#: The key :func:`.listing.list_remote` adds to the listing of an object its store gives no
#: version naming its content for (none, or only a time in whole seconds: a
#: ``Last-Modified``, which a replacement within that second or with its time set back
#: keeps): a token of that listing, then the time if any (``"<token> last_modified=..."``),
#: so the object's cached copy, footer and records are that listing's own (a same-size
#: replacement is never served from an older copy), while the time is still compared
#: within the open.
LISTED_KEY = "undertale_duck_listed"

#: Identifiers that name an object's content (not merely a time): an object keyed by one
#: may be cached under its URL without the URL's signature (see :meth:`Store.cache_name`).
CONTENT_IDENTITIES = frozenset(
    ("versionid", "version_id", "generation", "etag", "blob_id", "md5hash", "content_md5",
     "digest")
)
#: Query parameters that sign a URL (S3, GCS, Azure SAS, CloudFront, Alibaba OSS) or carry
#: a token, not what it names; matched ignoring case, ``x-amz-``-style prefixes by prefix.
SIGNING_PARAMETERS = frozenset(
    ("signature", "expires", "awsaccesskeyid", "googleaccessid", "policy", "key-pair-id",
     "ossaccesskeyid", "security-token", "sig", "se", "st", "sp", "sv", "sr", "spr", "sip",
     "ss", "srt", "skoid", "sktid", "skt", "ske", "sks", "skv", "token", "access_token")
)
SIGNING_PREFIXES = ("x-amz-", "x-goog-", "x-oss-")

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)(?:::[A-Za-z][A-Za-z0-9+.\-]*)*://")
#: fsspec's chained URLs (``simplecache::s3://b/k``, ``zip://inner::s3://b/a.zip``); a key
#: that merely holds ``::`` (``s3://b/a::b.parquet``) is not one.
_CHAINED = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*::|::[A-Za-z][A-Za-z0-9+.\-]*://")


def protocol_of(item: object) -> str | None:
    """Return the protocol of an fsspec URL (``"s3"`` for ``s3://b/k``), or None for a path.

    ``file://`` URLs count as local paths; a chained URL gives its first protocol
    (``"simplecache"``), so it is refused as one rather than looked for on disk.
    """
    if not isinstance(item, str):
        return None
    match = _URL.match(item)
    if match is None or match.group(1).lower() == "file":
        return None
    return match.group(1).lower()


def unsigned(url: str) -> str:
    """A URL without its user information and signing query parameters (kept in order).

    ``https://b.s3.amazonaws.com/k?X-Amz-Signature=...&X-Amz-Credential=...`` and the same
    object signed again an hour later are one URL here; a parameter that may select the
    content (``?part=2``) is kept.
    """
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    kept = [
        (name, value)
        for name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
        if name.lower() not in SIGNING_PARAMETERS
        and not name.lower().startswith(SIGNING_PREFIXES)
    ]
    query = urllib.parse.urlencode(kept)
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def is_remote(source: object) -> bool:
    """Whether a dataset source is a URL or a list of URLs (not local paths)."""
    if isinstance(source, str):
        return protocol_of(source) is not None
    if isinstance(source, Sequence) and not isinstance(source, bytes):
        return any(protocol_of(s) is not None for s in source)
    return False


def version_name(url: str, version: str | None) -> str:
    """The URL naming one version of an object, the same when it is signed again.

    Without user information and signing parameters (:func:`unsigned`) where the version
    names the content (an ETag, version id, generation, digest: :data:`CONTENT_IDENTITIES`);
    an object known only by a time, or not at all, keeps its whole URL.

    Args:
        url: The object's URL.
        version: Its version (:func:`identity`), or None.

    Returns:
        The name.
    """
    kind = None if version is None else version.split("=", 1)[0]
    return unsigned(url) if kind in CONTENT_IDENTITIES else url


def identity(info: Mapping[str, Any], like: str | None = None) -> str | None:
    """The version of an object an fsspec ``info()`` describes (ETag, version, generation ...).

    Args:
        info: A listing or ``info()`` entry.
        like: A version this returned earlier: give the identifier of the same kind, so a
            listing's ETag is compared with an ``info()``'s ETag, not with the version id
            ``info()`` adds in a versioned bucket.

    Returns:
        ``"key=value"`` for the most precise identifier the store gives (of ``like``'s kind
        when given), or None when it gives none (only the size is then compared). An object
        without one that :func:`.listing.list_remote` listed has its listing's token
        (:data:`LISTED_KEY`), which no later ``info()`` gives.
    """
    kind = None if like is None else like.split("=", 1)[0]
    for key in IDENTITY_KEYS:
        if kind is not None and key.lower().replace("-", "_") != kind:
            continue
        value = info.get(key)
        if value is None or value == "" or value == "null":
            continue
        if isinstance(value, datetime.datetime):  # listings and info() differ in type
            value = value.timestamp()
        text = repr(value) if isinstance(value, float) else str(value).strip()
        if text.startswith("W/"):
            text = text[2:]
        return f"{key.lower().replace('-', '_')}={text.strip(chr(34))}"
    return None


#: Errors of the local disk a download writes to (full, over a quota or a file size limit,
#: read-only): never the store's, and no retry helps.
_LOCAL_DISK_ERRNOS = frozenset(
    getattr(errno, name) for name in ("ENOSPC", "EDQUOT", "EFBIG", "EROFS") if hasattr(errno, name)
)

#: What a client raises for options it does not accept (unknown names, wrong types).
_REFUSALS = (ValueError, TypeError, NotImplementedError, KeyError, AttributeError)


def _refused(exc: BaseException) -> bool:
    """Whether the client refused its options, so that no retry helps.

    Besides the usual errors of a refusal, botocore refuses a malformed ``endpoint_url``
    (another scheme, a query) only at the first request, with an ``EndpointResolutionError``,
    and wraps the HTTP client's refusals (credentials in the endpoint's URL, a ``ValueError``
    of aiohttp) in an ``HTTPClientError``; neither is a ``ValueError``.
    """
    if isinstance(exc, UndertaleDuckError):
        return False
    if isinstance(exc, _REFUSALS):
        return True
    names = {cls.__name__ for cls in type(exc).__mro__}
    if "EndpointResolutionError" in names:
        return True
    if "HTTPClientError" in names:
        wrapped = getattr(exc, "kwargs", {}).get("error")
        return isinstance(wrapped, ValueError | TypeError) and not isinstance(wrapped, UnicodeError)
    return False


def _transient(exc: BaseException) -> bool:
    """Whether a failure may pass if tried again (network, timeouts, 5xx, throttling)."""
    if isinstance(exc, FileNotFoundError | PermissionError | IsADirectoryError):
        return False
    if isinstance(exc, NotADirectoryError | ArgumentError | SourceError):
        return False
    if isinstance(exc, OSError) and exc.errno in _LOCAL_DISK_ERRNOS:  # the cache's disk
        return False
    if isinstance(exc, _REFUSALS) or _refused(exc):  # the client refused its options
        return False
    return isinstance(exc, Exception)


#: Where each client's timeouts are set, for a timeout's error.
_TIMEOUT_OPTIONS = {
    "http": "client_kwargs={'timeout': aiohttp.ClientTimeout(...)}",
    "https": "client_kwargs={'timeout': aiohttp.ClientTimeout(...)}",
    "s3": "config_kwargs={'connect_timeout': ..., 'read_timeout': ...}",
    "s3a": "config_kwargs={'connect_timeout': ..., 'read_timeout': ...}",
}


def _failure_text(exc: BaseException, url: str) -> str:
    """A failure for an error message; a timeout says what timed out (its text is empty)."""
    text = first_line(exc)
    if isinstance(exc, TimeoutError) or "timeout" in type(exc).__name__.lower():
        scheme = url.partition("://")[0].lower()
        where = _TIMEOUT_OPTIONS.get(scheme, "the client's timeout options")
        return (f"no answer within the client's timeout ({text}); storage_options set it: "
                f"{where}")
    return text


#: HTTP statuses that say an object does not exist.
_NOT_FOUND = frozenset((404, 410))


def _hidden_failure(exc: FileNotFoundError) -> BaseException | None:
    """The failure a client reported as "not found" although it says nothing of the object.

    fsspec's HTTP client raises ``FileNotFoundError`` from ``info()`` whatever failed (a
    5xx answer, a refused connection, a timeout), with that failure as its cause; only an
    answer of 404 or 410 (or a cause that is itself "not found", or none) means the object
    is gone. Other clients (s3fs) give their own error as the cause of a real "not found".

    Returns:
        The cause to retry and report, or None (the object does not exist).
    """
    cause = exc.__cause__
    if cause is None or isinstance(cause, FileNotFoundError):
        return None
    status = getattr(cause, "status", None)
    if isinstance(status, int):  # an HTTP answer (aiohttp's ClientResponseError)
        return None if status in _NOT_FOUND else cause
    if isinstance(cause, TimeoutError | ConnectionError) or type(cause).__module__.startswith(
        "aiohttp"
    ):
        return cause
    return None


def _denied(what: str, url: str, exc: BaseException) -> StorageError:
    """The error of a request the store refused for the credentials."""
    return StorageError(
        f"cannot {what} {url}: access denied ({first_line(exc)}); check the "
        "credentials in storage_options or the store's usual configuration "
        "(environment variables, config files)",
        url,
    )


class Listed(Protocol):
    """An object as the listing gave it: what reads of it are pinned to."""

    @property
    def path(self) -> str:
        """Its URL."""

    @property
    def size(self) -> int:
        """Its size in bytes."""

    @property
    def version(self) -> str | None:
        """Its version (see :func:`identity`)."""


@dataclass(frozen=True)
class ListedObject:
    """An object as listed, before its footer is read (a :class:`Listed`)."""

    path: str
    size: int
    version: str | None


@dataclass(frozen=True)
class RemoteShard(Shard):
    """A shard in object storage: its footer, the object's version, and where it is cached.

    ``path`` is the object's URL (what errors name); DuckDB reads the local copy that
    :meth:`local` fetches into the shard cache.

    Attributes:
        version: The object's version when the dataset was listed (see :func:`identity`).
        store: The store the object lives in (its filesystem, retries and shard cache).
    """

    version: str | None = None
    store: Store | None = field(default=None, compare=False, repr=False)

    @property
    def cache_name(self) -> str:
        """What names the object in the shard cache's keys (:meth:`Store.cache_name`)."""
        if self.store is None:
            return self.path
        return self.store.cache_name(self.path, self.version)

    @property
    def stable_path(self) -> str:
        """The URL as saved states name the object: signed again, it is the same.

        :func:`version_name`, as :meth:`Store.cache_name` names it but without the store's
        endpoint, so states saved by earlier releases still match.
        """
        return version_name(self.path, self.version)

    @property
    def identity(self) -> list[object]:
        """What a cached artefact derived from this object is keyed by (JSON values).

        Named as in the shard cache (:attr:`cache_name`): the disk tier's windows, a view's
        index and the bounds' records of an object whose URL is signed again are found
        again, as its cached copy is.
        """
        return [self.cache_name, *super().identity[1:]]

    def __repr__(self) -> str:
        # the URL without its secrets (a pre-signed query, a user:password@)
        shown = ", ".join(
            f"{f.name}={redact_url(self.path) if f.name == 'path' else getattr(self, f.name)!r}"
            for f in fields(self) if f.repr
        )
        return f"{type(self).__name__}({shown})"

    def check_unchanged(self) -> None:
        """Check that the object is still the version listed when the dataset was opened.

        Raises:
            ShardChangedError: If the object was deleted, replaced, truncated or extended.
            StorageError: If the store cannot be reached after retries.
        """
        assert self.store is not None
        self.store.check(self)

    def local(
        self,
        groups: Sequence[int] | None = None,
        columns: Sequence[str] | None = None,
        *,
        behind: bool = True,
    ) -> contextlib.AbstractContextManager[Shard]:
        """A local file holding what a read needs, held while in use.

        The shard's cached copy when the node has one, or when the read needs the whole
        shard (it is then downloaded once per node); else a file holding only the footer
        and the column chunks of ``groups`` and ``columns``, fetched by range requests
        pinned to the version listed (:meth:`Store.window`).

        Args:
            groups: The row groups the read needs (None: all of them).
            columns: The top-level columns it needs (None: all of them).
            behind: Whether a read by ranges may then download the shard whole in the
                background (:meth:`Store.window`).

        Returns:
            A context manager yielding a local :class:`Shard`.
        """
        assert self.store is not None
        if groups is None:
            return self.store.cache.pin(self, self.store.download)
        return self.store.window(self, groups, columns, behind=behind)


class Store:
    """One fsspec filesystem with retries, the listing rules, footers and downloads.

    Picklable: the filesystem is created again in each process (fsspec clients do not
    survive ``fork``).

    Args:
        protocol: The URL protocol (``"s3"``, ``"gs"``, ``"https"``, ``"memory"`` ...).
        storage_options: Keyword arguments of the fsspec filesystem (credentials, endpoint).
        cache: The local shard cache downloads go to.
        retries: Retries after a transient failure, with exponential backoff.
    """

    def __init__(
        self,
        protocol: str,
        storage_options: Mapping[str, Any] | None = None,
        cache: ShardCache | None = None,
        retries: int = RETRIES,
    ) -> None:
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ArgumentError(f"retries must be a whole number >= 0, got {retries!r}")
        if storage_options is not None and not isinstance(storage_options, Mapping):
            raise ArgumentError(
                f"storage_options must be a mapping of fsspec options, got {storage_options!r}"
            )
        check_options(protocol, storage_options or {})  # at once, before any use
        self.protocol = protocol
        self.storage_options = dict(storage_options or {})
        #: The server the URLs name objects on ("" for the client's default): two
        #: S3-compatible servers' ``s3://bucket/key`` are two objects in the shard cache.
        self.endpoint = endpoint_of(protocol, self.storage_options)
        self.cache = cache or ShardCache()
        self.retries = retries
        #: Whether windows of shards not cached are read by range requests (else the
        #: shard is downloaded whole first, as before range reads existed).
        self.range_reads = True
        #: Whether a shard a window was range-read from downloads whole in the background
        #: (when the cache has room for it without evicting anything).
        self.background = True
        self._fs: Any = None
        self._pid = -1
        self._lock = threading.Lock()
        self._fresh()

    def _fresh(self) -> None:
        """This process's own state: counters and background downloads."""
        self._traffic = Traffic()
        self._pool: _Behind | None = None
        self._behind: dict[str, Future[None]] = {}
        self._owner = os.getpid()

    def _own(self) -> None:
        """Start this process's own state in a forked child (not the parent's threads)."""
        if self._owner != os.getpid():
            self._lock = threading.Lock()
            self._fresh()

    @property
    def traffic(self) -> Traffic:
        """This process's byte and request counters."""
        self._own()
        return self._traffic

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.update(_fs=None, _pid=-1, _lock=None)
        for name in ("_traffic", "_pool", "_behind", "_owner"):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._fresh()

    def stats(self) -> StorageStats:
        """What this process fetched from the store so far (:class:`StorageStats`)."""
        return self.traffic.snapshot()

    @property
    def fs(self) -> Any:
        """This process's fsspec filesystem for the protocol."""
        pid = os.getpid()
        if self._fs is None or self._pid != pid:
            with self._lock:
                if self._fs is None or self._pid != pid:
                    self._fs = make_filesystem(self.protocol, self.storage_options)
                    self._pid = pid
        return self._fs

    def filesystem(self) -> Any:
        """This process's filesystem as DuckDB's ``register_filesystem`` takes it."""
        return duckdb_filesystem(self.fs)

    def cache_name(self, url: str, version: str | None) -> str:
        """What names an object in the shard cache's keys (with its version and size).

        The object's :func:`version_name` and this store's endpoint: a pre-signed URL signed
        again is the same cached copy, while a replaced object's new ETag is a new entry.
        """
        name = version_name(url, version)
        return f"{name}\0{self.endpoint}" if self.endpoint else name

    def key(self, url: str, version: str | None, size: int) -> str:
        """The shard cache's key of one version of an object (:func:`.shard_cache.key_of`)."""
        return key_of(self.cache_name(url, version), version, size)

    # ------------------------------------------------------------------ retries
    def call(self, what: str, url: str, fn: Callable[[], T]) -> T:
        """Run one store operation, retrying transient failures with exponential backoff.

        Args:
            what: What is done, for the message (``"list"``, ``"download"`` ...).
            url: The object or prefix concerned.
            fn: The operation.

        Returns:
            What ``fn`` returns.

        Raises:
            FileNotFoundError: If the object does not exist (the caller names the problem).
            StorageError: If access is denied, or the failure persists after the retries.
        """
        start = time.monotonic()
        delay = BACKOFF_S
        for attempt in range(self.retries + 1):
            if exiting() and threading.current_thread() is not threading.main_thread():
                raise _stopped(what, url)
            try:
                return fn()
            except FileNotFoundError as exc:
                failure: BaseException | None = _hidden_failure(exc)
                if failure is None:
                    raise
                if getattr(failure, "status", None) in (401, 403):
                    raise _denied(what, url, failure) from None
            except PermissionError as exc:
                raise _denied(what, url, exc) from None
            except Exception as exc:
                if _refused(exc):
                    raise ArgumentError(
                        f"cannot {what} {url}: the store's client refused "
                        f"({type(exc).__name__}: {first_line(exc)}); check the names and "
                        "types of storage_options (unknown or malformed options are "
                        "refused, not retried)"
                    ) from None
                if not _transient(exc):
                    raise
                failure = exc
            if attempt == self.retries:
                tries = "once" if attempt == 0 else f"{attempt + 1} times"
                raise StorageError(
                    f"cannot {what} {url}: {_failure_text(failure, url)} (tried {tries} over "
                    f"{time.monotonic() - start:.1f} s; the store may be down, "
                    "unreachable or throttling: check it and the storage_options, then "
                    "try again)",
                    url,
                ) from None
            if sleep_unless_exiting(delay * random.uniform(0.5, 1.0)):
                raise _stopped(what, url) from None
            delay = min(BACKOFF_MAX_S, delay * 2)
        raise AssertionError("unreachable")

    def info(self, url: str) -> dict[str, Any]:
        """The store's current ``info()`` of an object, bypassing fsspec's listing cache.

        Raises:
            FileNotFoundError: If it does not exist.
            StorageError: If the store cannot be reached after retries.
        """

        def head() -> dict[str, Any]:
            fs = self.fs
            fs.invalidate_cache(url)
            return dict(_request(fs, url, "info", url))

        return self.call("read the metadata of", url, head)

    def read_range(self, url: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of an object, by one range request (retried)."""
        data = self.call(
            "read", url,
            lambda: bytes(_request(self.fs, url, "cat_file", url, start=start, end=end)),
        )
        self.traffic.add(range_bytes=len(data), range_requests=1)
        if len(data) != end - start:
            raise ShardChangedError(
                f"shard {url} is shorter than when it was listed (asked for bytes "
                f"{start}..{end}, got {len(data)}); reopen the dataset as it is now",
                url,
            )
        return data

    # ------------------------------------------------------------------ listing helpers
    def url(self, path: str) -> str:
        """The full URL of a path an fsspec listing returned."""
        return str(self.fs.unstrip_protocol(path))

    def fs_protocols(self) -> tuple[str, ...]:
        """The protocols this store's filesystem answers to (``("s3", "s3a")`` ...)."""
        proto = self.fs.protocol
        return tuple(proto) if isinstance(proto, tuple | list) else (str(proto),)

    # ------------------------------------------------------------------ changes, downloads
    def changed(self, shard: Listed, info: Mapping[str, Any]) -> str | None:
        """How the object ``info`` describes differs from the shard as listed, or None."""
        size = int(info.get("size") or 0)
        version = shard.version
        if version is not None and version.startswith(LISTED_KEY + "="):
            # a listing's token, which no info() gives; then the time listed, if any
            version = version.partition(" ")[2] or None
        now = identity(info, version)
        if size != shard.size:
            return f"size {shard.size} -> {size} bytes"
        if version is not None and now is not None and now != version:
            return f"version {version} -> {now}"
        return None

    def check(self, shard: Listed) -> None:
        """Raise :class:`ShardChangedError` if the object is not the version listed."""
        try:
            info = self.info(shard.path)
        except FileNotFoundError:
            raise ShardChangedError(
                f"shard {shard.path} was deleted from the store after the dataset was opened; "
                "call refresh() to reopen the dataset as it is now",
                shard.path,
            ) from None
        diff = self.changed(shard, info)
        if diff is not None:
            raise ShardChangedError(
                f"shard {shard.path} was replaced in the store after the dataset was opened "
                f"({diff}); call refresh() to reopen the dataset as it is now",
                shard.path,
            )

    def check_all(self, shards: Sequence[RemoteShard]) -> None:
        """:meth:`check` every shard, many at once."""
        if len(shards) <= 1:
            for shard in shards:
                self.check(shard)
            return
        with ThreadPoolExecutor(min(CHECK_THREADS, len(shards))) as pool:
            list(pool.map(self.check, shards))

    def download(self, shard: Shard, target: str) -> None:
        """Download a shard whole for a window that needs it (see :meth:`fetch`)."""
        self.fetch(shard, target)
        self.traffic.add(download_bytes=shard.size, downloads=1)

    def download_behind(self, shard: Shard, target: str) -> None:
        """Download a shard whole in the background (counted apart, see :meth:`fetch`)."""
        self.fetch(shard, target)
        self.traffic.add(background_bytes=shard.size, background_downloads=1)

    def fetch(self, shard: Shard, target: str) -> None:
        """Download a shard's object to ``target`` and check it is the version listed.

        The object's version is asked of the store after the transfer: an object replaced
        while it was read (a mix of two versions) is refused.

        Raises:
            ShardChangedError: If the object was deleted or replaced since it was listed.
            StorageError: If the store fails after retries.
        """
        assert isinstance(shard, RemoteShard)
        url = shard.path

        def get() -> None:
            _request(self.fs, url, "get_file", url, target)
            got = os.path.getsize(target)
            if got != shard.size:
                self.check(shard)  # replaced: ShardChangedError; else a cut transfer
                raise OSError(f"transfer ended after {got} of {shard.size} bytes")

        try:
            self.call("download", url, get)
        except FileNotFoundError:
            raise ShardChangedError(
                f"shard {url} was deleted from the store after the dataset was opened; "
                "call refresh() to reopen the dataset as it is now",
                url,
            ) from None
        self.check(shard)


    # ------------------------------------------------------------------ range reads
    def read_ranges(self, shard: Listed, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """Byte ranges of the object, each request pinned to the version listed at open.

        On S3 each request carries the listed ETag (``If-Match``), so the store refuses a
        request to a replaced object, or the listed version id (then the object is also
        checked afterwards, as a download is); on other stores the object's version is
        asked after the ranges are read. Either way no window mixes versions.

        Raises:
            ShardChangedError: If the object was deleted or replaced since it was listed.
            StorageError: If the store fails after retries.
        """
        url = shard.path
        if not ranges:
            return []
        pin = _s3_pin(self.fs, shard.version)

        def get() -> list[bytes]:
            if pin is not None:
                try:
                    return _s3_ranges(self.fs, url, ranges, pin)
                except OSError as exc:
                    if exc.errno == errno.EINVAL and "condition" in str(exc):
                        raise ShardChangedError(
                            f"shard {url} was replaced in the store after the dataset was "
                            "opened (its ETag no longer matches); call refresh() to reopen "
                            "the dataset as it is now",
                            url,
                        ) from None
                    raise
            got = _request(
                self.fs, url, "cat_ranges", [url] * len(ranges), [a for a, _ in ranges],
                [b for _, b in ranges], on_error="raise",
            )
            return [bytes(g) for g in got]

        def whole() -> list[bytes]:
            pieces = get()
            for (begin, end), piece in zip(ranges, pieces, strict=True):
                if len(piece) not in (end - begin, shard.size):  # the whole object: below
                    self.check(shard)  # replaced or truncated: ShardChangedError
                    # the object is as listed: a cut answer, tried again
                    raise OSError(
                        f"the store answered bytes {begin}..{end} with {len(piece)} bytes"
                    )
            return pieces

        try:
            data = list(self.call("read", url, whole))
        except FileNotFoundError:
            raise ShardChangedError(
                f"shard {url} was deleted from the store after the dataset was opened; "
                "call refresh() to reopen the dataset as it is now",
                url,
            ) from None
        self.traffic.add(range_bytes=sum(map(len, data)), range_requests=len(ranges))
        for k, ((start, end), piece) in enumerate(zip(ranges, data, strict=True)):
            if len(piece) != end - start and len(piece) == shard.size:
                # the server ignored the range and sent the whole object (Python's
                # http.server does): take the range from it, and download shards whole
                # from now on rather than the whole object once per range
                if self.range_reads:
                    self.range_reads = False
                    _log.info(
                        "%s: the server ignores byte ranges; shards of this store are "
                        "downloaded whole", redact_url(url)
                    )
                data[k] = piece[start:end]
        if pin is None or "VersionId" in pin:
            # the bytes are the listed version's; a newer one is refused as downloads are
            self.check(shard)
        return data

    def _tail(self, shard: RemoteShard) -> bytes:
        """The shard's footer and trailer: kept in the cache since open, else read again."""
        key = self.key(shard.path, shard.version, shard.size)
        tail = self.cache.load_footer(key)
        if tail is None or len(tail) < 8 or tail[-4:] != MAGIC:
            (trailer,) = self.read_ranges(shard, [(shard.size - 8, shard.size)])
            need = footer_length(trailer)
            if not 8 < need <= shard.size:
                raise ShardChangedError(
                    f"shard {shard.path} no longer ends with the footer it had when the "
                    "dataset was opened; call refresh() to reopen the dataset as it is now",
                    shard.path,
                )
            (tail,) = self.read_ranges(shard, [(shard.size - need, shard.size)])
            self.cache.save_footer(key, tail)
            self.cache.trim_footers()
        return tail

    @contextlib.contextmanager
    def window(
        self,
        shard: RemoteShard,
        groups: Sequence[int],
        columns: Sequence[str] | None,
        *,
        behind: bool = True,
    ) -> Iterator[Shard]:
        """A local file with what a window of ``shard`` needs, held while the block runs.

        The shard's cached copy if the node has one, or if the window needs every byte of
        it, or if this process planned to download it in the background (waited for, or
        downloaded here, never evicting for it); else a sparse file in the shard cache
        holding the footer and the column chunks of ``groups`` and ``columns`` at their
        offsets (DuckDB reads it as the shard, restricted to those row groups), deleted
        afterwards. After a window read by ranges the whole shard downloads in the
        background when the cache has room for it without evicting anything (unless
        ``behind`` is false: a view's indexing pass reads a few columns of every shard).

        Yields:
            A local :class:`Shard`.

        Raises:
            ShardChangedError: If the object changed since it was listed.
            StorageError: If the store fails after retries.
            SourceError: If the cache directory cannot be used.
        """
        self._own()
        cache = self.cache
        key = cache.key(shard)
        tail = None
        ranges: list[tuple[int, int]] = []
        running = self._behind.get(key)
        if running is not None and not running.done() and self.range_reads:
            # planned in the background, where it may not evict: wait for that copy, or
            # download it here on the same terms (a window that took it over with eviction
            # overshot the limit the plan was made under); no room now: read by range
            with contextlib.ExitStack() as held:
                try:
                    local: Shard | None = held.enter_context(
                        cache.pin(shard, self.download, evict=False))
                except NoRoomError:
                    local = None
                if local is not None:
                    yield local
                    return
        use_copy = not self.range_reads or cache.cached(shard)
        if not use_copy:
            tail = self._tail(shard)
            meta = parse_footer(tail)
            ranges = coalesce(chunk_ranges(meta, groups, columns))
            needed = sum(end - start for start, end in ranges) + len(tail) + len(MAGIC)
            use_copy = needed >= shard.size  # the whole shard: download it once per node
        if use_copy or tail is None:
            with cache.pin(shard, self.download) as local:
                yield local
            return
        with cache.scratch(shard) as (fd, path):
            pieces = dict(zip((a for a, _ in ranges), self.read_ranges(shard, ranges),
                              strict=True))
            pieces[0] = MAGIC
            pieces[shard.size - len(tail)] = tail
            try:
                write_sparse(fd, shard.size, pieces)
            except OSError as exc:  # the cache's disk is full (or read-only)
                raise cache.write_error(shard, exc) from None
            self.traffic.add(range_windows=1)
            yield local_shard(shard, path, os.fstat(fd))
        if behind:
            self._download_later(shard)

    def _download_later(self, shard: RemoteShard) -> None:
        """Start downloading a shard whole in the background, if the cache has room."""
        if not self.background:
            return
        key = self.cache.key(shard)
        with self._lock:
            if key in self._behind or not self.cache.has_room(shard.size):
                return
            if self._pool is None:
                self._pool = _Behind()
            self._behind[key] = self._pool.submit(lambda: self._behind_task(shard))

    def _behind_task(self, shard: RemoteShard) -> None:
        if not self.cache.has_room(shard.size):  # filled since: windows stay range reads
            with self._lock:
                self._behind.pop(self.cache.key(shard), None)
            return
        try:
            with self.cache.pin(shard, self.download_behind, evict=False):
                pass
        except NoRoomError:  # filled meanwhile: windows of it stay range reads
            with self._lock:
                self._behind.pop(self.cache.key(shard), None)
        except UndertaleDuckError as exc:  # the next window of it reports the error
            _log.info("background download of %s failed: %s", redact_url(shard.path), exc)
            with self._lock:
                self._behind.pop(self.cache.key(shard), None)


class _Behind:
    """One daemon thread that downloads shards behind range reads, one at a time.

    Not a ``ThreadPoolExecutor``: Python's exit joins an executor's threads before any exit
    hook runs, so a script that ended while a shard downloaded behind a range read waited
    for that download, which nothing would use. This thread's request is cancelled by the
    exit hook instead (:func:`_request`; decision 0039), and a daemon thread is not waited for.
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Future[None], Callable[[], None]]] = (
            queue.SimpleQueue()
        )
        threading.Thread(target=self._run, name="undertale_duck-shards", daemon=True).start()

    def submit(self, work: Callable[[], None]) -> Future[None]:
        """Run ``work`` after the work submitted before it; its future."""
        future: Future[None] = Future()
        self._queue.put((future, work))
        return future

    def _run(self) -> None:
        while True:
            future, work = self._queue.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                work()
            except BaseException as exc:  # kept on the future, as an executor does
                future.set_exception(exc)
            else:
                future.set_result(None)


def _request(fs: Any, url: str, method: str, *args: Any, **kwargs: Any) -> Any:
    """``fs.<method>(*args, **kwargs)``; on a thread other than the main one, cancelled at exit.

    A read-ahead thread's request (a window's download) is awaited by the process's exit
    hook, which would otherwise wait as long as the store takes to answer or time out. An
    asynchronous fsspec filesystem's request is run on its loop and abandoned at exit
    (:func:`_on_loop`); a synchronous one runs as it is.
    """
    if not getattr(fs, "async_impl", False):
        return getattr(fs, method)(*args, **kwargs)
    return _on_loop(fs, url, lambda: getattr(fs, "_" + method)(*args, **kwargs))


def _on_loop(fs: Any, url: str, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run the coroutine ``make()`` on an async filesystem's loop and wait for it.

    On the main thread as fsspec's synchronous calls do; on any other, cancelled at exit.
    """
    loop = fs.loop  # first: in a forked child fsspec refuses it, before a coroutine is made
    if threading.current_thread() is threading.main_thread():
        from fsspec.asyn import sync

        return sync(loop, make)  # type: ignore[no-any-return]
    future = asyncio.run_coroutine_threadsafe(make(), loop)
    with cancelled_at_exit(future.cancel):
        try:
            return future.result()
        except CancelledError:
            raise _stopped("read", url) from None


def _stopped(what: str, url: str) -> StorageError:
    """The error of a request on another thread stopped because the process is exiting."""
    return StorageError(f"cannot {what} {url}: stopped, the process is exiting", url)


def _s3_pin(fs: Any, version: str | None) -> dict[str, str] | None:
    """The ``get_object`` arguments pinning a request to a listed S3 version, or None."""
    if version is None or not hasattr(fs, "_call_s3"):
        return None
    name, _, value = version.partition("=")
    if name in ("versionid", "version_id"):
        return {"VersionId": value}
    if name == "etag":
        return {"IfMatch": f'"{value}"'}
    return None


def _s3_ranges(
    fs: Any, url: str, ranges: Sequence[tuple[int, int]], pin: Mapping[str, str]
) -> list[bytes]:
    """Ranges of one S3 object, requested at once, each with the pinning arguments."""
    bucket, key, _ = fs.split_path(url)

    async def one(start: int, end: int) -> bytes:
        answer = await fs._call_s3(
            "get_object", Bucket=bucket, Key=key, Range=f"bytes={start}-{end - 1}", **pin
        )
        try:
            return bytes(await answer["Body"].read())
        finally:
            answer["Body"].close()

    async def every() -> list[bytes]:
        return list(await asyncio.gather(*(one(a, b) for a, b in ranges)))

    return _on_loop(fs, url, every)


def open_store(
    source: str | Sequence[str],
    storage_options: Mapping[str, Any] | None = None,
    cache: ShardCache | None = None,
    retries: int = RETRIES,
) -> Store:
    """Create the :class:`Store` for a URL or list of URLs.

    Raises:
        SourceError: If the source mixes stores or local paths.
        ArgumentError, StorageError: As :func:`make_filesystem`.
    """
    urls = [source] if isinstance(source, str) else list(source)
    protocols = {protocol_of(u) for u in urls}
    if None in protocols:
        raise SourceError("the dataset source mixes URLs and local paths; give one kind")
    chained = [u for u in urls if _CHAINED.search(u)]
    if chained:
        raise ArgumentError(
            f"chained fsspec URLs such as {chained[0]!r} are not supported: undertale_duck "
            "caches shards itself (cache_dir=, cache_limit=); give the store's URL "
            "(s3://bucket/key)"
        )
    first = protocol_of(urls[0]) if urls else None
    if first is None:
        raise SourceError("the dataset source is an empty list of URLs")
    store = Store(first, storage_options, cache, retries)
    return store
