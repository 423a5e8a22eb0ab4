"""Local sources: a file, a directory, a glob or a list of files, resolved into shard paths."""

from __future__ import annotations

import glob as globlib
import os
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

from ...common.text import not_utf8
from ...errors import SourceError
from ..runtime import GLOB_CHARS, tagged

PARQUET_SUFFIXES = (".parquet", ".parq", ".pq")
MAGIC = b"PAR1"

SourceLike = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


def _is_hidden(name: str) -> bool:
    return name.startswith((".", "_")) or name.endswith(".crc")


def _has_magic(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
            if head != MAGIC:
                return False
            fh.seek(-4, os.SEEK_END)
            return fh.read(4) == MAGIC
    except OSError:
        return False


def _not_regular(path: str) -> str:
    """Why a path named like a shard cannot be one: not a regular file (or a broken link)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return f"dataset file {path} cannot be opened: {exc.strerror} (a broken symbolic link?)"
    kind = (
        "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(
            mode
        ) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
    )
    return (
        f"dataset file {path} is {kind}, not a Parquet file: remove it from the dataset "
        "(undertale_duck reads only regular files)"
    )


def _directory_files(directory: Path) -> list[str]:
    """List the Parquet shards of a directory, sorted by name."""
    files: list[str] = []
    nested = False
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        if _is_hidden(entry.name):
            continue
        named = entry.name.lower().endswith(PARQUET_SUFFIXES)
        try:
            if entry.is_dir():
                nested = nested or any(
                    f.endswith(PARQUET_SUFFIXES) for _, _, fs in os.walk(entry.path) for f in fs
                )
                continue
            regular = entry.is_file()
        except OSError as exc:  # a symbolic link loop, an unreadable entry
            if named:
                raise SourceError(
                    f"cannot open dataset file {entry.path}: {exc.strerror}", entry.path
                ) from None
            continue
        if not regular:
            if named:  # a shard that vanished or is not a file: never silently skipped
                raise SourceError(_not_regular(entry.path), entry.path)
            continue
        if named or _has_magic(entry.path):
            files.append(os.path.abspath(entry.path))
    if not files:
        hint = (
            " (its subdirectories hold Parquet files: pass a glob such as "
            f"'{directory}/**/*.parquet')"
            if nested
            else ""
        )
        raise SourceError(f"directory {directory} holds no Parquet files{hint}", str(directory))
    return files


def _glob_files(pattern: str) -> list[str]:
    matches = sorted(globlib.glob(pattern, recursive=True))
    # a cache of ours that a wildcard directory reaches (a shard cache_dir= inside the tree
    # of ``data/**/*.parquet``) holds copies of other datasets' shards, never this one's
    wild = bool(GLOB_CHARS & set(os.path.dirname(pattern)))
    caches: dict[str, bool] = {}
    files = []
    for m in matches:
        if _is_hidden(os.path.basename(m)) or os.path.isdir(m):
            continue
        parent = os.path.dirname(m)
        if wild and parent not in caches:
            caches[parent] = tagged(parent or ".")
        if wild and caches[parent]:
            continue
        if not os.path.isfile(m):  # a FIFO, a device, a broken link: never silently skipped
            raise SourceError(_not_regular(m), m)
        files.append(os.path.abspath(m))
    if not files:
        raise SourceError(
            f"no Parquet files match the pattern {pattern!r}{_bracket_hint(pattern)}", pattern
        )
    return files


def _bracket_hint(pattern: str) -> str:
    """A hint for a pattern whose ``[...]`` a directory's own name holds (``data[1]/*``).

    In a glob ``[1]`` matches the character ``1``, so ``data[1]/*.parquet`` looks in
    ``data1``; the escaped pattern reads the directory that exists.
    """
    head, rest = pattern, ""
    while head and "[" in head:
        if os.path.exists(head):
            escaped = globlib.escape(head) + rest
            return (
                f" ({head} exists, but [ and ] are glob characters in a pattern: escape them "
                f"as [[] and []], {escaped!r})"
            )
        head, tail = os.path.split(head)
        if not tail:
            break
        rest = os.sep + tail + rest
    return ""


def local_paths(source: SourceLike) -> list[str]:
    """Resolve a source into the ordered list of its Parquet shard paths.

    Args:
        source: One Parquet file; a directory of shards (sorted by name; hidden files,
            ``_SUCCESS``, ``*.crc`` and other non-Parquet files ignored); a glob pattern;
            or a list of files, kept in the given order.

    Returns:
        Absolute paths of the shards.

    Raises:
        SourceError: If a path does not exist, a directory holds no Parquet files, a glob
            matches nothing, the list is empty, or a shard's path is not valid UTF-8.
    """
    files = _resolve(source)
    for name in files:
        if not_utf8(name) is not None:
            raise SourceError(
                f"dataset file '{not_utf8(name)}' has a path that is not valid UTF-8, which "
                "DuckDB and pyarrow cannot open: rename it (or the directory holding it)",
                name,
            )
    return files


def _local_path(text: str) -> str:
    """A ``file://`` URL's path (``file:///data/x`` or ``file://localhost/data/x``); else ``text``.

    Raises:
        SourceError: If the URL names another host.
    """
    if text[:7].lower() != "file://":
        return text
    rest = text[7:]
    if rest[:10].lower() == "localhost/":
        rest = rest[9:]
    if not rest.startswith("/"):
        raise SourceError(
            f"dataset source {text} names another host; a file:// URL names a local file or "
            "directory as file:///absolute/path",
            text,
        )
    return rest


def _resolve(source: SourceLike) -> list[str]:
    if isinstance(source, str | os.PathLike):
        text = _local_path(os.fspath(source))
        if not text:
            raise SourceError("the dataset source is an empty path", text)
        path = Path(text).expanduser()
        if path.is_dir():
            return _directory_files(path)
        if path.is_file():
            return [str(path.absolute())]
        if GLOB_CHARS & set(text):
            return _glob_files(str(path))
        if os.path.lexists(path):
            raise SourceError(_not_regular(str(path)), text)
        raise SourceError(f"dataset source {text} does not exist", text)
    if isinstance(source, bytes):
        raise SourceError("the dataset source must be a path, a glob or a list of paths, not bytes")
    if not isinstance(source, Sequence) and hasattr(source, "__getitem__"):
        # a dataset, view or Mixture: iterating it would read rows (and print one in the error)
        kind = type(source).__name__
        raise SourceError(
            f"the dataset source is a {kind}, not a path: a {kind} is already a dataset, pass it "
            "where a dataset goes (load(), DataModule, ChunkedSampler, DataLoader); "
            "ParquetDataset opens a path, a glob or a list of paths"
        )
    if not isinstance(source, Iterable):  # a number, a Stream: nothing to resolve
        kind = type(source).__name__
        hint = "; a Stream belongs in a Mixture" if kind == "Stream" else ""
        raise SourceError(
            f"the dataset source must be a path, a glob or a list of paths, not {kind}{hint}"
        )
    items = list(source)
    if not items:
        raise SourceError("the dataset source is an empty list of files")
    files: list[str] = []
    for item in items:
        if not isinstance(item, str | os.PathLike):
            raise SourceError(
                f"the dataset source list holds a {type(item).__name__}, which is not a path: "
                "list paths, globs or URLs"
            )
        path = Path(os.fspath(item)).expanduser()
        if path.is_dir():
            files.extend(_directory_files(path))
        elif path.is_file():
            files.append(str(path.absolute()))
        elif os.path.lexists(path):
            raise SourceError(_not_regular(str(path)), str(path))
        else:
            raise SourceError(f"dataset file {os.fspath(item)} does not exist", os.fspath(item))
    return files
