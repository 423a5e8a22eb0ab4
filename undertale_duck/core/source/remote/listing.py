"""Remote sources: list shards through fsspec as local directories are listed, footers by range."""

from __future__ import annotations

import contextlib
import os
import secrets
import struct
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ....errors import (
    CorruptShardError,
    EncryptedShardError,
    NotParquetError,
    ShardChangedError,
    SourceError,
)
from ...parquet import decoded_sizes
from ...parquet import footers as footer_checks
from ...runtime import GLOB_CHARS
from ..local import MAGIC, PARQUET_SUFFIXES, _is_hidden, local_paths
from ..shard import Shard, read_footer
from .fsclient import check_options
from .store import (
    CONTENT_IDENTITIES,
    LISTED_KEY,
    ListedObject,
    RemoteShard,
    Store,
    identity,
    is_remote,
    open_store,
    protocol_of,
)

#: Bytes read from the end of an object to find its footer in one request (most footers fit).
TAIL_BYTES = 64 << 10
#: Objects whose footers are read at once when a dataset opens.
FOOTER_THREADS = 32

Listed = list[tuple[str, dict[str, Any]]]


def open_shards(store: Store, source: str | Sequence[str]) -> list[RemoteShard]:
    """List a remote source's shards and read their footers (no object is downloaded).

    Raises:
        SourceError: If nothing is found, or a shard is not readable Parquet
            (``NotParquetError``, ``CorruptShardError``).
        StorageError: If the store fails or denies access.
    """
    return footers(store, list_remote(store, source))


def list_remote(store: Store, source: str | Sequence[str]) -> Listed:
    """List the shards of a URL, glob URL or list of URLs, as local sources are listed.

    A prefix (``s3://bucket/data/``) lists its objects sorted by name, leaving out hidden and
    ``_``-prefixed names, ``*.crc`` and objects that are not Parquet (by suffix, else by their
    magic bytes); a glob lists its matches; a list keeps its order.

    Returns:
        ``(url, info)`` of each shard, ``info`` as the listing gave it (with this listing's
        token as its version where the store gives none, see :func:`_versioned`).

    Raises:
        SourceError: If nothing is found.
        StorageError: If the store fails or denies access.
    """
    with contextlib.suppress(Exception):
        store.fs.invalidate_cache()  # a refresh() must see the store as it is now
    if isinstance(source, str):
        return _versioned(_resolve_one(store, source, single=True))
    items = list(source)
    if not items:
        raise SourceError("the dataset source is an empty list of URLs")
    found: Listed = []
    for item in items:
        found.extend(_resolve_one(store, item, single=False))
    return _versioned(found)


def _versioned(listed: Listed) -> Listed:
    """Give each object its store gives no content version for this listing's token as one.

    Such an object (an HTTP server sending neither ETag nor Last-Modified, or only
    Last-Modified) was known by its URL, size and at best a time of one second's
    resolution: replaced by one of the same size within that second or with its time set
    back, the copy cached by an earlier process was served in silence. Under a token of
    this listing (then the time, still compared while the dataset is open), its cached copy,
    footer and records are this listing's own (the processes and DataLoader workers of one
    open dataset share them; another open, or ``refresh()``, downloads it again).
    """
    token = secrets.token_hex(8)
    out: Listed = []
    for url, info in listed:
        version = identity(info)
        if version is None or _whole_seconds(version):
            info = {**info, LISTED_KEY: token if version is None else f"{token} {version}"}
        out.append((url, info))
    return out


def _whole_seconds(version: str) -> bool:
    """Whether a version is only a time in whole seconds (an HTTP ``Last-Modified``).

    A time of finer resolution (fsspec's ``memory://`` objects) tells a replacement apart.
    """
    kind, _, value = version.partition("=")
    if kind in CONTENT_IDENTITIES:
        return False
    try:
        return float(value).is_integer()
    except ValueError:
        return True  # a date as text (``Mon, 01 Jan 2024 00:00:00 GMT``): whole seconds


