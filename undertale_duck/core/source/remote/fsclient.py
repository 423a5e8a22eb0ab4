"""Make a protocol's fsspec client (naming the extra it needs), read options, wrap it for DuckDB."""

from __future__ import annotations

import contextlib
import datetime
import email.utils
from collections.abc import Mapping, Sequence
from typing import Any

from ....common.text import first_line
from ....errors import ArgumentError, StorageError

#: The optional extra that installs each protocol's fsspec client.
EXTRAS = {
    "s3": "s3",
    "s3a": "s3",
    "gs": "gcs",
    "gcs": "gcs",
    "az": "azure",
    "abfs": "azure",
    "abfss": "azure",
    "adl": "azure",
    "hf": "hf",
    "http": "http",
    "https": "http",
}


def parse_storage_options(items: Sequence[str]) -> dict[str, Any]:
    """Read ``KEY=VALUE`` texts (the command line's ``--storage-option``) into options.

    A value is JSON when it parses as JSON (``true``, ``3``, ``{"a": 1}``), else text; a
    dotted key nests (``client_kwargs.endpoint_url=http://host:9000``).

    Raises:
        ArgumentError: If an item has no ``=`` or an empty key.
    """
    import json

    options: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        parts = key.strip().split(".")
        if not sep or not all(parts):
            raise ArgumentError(
                f"--storage-option takes KEY=VALUE (a dotted KEY nests), got {item!r}"
            )
        try:
            value: Any = json.loads(text)
        except ValueError:
            value = text
        target = options
        for part in parts[:-1]:
            nested = target.setdefault(part, {})
            if not isinstance(nested, dict):
                raise ArgumentError(f"--storage-option {item!r} nests inside {part!r}, a value")
            target = nested
        target[parts[-1]] = value
    return options


def make_filesystem(protocol: str, storage_options: Mapping[str, Any]) -> Any:
    """Create the fsspec filesystem of a protocol, naming the extra to install if it is missing.

    Raises:
        StorageError: If the protocol's client is not installed.
        ArgumentError: If the protocol is unknown or the options are not accepted.
    """
    import fsspec

    extra = EXTRAS.get(protocol)
    try:
        return fsspec.filesystem(protocol, **storage_options)
    except ImportError as exc:
        install = f"pip install 'undertale_duck[{extra}]'" if extra else "install its fsspec client"
        raise StorageError(
            f"reading {protocol}:// URLs needs a client that is not installed "
            f"({first_line(exc)}): {install}"
        ) from None
    except ValueError as exc:
        if "protocol" in str(exc).lower():
            raise ArgumentError(
                f"unknown storage protocol {protocol}:// ({first_line(exc)}); fsspec "
                "protocols such as s3://, gs://, az://, https://, hf:// are supported"
            ) from None
        raise ArgumentError(
            f"storage_options are not accepted by the {protocol}:// client: {first_line(exc)}"
        ) from None
    except TypeError as exc:
        raise ArgumentError(
            f"storage_options are not accepted by the {protocol}:// client: {first_line(exc)}"
        ) from None


def duckdb_filesystem(inner: Any) -> Any:
    """Wrap an fsspec filesystem for DuckDB, which asks every file's ``modified()`` time.

    Some clients (HTTP) do not implement ``modified()``; the wrapper answers from ``info()``
    (or the epoch when the store gives no time), and passes every other call through.
    """
    from fsspec import AbstractFileSystem

    class DuckDBFileSystem(AbstractFileSystem):  # type: ignore[misc]
        cachable = False

        def __init__(self) -> None:
            super().__init__()
            self.protocol = inner.protocol
            self.inner = inner

        def open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
            return inner.open(path, mode, **kwargs)

        def ls(self, path: str, detail: bool = True, **kwargs: Any) -> Any:
            return inner.ls(path, detail=detail, **kwargs)

        def glob(self, path: str, **kwargs: Any) -> Any:
            return inner.glob(path, **kwargs)

        def info(self, path: str, **kwargs: Any) -> Any:
            return inner.info(path, **kwargs)

        def exists(self, path: str, **kwargs: Any) -> bool:
            return bool(inner.exists(path, **kwargs))

        def modified(self, path: str) -> datetime.datetime:
            try:
                return inner.modified(path)  # type: ignore[no-any-return]
            except NotImplementedError:
                pass
            info = inner.info(path)
            for key in ("LastModified", "last_modified", "Last-Modified", "mtime", "created"):
                value = info.get(key)
                if isinstance(value, datetime.datetime):
                    return value
                if isinstance(value, int | float):
                    return datetime.datetime.fromtimestamp(value, datetime.UTC)
                if isinstance(value, str):
                    with contextlib.suppress(TypeError, ValueError):
                        return email.utils.parsedate_to_datetime(value)
            return datetime.datetime.fromtimestamp(0, datetime.UTC)

    return DuckDBFileSystem()
