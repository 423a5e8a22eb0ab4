"""Dataset schemas: the built-in set of undertale's original dataset module, Unique, loading."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Final

from pydantic import BaseModel

from ..errors import ArgumentError

#: Modules imported from a ``path/to/file.py:Class`` spec get names starting with this.
FILE_MODULE_PREFIX = "_undertale_duck_schema_"


class _UniqueMarker:
    """Marks a column whose non-null values must be unique across the whole dataset."""

    def __repr__(self) -> str:
        return "Unique"


#: Use as ``Annotated[str, Unique]``: the column's non-null values must be unique across every
#: shard of the dataset.
Unique: Final = _UniqueMarker()


def is_unique_marker(item: object) -> bool:
    """Tell whether a piece of ``Annotated`` metadata is the :data:`Unique` marker.

    Args:
        item: One metadata item of a field.

    Returns:
        True for :data:`Unique` (or its class).
    """
    return item is Unique or item is _UniqueMarker or isinstance(item, _UniqueMarker)


class Dataset(BaseModel):
    """Base schema of every dataset: ``id`` identifies a row and is unique across all shards."""

    id: Annotated[str, Unique]


class TokenizedDataset(Dataset):
    """A tokenized dataset: token ids and their attention mask."""

    tokens: list[int]
    mask: list[int]


class TokenizedClassificationDataset(TokenizedDataset):
    """A tokenized dataset with an integer class label per row."""

    label: int


class SourceDataset(Dataset):
    """A dataset of source code."""

    source: str


class SummarizedMixin(BaseModel):
    """Adds a natural-language ``summary`` column."""

    summary: str


class SummarizedSourceDataset(SummarizedMixin, SourceDataset):
    """Source code with a summary."""


class BinaryDataset(Dataset):
    """A dataset of binaries (raw bytes)."""

    binary: bytes


class BinaryDatasetWithSource(SourceDataset, BinaryDataset):
    """Binaries with the source code they were built from."""


class FunctionDataset(Dataset):
    """A dataset of functions, each with a ``name``."""

    name: str


class FunctionDatasetWithSource(SourceDataset, FunctionDataset):
    """Functions with their source code."""


class DisassembledFunctionDataset(FunctionDataset):
    """Functions with their disassembly."""

    disassembly: str


class DisassembledFunctionDatasetWithSource(SourceDataset, DisassembledFunctionDataset):
    """Disassembled functions with their source code."""


class SummarizedDisassembledFunctionDatasetWithSource(
    SummarizedMixin, DisassembledFunctionDatasetWithSource
):
    """Disassembled functions with source code and a summary."""


class VulnerabilityMixin(BaseModel):
    """Adds a ``vulnerability`` column (a vulnerability class or description)."""

    vulnerability: str


class VulnerabilityDisassembledFunctionDatasetWithSource(
    VulnerabilityMixin, DisassembledFunctionDatasetWithSource
):
    """Disassembled functions with source code and a vulnerability annotation."""


#: The built-in schemas by name (what ``--schema NAME`` accepts on the command line).
BUILTIN: Final[dict[str, type[BaseModel]]] = {
    cls.__name__: cls
    for cls in (
        Dataset,
        TokenizedDataset,
        TokenizedClassificationDataset,
        SourceDataset,
        SummarizedMixin,
        SummarizedSourceDataset,
        BinaryDataset,
        BinaryDatasetWithSource,
        FunctionDataset,
        FunctionDatasetWithSource,
        DisassembledFunctionDataset,
        DisassembledFunctionDatasetWithSource,
        SummarizedDisassembledFunctionDatasetWithSource,
        VulnerabilityMixin,
        VulnerabilityDisassembledFunctionDatasetWithSource,
    )
}


def check_schema(schema: object) -> type[BaseModel]:
    """Check that an object is a schema class (a pydantic ``BaseModel`` subclass).

    Args:
        schema: The object given as a schema.

    Returns:
        The same object, typed as a model class.

    Raises:
        ArgumentError: If it is not a ``BaseModel`` subclass (an instance is refused too).
    """
    if inspect.isclass(schema) and issubclass(schema, BaseModel):
        return schema
    raise ArgumentError(
        f"schema must be a pydantic BaseModel subclass (such as "
        f"undertale_duck.schema.TokenizedDataset), got {schema!r}"
    )


def load_schema(spec: str) -> type[BaseModel]:
    """Find a schema class from its command-line spelling.

    Args:
        spec: A built-in schema name (``"TokenizedDataset"``), ``"module:Class"`` for an
            importable module, or ``"path/to/file.py:Class"``.

    Returns:
        The schema class.

    Raises:
        ArgumentError: If the name is unknown, the module or file cannot be imported, the class
            does not exist, or it is not a pydantic model.
    """
    spec = spec.strip()
    if spec in BUILTIN:
        return BUILTIN[spec]
    if ":" not in spec:
        raise ArgumentError(
            f"unknown schema {spec!r}: give a built-in schema name ({', '.join(sorted(BUILTIN))}), "
            "'module:Class' or 'path/to/file.py:Class'"
        )
    where, _, name = spec.rpartition(":")
    if not where or not name:
        raise ArgumentError(f"schema {spec!r} must look like 'module:Class' or 'file.py:Class'")
    module = _import(where, spec)
    obj: Any = module
    for part in name.split("."):
        if not hasattr(obj, part):
            raise ArgumentError(f"schema {spec!r}: {where} has no attribute {name!r}")
        obj = getattr(obj, part)
    try:
        return check_schema(obj)
    except ArgumentError:
        raise ArgumentError(
            f"schema {spec!r} is {obj!r}, not a pydantic BaseModel subclass"
        ) from None


def _import(where: str, spec: str) -> Any:
    path = Path(where).expanduser()
    if where.endswith(".py") or path.suffix == ".py" or "/" in where or "\\" in where:
        if not path.is_file():
            raise ArgumentError(f"schema {spec!r}: file {where} does not exist")
        name = f"{FILE_MODULE_PREFIX}{abs(hash(str(path.resolve())))}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise ArgumentError(f"schema {spec!r}: {where} cannot be imported as Python")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        try:
            module_spec.loader.exec_module(module)
        except SystemExit as exc:
            sys.modules.pop(name, None)
            raise _exited(spec, where, exc) from None
        except Exception as exc:
            sys.modules.pop(name, None)
            raise ArgumentError(
                f"schema {spec!r}: importing {where} failed: {type(exc).__name__}: {exc}"
            ) from None
        return module
    try:
        try:
            return importlib.import_module(where)
        except ModuleNotFoundError:
            if os.getcwd() in sys.path:
                raise
            cwd = os.getcwd()
            sys.path.insert(0, cwd)  # like `python -m`: modules in the working directory
            try:
                return importlib.import_module(where)
            finally:
                if cwd in sys.path:
                    sys.path.remove(cwd)
    except SystemExit as exc:
        raise _exited(spec, where, exc) from None
    except Exception as exc:
        raise ArgumentError(
            f"schema {spec!r}: cannot import module {where!r}: {type(exc).__name__}: {exc}"
        ) from None


def _exited(spec: str, where: str, exc: SystemExit) -> ArgumentError:
    """The error for a schema module that called ``sys.exit`` while being imported.

    Left alone, its status would become the command's: ``sys.exit(0)`` at import (a script's
    main code, an argument parser's ``--help``) would end ``validate`` with "passed".
    """
    return ArgumentError(
        f"schema {spec!r}: importing {where} called sys.exit({exc.code!r}) (a script's code "
        "or argument parser run at import?): nothing was validated; move the schema to a "
        "module without such code, or guard it with if __name__ == '__main__'"
    )


__all__ = [
    "BUILTIN",
    "BinaryDataset",
    "BinaryDatasetWithSource",
    "Dataset",
    "DisassembledFunctionDataset",
    "DisassembledFunctionDatasetWithSource",
    "FunctionDataset",
    "FunctionDatasetWithSource",
    "SourceDataset",
    "SummarizedDisassembledFunctionDatasetWithSource",
    "SummarizedMixin",
    "SummarizedSourceDataset",
    "TokenizedClassificationDataset",
    "TokenizedDataset",
    "Unique",
    "VulnerabilityDisassembledFunctionDatasetWithSource",
    "VulnerabilityMixin",
    "check_schema",
    "is_unique_marker",
    "load_schema",
]