def _resolve_one(store: Store, url: str, *, single: bool) -> Listed:
    protocol = protocol_of(url)
    if protocol is None:
        raise SourceError(
            f"the dataset source list mixes URLs and local paths ({url!r}); give one kind",
            str(url),
        )
    if protocol not in store.fs_protocols():
        raise SourceError(
            f"the dataset source list mixes stores ({url!r} is not {store.protocol}://); "
            "give URLs of one store only",
            url,
        )
    fs = store.fs
    if single and GLOB_CHARS & set(url.split("://", 1)[1]):
        matches = store.call("list", url, lambda: fs.glob(url, detail=True))
        files = [
            (store.url(p), dict(i))
            for p, i in sorted(matches.items())
            if i.get("type") != "directory" and not _is_hidden(_basename(p))
        ]
        if files:
            return files
    try:
        # `?`, `[` and `*` are legal in keys: a pattern matching nothing may name an object
        # or prefix literally, as a local path with those characters does
        info = store.call("read the metadata of", url, lambda: dict(fs.info(url)))
    except FileNotFoundError:
        if single and GLOB_CHARS & set(url.split("://", 1)[1]):
            raise SourceError(f"no Parquet objects match the pattern {url!r}", url) from None
        raise SourceError(
            f"dataset source {url} does not exist (or the credentials cannot see it)", url
        ) from None
    if info.get("type") != "directory":
        return [(store.url(str(info.get("name", url))), info)]
    return _directory(store, url)


def _directory(store: Store, url: str) -> Listed:
    fs = store.fs
    entries = store.call("list", url, lambda: fs.ls(url, detail=True))
    files: Listed = []
    nested = False
    for entry in sorted(entries, key=lambda e: str(e["name"])):
        name = _basename(str(entry["name"]))
        if _is_hidden(name):
            continue
        if entry.get("type") == "directory":
            nested = True
            continue
        full = store.url(str(entry["name"]))
        if name.lower().endswith(PARQUET_SUFFIXES) or _has_magic(store, full, entry):
            files.append((full, dict(entry)))
    if not files:
        hint = (
            f" (it holds sub-prefixes: pass a glob such as '{url.rstrip('/')}/**/*.parquet')"
            if nested
            else ""
        )
        raise SourceError(f"prefix {url} holds no Parquet objects{hint}", url)
    return files


def _has_magic(store: Store, url: str, info: Mapping[str, Any]) -> bool:
    size = int(info.get("size") or 0)
    if size < 12:
        return False
    try:
        return (
            store.read_range(url, 0, 4) == MAGIC
            and store.read_range(url, size - 4, size) == MAGIC
        )
    except (FileNotFoundError, ShardChangedError):
        return False


def _basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def footers(store: Store, listed: Sequence[tuple[str, dict[str, Any]]]) -> list[RemoteShard]:
    """Read the footers of listed objects by range reads, many at once.

    Raises:
        NotParquetError, CorruptShardError: For an object that is not a readable shard.
        StorageError: If the store fails.
    """
    if len(listed) <= 1:
        shards = [footer(store, u, i) for u, i in listed]
    else:
        with ThreadPoolExecutor(min(FOOTER_THREADS, len(listed))) as pool:
            shards = list(pool.map(lambda item: footer(store, *item), listed))
    store.cache.trim_footers()  # the footers just kept, within cache_limit
    return shards


def footer(store: Store, url: str, info: Mapping[str, Any]) -> RemoteShard:
    """Read one object's footer: its first 4 bytes and its last bytes (one or two ranges).

    The footer bytes are kept in the shard cache, keyed by URL, version and size: opening
    the same object version again (another process, rank or run) reads nothing remote.

    Args:
        store: The object's store.
        url: The object's URL.
        info: Its listing entry (size and version).

    Returns:
        The shard's description.

    Raises:
        NotParquetError: If it does not start with the Parquet magic bytes.
        CorruptShardError: If the footer cannot be decoded.
        ShardChangedError: If the object is gone or shorter than listed.
        StorageError: If the store fails.
    """
    size = int(info.get("size") or 0)
    version = identity(info)
    meta = _metadata(store, url, size, version, trim=False)[0]  # footers() trims once
    return _shard(store, url, size, version, meta)


