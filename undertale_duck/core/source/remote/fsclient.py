"""Make a protocol's fsspec client (naming the extra it needs), read options, wrap it for DuckDB."""

from __future__ import annotations

import contextlib
import datetime
import difflib
import email.utils
import importlib
import inspect
import os
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

from ....common.text import first_line
from ....errors import ArgumentError, StorageError
from ...runtime import GLOB_CHARS

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
            hint = _did_you_mean(name, sorted(accepted))
            raise ArgumentError(
                f"storage_options {name!r} is not an option of {client}; {hint}it accepts "
                f"{', '.join(sorted(accepted))} (unknown options are refused, not retried)"
            )
        if name == "config_kwargs" and isinstance(value, Mapping) and cls.__module__.startswith(
            "s3fs"
        ):
            _check_botocore_config(client, value)
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


def _did_you_mean(name: str, accepted: list[str]) -> str:
    """``"did you mean 'a' or 'b'? "`` for the accepted names close to ``name``, else ``""``."""
    close = difflib.get_close_matches(name, accepted, n=3)
    return f"did you mean {' or '.join(map(repr, close))}? " if close else ""


#: botocore ``Config`` options (s3fs's ``config_kwargs``) by the kind of value each takes;
#: botocore takes any value when the client is made and fails (retried as a network
#: failure) only when a request compares or uses it.
_NUMBERS = ("connect_timeout", "read_timeout")
_COUNTS = ("max_pool_connections", "request_min_compression_size_bytes")
_FLAGS = (
    "parameter_validation", "inject_host_prefix", "endpoint_discovery_enabled",
    "use_dualstack_endpoint", "use_fips_endpoint", "ignore_configured_endpoint_urls",
    "tcp_keepalive", "disable_request_compression", "s3_disable_express_session_auth",
)
_MAPPINGS = ("retries", "s3", "proxies", "proxies_config", "client_context_params")


def _check_botocore_config(client: str, config: Mapping[str, Any]) -> None:
    """Check s3fs's ``config_kwargs`` against botocore's ``Config``: names, then values.

    Raises:
        ArgumentError: Naming the option, what it takes and what was given.
    """
    try:
        config_class: Any = importlib.import_module("botocore.config").Config
    except (ImportError, AttributeError):
        return  # make_filesystem names the missing client
    accepted = sorted(getattr(config_class, "OPTION_DEFAULTS", {}))
    for name, value in config.items():
        where = f"storage_options config_kwargs {name!r} of {client}"
        if accepted and name not in accepted:
            hint = _did_you_mean(str(name), accepted)
            raise ArgumentError(
                f"storage_options config_kwargs {name!r} is not an option of botocore's "
                f"Config ({client}); {hint}it accepts {', '.join(accepted)} (unknown options "
                "are refused, not retried)"
            )
        if value is None:
            continue
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if name in _NUMBERS and not (number and value > 0):
            want = "a number of seconds > 0"
        elif name in _COUNTS and not (number and isinstance(value, int) and value >= 0):
            want = "a whole number"
        elif name in _FLAGS and not isinstance(value, bool):
            want = "true or false"
        elif name in _MAPPINGS and not isinstance(value, Mapping):
            want = "a mapping of options"
        else:
            continue
        raise ArgumentError(
            f"{where} takes {want}, got {value!r}: fix the value in storage_options "
            "(malformed options are refused, not retried)"
        )
    try:
        config_class(**config)
    except Exception as exc:  # botocore's own checks (a retry mode, proxies ...)
        raise ArgumentError(
            f"storage_options config_kwargs of {client} are refused by botocore's Config "
            f"({type(exc).__name__}: {first_line(exc)}): fix them in storage_options "
            "(malformed options are refused, not retried)"
        ) from None


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


#: Options naming the server a store's URLs are resolved against (s3fs, gcsfs: an endpoint;
#: adlfs: an account; Hugging Face: an endpoint), at the top level or in ``client_kwargs``.
ENDPOINT_OPTIONS = ("endpoint_url", "endpoint", "account_url", "account_name", "host")
#: Environment variables botocore takes an S3 endpoint from when no option names one.
S3_ENDPOINT_ENV = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
#: Default ports, left out of a normalised endpoint.
_DEFAULT_PORTS = {"http": 80, "https": 443}


