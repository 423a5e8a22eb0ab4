"""Make a protocol's fsspec client (naming the extra it needs), read options, wrap it for DuckDB."""

from __future__ import annotations

import contextlib
import datetime
import difflib
import email.utils
import importlib
import inspect
import re
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


#: Where a filesystem class's own ``**kwargs`` go when not to fsspec's base class: the
#: callable whose named parameters they may be (s3fs: the botocore session).
KWARGS_GO_TO = {"s3fs.core.S3FileSystem": "aiobotocore.session.AioSession"}
#: Options fsspec's base class takes besides its ``DirCache``'s (its documented ones).
BASE_OPTIONS = ("skip_instance_cache", "asynchronous", "loop")


def accepted_options(cls: type) -> frozenset[str] | None:
    """The options an fsspec filesystem class accepts, from its signatures; None if open.

    The named parameters of ``__init__`` through the class's bases, following each
    ``**kwargs`` to the base it is passed on to (fsspec's own base class takes its
    ``DirCache``'s options and those it documents), or to where :data:`KWARGS_GO_TO` says
    it goes. A ``**kwargs`` its class documents as passed elsewhere (HTTP's request
    options) leaves the set open: any name may be meant.

    Args:
        cls: The filesystem class (``fsspec.get_filesystem_class(protocol)``).

    Returns:
        The accepted names, or None when they are open.
    """
    from fsspec.dircache import DirCache
    from fsspec.spec import AbstractFileSystem

    names: set[str] = set()
    for base in cls.__mro__:
        init = vars(base).get("__init__")
        if init is None:
            continue
        if base is AbstractFileSystem:
            names.update(_named(DirCache.__init__)[0], BASE_OPTIONS)
            return frozenset(names)
        named, rest = _named(init)
        names.update(named)
        if rest is None:
            return frozenset(names)
        target = KWARGS_GO_TO.get(f"{base.__module__}.{base.__qualname__}")
        if target is not None:
            module, _, attr = target.rpartition(".")
            try:
                names.update(_named(getattr(importlib.import_module(module), attr))[0])
            except (ImportError, AttributeError):
                return None
            # what it passes on to fsspec's base class (s3fs: the DirCache options)
            names.update(_named(DirCache.__init__)[0], BASE_OPTIONS)
            return frozenset(names)
        doc = (base.__doc__ or "") + (init.__doc__ or "")
        if re.search(rf"^\s*\**{rest}\s*:", doc, re.MULTILINE):
            return None  # documented as passed on elsewhere
    return frozenset(names)


def _named(fn: Any) -> tuple[list[str], str | None]:
    """A callable's keyword-usable parameter names, and its ``**kwargs`` name (or None)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return [], "kwargs"
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    named = [p.name for p in params if p.kind in keyword and p.name != "self"]
    rest = next((p.name for p in params if p.kind is inspect.Parameter.VAR_KEYWORD), None)
    return named, rest


def check_options(protocol: str, storage_options: Mapping[str, Any]) -> None:
    """Check ``storage_options`` against the protocol's filesystem class before it is made.

    An unknown option is refused naming it, the closest accepted names and all of them; a
    malformed value (an option whose default is a mapping or a flag, given another type)
    naming the option. Nothing is retried: the options would fail the same way again.

    Args:
        protocol: The URL protocol (``"s3"``, ``"file"`` ...).
        storage_options: The options.

    Raises:
        ArgumentError: If an option is unknown or malformed, or ``storage_options`` is not
            a mapping with text keys.
    """
    import fsspec

    if not isinstance(storage_options, Mapping):
        raise ArgumentError(
            f"storage_options must be a mapping of fsspec options, got {storage_options!r}"
        )
    if not storage_options:
        return
    try:
        cls = fsspec.get_filesystem_class(protocol)
    except (ImportError, ValueError):
        return  # make_filesystem names the missing client or the unknown protocol
    accepted = accepted_options(cls)
    client = f"the {protocol}:// client ({cls.__module__}.{cls.__qualname__})"
    defaults = _defaults(cls)
    for name, value in storage_options.items():
        if not isinstance(name, str):
            raise ArgumentError(f"storage_options keys must be option names, got {name!r}")
        if accepted is not None and name not in accepted:
            close = difflib.get_close_matches(name, sorted(accepted), n=3)
            hint = f"did you mean {' or '.join(map(repr, close))}? " if close else ""
            raise ArgumentError(
                f"storage_options {name!r} is not an option of {client}; {hint}it accepts "
                f"{', '.join(sorted(accepted))} (unknown options are refused, not retried)"
            )
        default = defaults.get(name, inspect.Parameter.empty)
        if value is None or default is inspect.Parameter.empty:
            continue
        if (name.endswith("kwargs") or isinstance(default, Mapping)) and not isinstance(
            value, Mapping
        ):
            want = "a mapping of options"
        elif isinstance(default, bool) and not isinstance(value, bool):
            want = "true or false"
        else:
            continue
        raise ArgumentError(
            f"storage_options {name!r} of {client} takes {want}, got {value!r} (malformed "
            "options are refused, not retried)"
        )


def _defaults(cls: type) -> dict[str, Any]:
    """Each named ``__init__`` parameter's default through the class's bases (first wins)."""
    out: dict[str, Any] = {}
    for base in cls.__mro__:
        init = vars(base).get("__init__")
        if init is None or base is object:
            continue
        try:
            params = inspect.signature(init).parameters.values()
        except (TypeError, ValueError):
            continue
        for p in params:
            out.setdefault(p.name, p.default)
    return out


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
    check_options(protocol, storage_options)
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