def metadata(store: Store, url: str, info: Mapping[str, Any]) -> Any:
    """An object's decoded footer (``pyarrow.parquet.FileMetaData``), cached as :func:`footer`.

    Raises:
        As :func:`footer`.
    """
    return _metadata(store, url, int(info.get("size") or 0), identity(info))[0]


def remote_metadata(shard: RemoteShard) -> Any:
    """A remote shard's footer (from the shard cache), checked before chunk accessors run.

    The footer kept since the dataset opened is parsed here, as
    :func:`.footers.checked_metadata` parses a local one: pyarrow's column chunk accessors
    abort the process on a type, codec or encoding they do not know.

    Args:
        shard: The shard.

    Returns:
        Its ``pyarrow.parquet.FileMetaData``.

    Raises:
        ValueError: If a column chunk holds a value pyarrow's chunk accessors do not know.
        As :func:`footer` otherwise.
    """
    assert shard.store is not None
    meta, tail = _metadata(shard.store, shard.path, shard.size, shard.version)
    (length,) = struct.unpack("<I", tail[-8:-4])
    if not footer_checks.footer_chunks_known(tail[-8 - length:-8] if length else None):
        raise ValueError(f"{shard.path}: a column chunk pyarrow's accessors cannot take")
    return meta


def _metadata(
    store: Store, url: str, size: int, version: str | None, *, trim: bool = True
) -> tuple[Any, bytes]:
    """An object's decoded footer and the bytes it was decoded from (its tail).

    A footer read from the store is kept in the shard cache; with ``trim`` the cache's
    least recently used footers are then deleted while it holds more than its limit.
    """
    key = store.key(url, version, size)
    tail = store.cache.load_footer(key)
    if tail is not None:
        with contextlib.suppress(OSError, pa.ArrowException, ValueError):
            meta = pq.read_metadata(pa.BufferReader(tail))
            meta.schema.to_arrow_schema()
            return meta, tail
    tail = _fetch_footer(store, ListedObject(url, size, version))
    try:
        meta = pq.read_metadata(pa.BufferReader(tail))
    except (OSError, pa.ArrowException, ValueError) as exc:
        raise footer_checks.unreadable_footer(url, exc) from None
    # the checks read_footer makes of a local file, before anything touches a column
    footer_checks.check_encrypted_columns(url, meta, tail[:-8])
    footer_checks.arrow_schema(url, meta)
    store.cache.save_footer(key, tail)  # it decodes: the next open needs no range read
    if trim:
        store.cache.trim_footers()
    return meta, tail


def _fetch_footer(store: Store, listed: ListedObject) -> bytes:
    """The footer of an object and its 8-byte trailer, by range reads (magic checked).

    The reads are pinned to the version listed (:meth:`Store.read_ranges`): an object
    replaced between the listing and this read is refused, never its footer kept under the
    listed version's key.

    Raises:
        ShardChangedError: If the object is no longer the version listed.
    """
    url, size = listed.path, listed.size
    try:
        head, tail = (
            store.read_ranges(listed, [(0, 4), (max(0, size - TAIL_BYTES), size)])
            if size >= 12
            else (b"", b"")
        )
        if head == footer_checks.ENCRYPTED_MAGIC:
            _encrypted(url)
        if head != MAGIC:
            raise NotParquetError(
                f"{url} is not a Parquet file (it does not start with the Parquet magic bytes)",
                url,
            )
        if tail[-4:] == footer_checks.ENCRYPTED_MAGIC:
            _encrypted(url)
        if tail[-4:] != MAGIC:
            raise CorruptShardError(
                f"Parquet shard {url} is truncated or corrupt: it does not end with the "
                "Parquet magic bytes",
                url,
            )
        need = struct.unpack("<i", tail[-8:-4])[0] + 8
        if not 8 < need <= size:
            raise CorruptShardError(
                f"Parquet shard {url} is truncated or corrupt: its footer claims {need} bytes "
                f"of a {size}-byte file",
                url,
            )
        if need > len(tail):
            (tail,) = store.read_ranges(listed, [(size - need, size)])
    except FileNotFoundError:
        raise ShardChangedError(f"shard {url} disappeared while the dataset opened", url) from None
    except ShardChangedError:
        # pinned to the listing: the other version's footer was refused, nothing kept
        raise ShardChangedError(
            f"shard {url} was replaced or deleted in the store while the dataset was being "
            "opened (it is no longer the version listed); open the dataset again",
            url,
        ) from None
    return tail[-need:]