def endpoint_of(protocol: str, storage_options: Mapping[str, Any]) -> str:
    """The server a store's URLs name objects on, normalised; "" for the client's default.

    Two S3-compatible servers hold ``s3://bucket/key`` apart: the shard cache keys each
    object by it too. Read from the options (with fsspec's configuration applied: a top-level
    option before one in ``client_kwargs``, as s3fs takes them), else for S3 from the
    environment variables botocore reads. A URL keeps its scheme, host, port (not a default
    one) and path, lowercased where case does not matter; user information and queries are
    dropped.

    Args:
        protocol: The URL protocol.
        storage_options: The store's options.

    Returns:
        The endpoint (``"http://127.0.0.1:9000"``), or ``""``.
    """
    import fsspec
    from fsspec.config import apply_config

    options: Mapping[str, Any] = storage_options
    with contextlib.suppress(ImportError, ValueError, TypeError):
        options = apply_config(fsspec.get_filesystem_class(protocol), dict(storage_options))
    found = ""
    for where in (options, options.get("client_kwargs")):
        if not isinstance(where, Mapping):
            continue
        value = next((where[n] for n in ENDPOINT_OPTIONS if where.get(n)), None)
        if value is not None:
            found = str(value)
            break
    if not found and protocol in ("s3", "s3a"):
        found = next((os.environ[n] for n in S3_ENDPOINT_ENV if os.environ.get(n)), "")
    return _normal_endpoint(found)


def _normal_endpoint(text: str) -> str:
    """An endpoint as one server is always written (``HTTP://Host:80/`` -> ``http://host``)."""
    text = text.strip()
    if "://" not in text:
        return text.lower()
    try:
        parts = urllib.parse.urlsplit(text)
        port = parts.port
    except ValueError:
        return text
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"  # IPv6
    if port is not None and port != _DEFAULT_PORTS.get(scheme):
        host = f"{host}:{port}"
    return f"{scheme}://{host}{parts.path.rstrip('/')}"


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


#: HTTP(S) clients' timeouts unless ``client_kwargs`` gives one: connecting, and the
#: silence allowed between two reads of an answer. aiohttp's default caps each request's
#: whole time at 300 s, which fails (on every try) any download of a shard that takes
#: longer, and waits that long for a server that went silent.
HTTP_CONNECT_S = 30
HTTP_READ_S = 60
#: ``client_kwargs`` that set an aiohttp session's timeouts (two of them deprecated, still
#: taken, and refused beside ``timeout``): given any, the user's timeouts stand.
USER_TIMEOUTS = frozenset(("timeout", "read_timeout", "conn_timeout"))


def with_http_timeout(protocol: str, storage_options: Mapping[str, Any]) -> dict[str, Any]:
    """The options, with our HTTP timeouts for ``http``/``https`` unless the user gave one.

    Args:
        protocol: The URL protocol.
        storage_options: The user's options (checked; not changed).

    Returns:
        A copy of the options; for HTTP(S) without a timeout of the user's (in
        ``client_kwargs``, or a ``get_client`` of their own), one whose
        ``client_kwargs`` add an ``aiohttp.ClientTimeout`` with no cap on a request's whole
        time, :data:`HTTP_CONNECT_S` to connect and :data:`HTTP_READ_S` between reads.
    """
    options = dict(storage_options)
    client = options.get("client_kwargs")
    if (
        protocol not in ("http", "https")
        or "get_client" in options  # the user's own session maker: its own timeouts
        or (isinstance(client, Mapping) and USER_TIMEOUTS & set(client))
    ):
        return options
    try:
        import aiohttp
    except ImportError:
        return options  # make_filesystem names the extra to install
    options["client_kwargs"] = {
        **(client if isinstance(client, Mapping) else {}),
        "timeout": aiohttp.ClientTimeout(
            total=None, sock_connect=HTTP_CONNECT_S, sock_read=HTTP_READ_S
        ),
    }
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
        return fsspec.filesystem(protocol, **with_http_timeout(protocol, storage_options))
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


def _literal(pattern: str) -> str | None:
    """The one path a pattern escaped by ``duckdb_path`` names, or None if it globs.

    ``duckdb_path`` writes each of ``* ? [`` as a one-character class (``[*]``); a pattern
    holding no other glob character names exactly the path with those classes undone.
    """
    if not GLOB_CHARS & set(pattern):
        return None
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "[" and pattern[i + 2 : i + 3] == "]" and pattern[i + 1 : i + 2] in GLOB_CHARS:
            out.append(pattern[i + 1])
            i += 3
        elif c in GLOB_CHARS:
            return None
        else:
            out.append(c)
            i += 1
    return "".join(out)


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
            literal = _literal(path)
            if literal is not None:
                # a shard's URL with its glob characters escaped (duckdb_path): that one
                # object, not a pattern (an HTTP client cannot list a URL's siblings, and a
                # pre-signed URL's "?" would otherwise be a wildcard)
                return [literal] if inner.exists(literal) else []
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
