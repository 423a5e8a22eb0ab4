"""What an output file must never touch: the dataset's directories and shards, and our caches."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

#: Flags for opening a directory that is only searched and examined (O_PATH needs no read
#: permission, so walking up through directories such as a 0711 home still works).
_DIRECTORY_FLAGS = os.O_DIRECTORY | os.O_CLOEXEC | getattr(os, "O_PATH", os.O_RDONLY)


def file_key(st: os.stat_result) -> tuple[int, int]:
    """Identify a file or directory by ``(st_dev, st_ino)``, however it is reached."""
    return (st.st_dev, st.st_ino)


@dataclass(frozen=True)
class Protected:
    """What an output file must never touch: the dataset's directories and its shards.

    Attributes:
        directories: ``(st_dev, st_ino)`` of each protected directory, with the path shown
            in errors; every directory below one of them is protected too.
        shards: ``(st_dev, st_ino)`` of each shard file.
        real_directories: The protected directories' resolved paths (the check by name, used
            only where a directory's ancestors cannot be opened).
        caches: ``(st_dev, st_ino)`` of each of undertale_duck's cache directories, with its
            path; every directory below one of them is protected too.
        real_caches: The cache directories' resolved paths (the check by name).
    """

    directories: Mapping[tuple[int, int], str]
    shards: frozenset[tuple[int, int]]
    real_directories: tuple[str, ...]
    caches: Mapping[tuple[int, int], str] = field(default_factory=dict)
    real_caches: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        source: str,
        shards: Iterable[str],
        *,
        caches: bool = True,
        files: Iterable[str] = (),
    ) -> Protected:
        """The protection for a dataset given on the command line.

        Args:
            source: The SOURCE argument: a file, a directory or a glob.
            shards: The shard paths it resolved to.
            caches: Whether undertale_duck's own cache directories are protected too
                (:func:`cache_directories`).
            files: Other input files never to be replaced (a view's side tables); unlike
                shards, their directories stay writable.

        Returns:
            The directories (the source directory, a glob's starting directory, and the
            directory of every shard, as given and as resolved), the shard files, and the
            cache directories that exist.
        """
        from ..core.source import is_remote

        paths = [os.path.abspath(s) for s in shards if not is_remote(s)]
        candidates: list[str] = []
        expanded = os.path.expanduser(source)
        if is_remote(source):  # nothing local to protect: the shards live in the store
            pass
        elif os.path.isdir(expanded):
            candidates.append(expanded)
        elif not os.path.exists(expanded):  # a glob: the directory the pattern starts from
            cut = min((expanded.find(c) for c in "*?[" if c in expanded), default=len(expanded))
            candidates.append(os.path.dirname(expanded[:cut]) or ".")
        for path in paths:
            candidates += [os.path.dirname(path), os.path.dirname(os.path.realpath(path))]
        directories: dict[tuple[int, int], str] = {}
        for directory in candidates:
            with contextlib.suppress(OSError):
                directories.setdefault(file_key(os.stat(directory)), directory)
        keys = set()
        for path in [*paths, *(os.path.abspath(os.path.expanduser(f)) for f in files)]:
            with contextlib.suppress(OSError):
                keys.add(file_key(os.stat(path)))
        real = tuple(sorted({os.path.realpath(d) for d in directories.values()}))
        own: dict[tuple[int, int], str] = {}
        for directory in cache_directories() if caches else []:
            with contextlib.suppress(OSError):  # a cache not created yet holds nothing
                own.setdefault(file_key(os.stat(directory)), directory)
        real_own = tuple(sorted({os.path.realpath(d) for d in own.values()}))
        return cls(directories, frozenset(keys), real, own, real_own)

    def enclosing(self, directory_fd: int, path: str) -> str | None:
        """The protected dataset directory that holds an open directory, if any.

        Args:
            directory_fd: A descriptor of the directory to judge.
            path: Its path (for the check by name).

        Returns:
            The protected directory's path as shown to the user, or None.
        """
        found = self.judge(directory_fd, path)
        return None if found is None or found[1] else found[0]

    def judge(self, directory_fd: int, path: str) -> tuple[str, bool] | None:
        """The protected directory (dataset or cache) that holds an open directory, if any.

        Args:
            directory_fd: A descriptor of the directory to judge.
            path: Its path (for the check by name).

        Returns:
            ``(the protected directory's path as shown to the user, whether it is one of
            our caches)``, or None.
        """
        fd = os.dup(directory_fd)
        try:
            while True:
                here = file_key(os.fstat(fd))
                if here in self.directories:
                    return self.directories[here], False
                if here in self.caches:
                    return self.caches[here], True
                try:
                    parent = os.open("..", _DIRECTORY_FLAGS, dir_fd=fd)
                except OSError:
                    break  # an ancestor we may not enter: the check by name below decides
                os.close(fd)
                fd = parent
                if file_key(os.fstat(fd)) == here:  # "/" is its own parent: the walk is complete
                    return None
        finally:
            os.close(fd)
        real = os.path.realpath(path)
        for roots, is_cache in ((self.real_directories, False), (self.real_caches, True)):
            for root in roots:
                if real == root or real.startswith(root.rstrip(os.sep) + os.sep):
                    return root, is_cache
        return None


def cache_directories() -> list[str]:
    """undertale_duck's own cache directories on this node, as configured now.

    Returns:
        The cache root (``$UNDERTALE_DUCK_CACHE``, else the user's cache directory; see
        core/cachedir.py), the node's shard cache, the disk tier's window files and the
        view indexes: files there are trusted as copies of shards or as indexes, so no
        output may ever be written among them.
    """
    from ..core.runtime import CACHE_KINDS, cache_root, kind_directory

    root = cache_root()
    paths = [root, *(kind_directory(kind) for kind in CACHE_KINDS)]
    return [os.fspath(p) for p in paths]