def _encrypted(url: str) -> None:
    raise EncryptedShardError(
        f"Parquet shard {url} is encrypted (Parquet modular encryption with an encrypted "
        "footer); undertale_duck cannot read encrypted files: decrypt it, or remove it from "
        "the dataset",
        url,
    )


def _shard(store: Store, url: str, size: int, version: str | None, meta: Any) -> RemoteShard:
    """The :class:`RemoteShard` a decoded footer describes (row groups checked as locally)."""
    schema = footer_checks.arrow_schema(url, meta)
    groups = footer_checks.checked_row_groups(url, meta, size)
    return RemoteShard(
        path=url,
        rows=sum(rows for rows, _ in groups),
        row_groups=groups,
        size=size,
        mtime_ns=0,
        schema=schema,
        created_by=str(meta.created_by or ""),
        version=version,
        store=store,
        decoded=decoded_sizes(meta),
    )


class SourceFiles:
    """A source's shard files, local or remote, for code that reads them one by one.

    Validation and ``describe`` report unreadable shards instead of failing; they list the
    files, then read each footer, size and metadata here, and :meth:`attach` lets a DuckDB
    connection read remote URLs (through the store's fsspec client).

    Args:
        source: A local source (see ``local_paths``) or a URL, glob URL or list of URLs.
        storage_options: Options of a remote source's fsspec filesystem.

    Raises:
        SourceError: If the source cannot be listed.
    """

    def __init__(self, source: Any, storage_options: Mapping[str, Any] | None = None) -> None:
        self.store: Store | None = None
        self._infos: dict[str, dict[str, Any]] = {}
        if is_remote(source):
            from .shard_cache import ShardCache

            self.store = open_store(source, storage_options, ShardCache())
            listed = list_remote(self.store, source)
            self._infos = dict(listed)
            self.paths = [url for url, _ in listed]
        else:
            items = [source] if isinstance(source, str) else (
                list(source) if isinstance(source, list | tuple) else []
            )
            if any(isinstance(s, str) and s[:7].lower() == "file://" for s in items):
                # as Source does: options given for file:// are its filesystem's, not misspelt
                check_options("file", storage_options or {})
            self.paths = local_paths(source)

    def footer(self, path: str) -> Shard:
        """The shard's footer (``source.read_footer`` for a local file)."""
        if self.store is None:
            return read_footer(path)
        return footer(self.store, path, self._infos[path])

    def size(self, path: str) -> int:
        """The file's size in bytes (``OSError`` for a local file that cannot be read)."""
        if self.store is None:
            return os.stat(path).st_size
        return int(self._infos[path].get("size") or 0)

    def metadata(self, path: str) -> Any:
        """The file's ``pyarrow.parquet.FileMetaData``."""
        if self.store is None:
            return pq.read_metadata(path)
        return metadata(self.store, path, self._infos[path])

    def attach(self, con: Any) -> None:
        """Let a DuckDB connection read this source's URLs (nothing to do for local files)."""
        if self.store is not None:
            con.register_filesystem(self.store.filesystem())
