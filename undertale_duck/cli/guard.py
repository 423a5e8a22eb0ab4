"""The one policy for every file the command line writes: never in the dataset, never a surprise.

Every command that writes a file (``sql --output``, ``validate --output``) goes through
:class:`OutputFile`. The policy (docs/cli.md, "Output files"):

- the file is never a shard, and never lies in the dataset's directory tree or in a directory
  holding any of its shards (for a single-file source: the file's own directory), however it
  is reached (symbolic links, ``..``, bind mounts): directories are compared by device and
  inode, walking up from the directory actually opened;
- nor in undertale_duck's own caches (the cache root, the node's shard cache, the disk tier,
  the view indexes), whose files are trusted as copies of shards and as indexes, also for a
  URL source that has no local directory of its own;
- the target is judged when the file is created, not before the work: the directory is opened
  once, the result is written to a temporary file created inside that open directory
  (``O_EXCL | O_NOFOLLOW``, an unpredictable name), synced, and moved onto the target within
  the same open directory after the checks are made again;
- symbolic links, directories, FIFOs, devices and sockets at the target are refused, never
  written through or replaced (standard output is ``-``; redirect it to reach a device);
- an existing file, even one that appeared while the work ran, is replaced only with
  ``--force``, and only when it is a regular file (the result never gets permission bits
  it lacked):
  without ``--force`` the result is published with ``link()``, which fails if the target
  exists, rather than ``rename()``;
- on any error or Ctrl-C the temporary file is removed: no partial output is ever left.

The same checks run once before the work starts, so that a bad target fails fast.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from typing import BinaryIO

from ..errors import ArgumentError
from .protected import Protected, cache_directories, file_key

__all__ = ["OutputFile", "Protected", "cache_directories"]

#: Flags for creating the temporary file: never an existing file, never through a link.
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

#: Errors with which ``link()`` says the filesystem has no hard links (FAT, some FUSE mounts).
_NO_HARD_LINKS = frozenset(
    {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.ENOSYS}
)


class OutputFile:
    """A file a command writes, created only where the output policy allows.

    Construction checks the target at once (so that a bad one fails before the work);
    :meth:`open` checks it again when the file is created and once more before publishing.

    Args:
        output: The path as given (``~`` is expanded; relative to the working directory).
        protected: The dataset the file must stay out of.
        force: Whether an existing regular file may be replaced.
        option: The option's name, for error messages.

    Raises:
        ArgumentError: If the target is refused (see the module's policy) or its directory
            cannot be used.
    """

    def __init__(
        self, output: str, *, protected: Protected, force: bool, option: str = "--output"
    ) -> None:
        if not output:
            raise ArgumentError(f"{option} must name a file")
        self.given = output
        self.path = os.path.abspath(os.path.expanduser(output))
        self.directory, self.name = os.path.split(self.path)
        self.protected = protected
        self.force = force
        self.option = option
        if output.endswith(os.sep) or self.name in ("", ".", ".."):
            raise ArgumentError(f"{option} {output} names a directory; name a file")
        with self._opened_directory() as directory_fd:
            self._check_target(directory_fd)
            self._check_directory(directory_fd)

    def _refuse(self, why: str) -> ArgumentError:
        return ArgumentError(f"{self.option} {self.given} {why}")

    def _oserror(self, exc: OSError) -> ArgumentError:
        return self._refuse(f"cannot be written: {exc.strerror or exc}")

    @contextlib.contextmanager
    def _opened_directory(self) -> Iterator[int]:
        try:
            fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise self._refuse(
                f"cannot be written: directory {self.directory} does not exist"
            ) from None
        except NotADirectoryError:
            raise self._refuse(
                f"cannot be written: {self.directory} is not a directory"
            ) from None
        except OSError as exc:
            raise self._oserror(exc) from None
        try:
            yield fd
        finally:
            os.close(fd)

    def _check_directory(self, directory_fd: int) -> None:
        found = self.protected.judge(directory_fd, self.directory)
        if found is None:
            return
        inside, is_cache = found
        if is_cache:
            raise self._refuse(
                f"lies inside undertale_duck's cache directory {inside}; files there are "
                "trusted as copies of shards and as indexes: choose a path outside it"
            )
        raise self._refuse(
            f"lies inside the dataset directory {inside}; the dataset is read-only (a new "
            "file there would become part of it): choose a path outside it"
        )

    def _check_target(self, directory_fd: int, *, appeared: bool = False) -> bool:
        """Judge what is at the target now; True when it is a regular file ``--force`` replaces."""
        try:
            st = os.stat(self.name, dir_fd=directory_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise self._oserror(exc) from None
        if stat.S_ISLNK(st.st_mode):
            try:
                target = file_key(os.stat(self.name, dir_fd=directory_fd))
                to_shard = target in self.protected.shards
            except OSError:
                to_shard = False
            what = "a symbolic link to a shard of the dataset" if to_shard else "a symbolic link"
            raise self._refuse(
                f"is {what}; links are never written through or replaced: remove it or "
                "choose another name"
            )
        if stat.S_ISDIR(st.st_mode):
            raise self._refuse("is a directory; name a file")
        if not stat.S_ISREG(st.st_mode):
            raise self._refuse(
                f"is {_kind(st.st_mode)}, not a regular file; it is never replaced (to write "
                "to a device or a pipe, write to standard output with '-' and redirect it)"
            )
        if file_key(st) in self.protected.shards:
            raise self._refuse(
                "is a shard of the dataset or another input (a side table, the query or schema "
                "file); inputs are read-only: choose another file"
            )
        if not self.force:
            when = " (it appeared while the result was being written)" if appeared else ""
            raise self._refuse(f"already exists{when}; pass --force to replace it")
        return True

    @contextlib.contextmanager
    def open(self) -> Iterator[BinaryIO]:
        """Create the file: yield a binary stream whose content becomes the target on success.

        Yields:
            A stream on a new temporary file inside the target's directory. When the block
            ends without an error the file is synced and published at the target; when it
            raises (Ctrl-C included) the temporary file is removed.

        Raises:
            ArgumentError: If the target is refused now or when it is published.
        """
        with self._opened_directory() as directory_fd:
            self._check_target(directory_fd)
            self._check_directory(directory_fd)
            temporary, fd = self._create_temporary(directory_fd)
            try:
                with os.fdopen(fd, "wb") as stream:
                    yield stream
                    stream.flush()
                    self._keep_mode(directory_fd, stream.fileno())
                    os.fsync(stream.fileno())
                self._publish(directory_fd, temporary)
            except BaseException as exc:
                with contextlib.suppress(OSError):
                    os.unlink(temporary, dir_fd=directory_fd)
                if isinstance(exc, OSError):  # a full disk, a quota, an I/O error
                    raise self._oserror(exc) from None
                raise

    def _keep_mode(self, directory_fd: int, fd: int) -> None:
        """Never give others more access than the file replaced gave (a private file stays so)."""
        with contextlib.suppress(OSError):
            st = os.stat(self.name, dir_fd=directory_fd, follow_symlinks=False)
            if self.force and stat.S_ISREG(st.st_mode):
                os.fchmod(fd, stat.S_IMODE(st.st_mode) & stat.S_IMODE(os.fstat(fd).st_mode))

    def _create_temporary(self, directory_fd: int) -> tuple[str, int]:
        # a short name of our own (never derived from the target's, which may be 255 bytes)
        for _ in range(100):
            name = f".undertale-duck-{secrets.token_hex(8)}.tmp"
            try:
                return name, os.open(name, _CREATE_FLAGS, 0o666, dir_fd=directory_fd)
            except FileExistsError:
                continue
            except OSError as exc:
                raise self._oserror(exc) from None
        raise self._refuse("cannot be written: no free temporary name in its directory")

    def _publish(self, directory_fd: int, temporary: str) -> None:
        try:
            for _ in range(3):
                self._check_directory(directory_fd)
                # without --force the target was absent when the file was created: whatever
                # is there now appeared while the result was being written
                if self._check_target(directory_fd, appeared=True):
                    os.replace(
                        temporary, self.name, src_dir_fd=directory_fd, dst_dir_fd=directory_fd
                    )
                    break
                if self._create_without_replacing(directory_fd, temporary):
                    break
            else:
                raise self._refuse("keeps changing while it is being written; try again")
            with contextlib.suppress(OSError):  # not every filesystem syncs directories
                os.fsync(directory_fd)
        except OSError as exc:
            raise self._oserror(exc) from None

    def _create_without_replacing(self, directory_fd: int, temporary: str) -> bool:
        """Publish at a target that did not exist; False when one appeared meanwhile."""
        try:
            os.link(
                temporary,
                self.name,
                src_dir_fd=directory_fd,
                dst_dir_fd=directory_fd,
                follow_symlinks=False,
            )
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno not in _NO_HARD_LINKS:
                raise
            # no hard links here: claim the name exclusively, then move the result onto our
            # own empty file (rename replaces the entry; it never writes through it)
            try:
                os.close(os.open(self.name, _CREATE_FLAGS, 0o600, dir_fd=directory_fd))
            except FileExistsError:
                return False
            os.replace(temporary, self.name, src_dir_fd=directory_fd, dst_dir_fd=directory_fd)
            return True
        os.unlink(temporary, dir_fd=directory_fd)
        return True


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"
