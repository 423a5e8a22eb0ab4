"""Mixtures: one training set drawn from several datasets or views in set proportions per epoch.

The mixture is a map-style dataset over the concatenation of its sources (index ``i`` of
source ``k`` is ``offsets[k] + i``). Which rows an epoch visits, and how often, is a pure
function of ``(seed, epoch)``: :meth:`Mixture.epoch_units` returns the epoch's rows as
contiguous ranges (each source's windows, repeated for upsampling, a contiguous run of them
for downsampling), which :class:`~undertale_duck.ChunkedSampler` shuffles and partitions like
a single dataset's windows. Reads therefore stay contiguous within each source.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import inspect
import json
import math
import os
from collections.abc import Mapping, MutableSequence, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from torch.utils.data import Dataset

from ..common.numbers import check_int, is_number
from ..core.rows import index_array
from ..core.source import windows
from ..errors import ArgumentError


@dataclass(frozen=True)
class Stream:
    """One source of a :class:`Mixture` and how much of it an epoch takes.

    Give at most one of ``proportion``, ``repeat`` and ``choose`` (as MosaicML streaming's
    ``Stream``); with none, an epoch takes every row once.

    ``dataset`` may also be a source (a path, URL, glob or list of them): the
    :class:`Mixture` opens it as a ``ParquetDataset`` with the mixture's options (such as
    ``storage_options=`` and ``cache_dir=`` for object storage) updated by ``options``, as
    the view ``query``/``where``/``tables`` says.

    Attributes:
        dataset: A ``ParquetDataset`` (or view), any sized map-style dataset, or a source.
        proportion: Share of the epoch (normalised over the streams); all streams of a
            mixture give one, or none does.
        repeat: Rows per epoch as a multiple of the source's length (2.5: every row twice,
            plus a contiguous half).
        choose: Exact rows per epoch.
        name: A label for the source in lookups (default ``"stream<k>"``).
        query: For a source: serve this view of it (``ParquetDataset(query=)``).
        where: For a source: serve the rows matching this SQL condition.
        tables: For a source: side tables the view joins.
        options: For a source: ``ParquetDataset`` keyword options for this stream alone,
            over the mixture's (``{"storage_options": {...}}`` for a stream in another store).
    """

    dataset: Any
    proportion: float | None = None
    repeat: float | None = None
    choose: int | None = None
    name: str | None = None
    query: str | None = None
    where: str | None = None
    tables: Mapping[str, Any] | None = None
    options: Mapping[str, Any] | None = None


#: The most rows an epoch may count: its order holds them as int64 indices (numpy's).
MAX_EPOCH_ROWS = 2**63 - 1

#: Stream fields that open a source (refused for a stream given as an open dataset).
_SOURCE_FIELDS = ("query", "where", "tables", "options")
#: What a mixture's options may not set: each stream's view is its own.
_PER_STREAM = frozenset({"source", "query", "where", "tables"})


def is_source(value: Any) -> bool:
    """Whether a stream's ``dataset`` is a source to open (a path, URL, glob or list of them)."""
    if isinstance(value, str | os.PathLike):
        return True
    return (isinstance(value, list | tuple) and bool(value)
            and all(isinstance(v, str | os.PathLike) for v in value))


def _source_options() -> frozenset[str]:
    """The ``ParquetDataset`` options a mixture passes to the sources it opens."""
    from ..dataset import ParquetDataset

    names = inspect.signature(ParquetDataset.__init__).parameters
    return frozenset(n for n in names if n != "self") - _PER_STREAM


def _open(streams: list[Stream], options: Mapping[str, Any]) -> tuple[list[Stream], list[Any]]:
    """Open the streams given as sources; return the streams and the datasets opened."""
    from ..dataset import ParquetDataset

    allowed = _source_options()
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ArgumentError(
            f"Mixture got unknown option(s) {unknown}; options are {sorted(allowed)} (a view "
            "is per stream: Stream(source, query=/where=/tables=))"
        )
    out, opened = [], []
    try:
        for k, s in enumerate(streams):
            if not is_source(s.dataset):
                given = [f for f in _SOURCE_FIELDS if getattr(s, f) is not None]
                if given:
                    raise ArgumentError(
                        f"stream {k}: {'/'.join(given)} are for a stream given as a source "
                        "(a path or URL); this stream's dataset is already open"
                    )
                out.append(s)
                continue
            own = dict(s.options or {})
            bad = sorted(set(own) - allowed)
            if bad:
                raise ArgumentError(
                    f"stream {k}: unknown option(s) {bad}; options are {sorted(allowed)}"
                )
            ds = ParquetDataset(s.dataset, query=s.query, where=s.where, tables=s.tables,
                                **{**options, **own})
            opened.append(ds)
            out.append(dataclasses.replace(s, dataset=ds))
    except BaseException:
        for ds in opened:
            ds.close()
        raise
    if options and not opened:
        raise ArgumentError(
            f"Mixture options {sorted(options)} apply to streams given as sources, and every "
            "stream is an open dataset: pass the options to its ParquetDataset"
        )
    return out, opened


def _units(dataset: Any, chunk: int) -> list[tuple[int, int]]:
    windows = getattr(dataset, "windows", None)
    if windows is not None and all(hasattr(w, "offset") for w in windows):
        return [(w.offset, w.offset + w.rows) for w in windows]
    n = len(dataset)
    return [(a, min(a + chunk, n)) for a in range(0, n, chunk)]


def _fingerprint_of(dataset: Any) -> Any:
    """A stream's part of the mixture's fingerprint: its own, else its type and length.

    Not its ``repr``: a plain object's names its address (another in every process, so a
    state saved in one would be refused in the next) and a list's spells out every item.
    """
    fingerprint = getattr(dataset, "fingerprint", None)
    if fingerprint is not None:
        return fingerprint
    kind = type(dataset)
    return [f"{kind.__module__}.{kind.__qualname__}", len(dataset)]


def take(units: Sequence[tuple[int, int]], count: int, start: int) -> list[tuple[int, int]]:
    """``count`` rows of a source as ranges: whole passes, then a contiguous run from ``start``.

    Args:
        units: The source's ``(start, stop)`` row ranges covering rows ``0..n-1`` in order.
        count: Rows to take (may exceed ``n``: upsampling).
        start: Where the partial pass begins (wrapping around the end).

    Returns:
        Ranges whose sizes add up to ``count``; none empty.
    """
    n = units[-1][1] if units else 0
    if count <= 0 or n == 0:
        return []
    out: list[tuple[int, int]] = []
    full, rest = divmod(count, n)
    for _ in range(full):
        out.extend(u for u in units if u[1] > u[0])
    start %= n
    while rest > 0:
        k = bisect.bisect_right([u[0] for u in units], start) - 1
        b = units[k][1]
        stop = min(b, start + rest)
        if stop > start:
            out.append((start, stop))
        rest -= stop - start
        start = stop % n
    return out


def _check_epoch_rows(what: str, rows: int) -> None:
    """Refuse rows per epoch beyond what an epoch's order can index (int64).

    Checked when the mixture is built: otherwise the sampler refuses it later, as an order
    too large for memory, far from the option that asked for it.
    """
    if rows > MAX_EPOCH_ROWS:
        raise ArgumentError(
            f"{what} makes {rows:.3g} rows per epoch, more than the {MAX_EPOCH_ROWS:,} "
            "(2**63 - 1) an epoch's order can index; give a count of rows a run can read"
        )


class Mixture(Dataset[Any]):
    """A map-style dataset mixing several sources in set proportions per epoch.

    Args:
        streams: The sources, as :class:`Stream`, plain datasets (every row once) or
            sources (paths, URLs) to open.
        epoch_size: Rows per epoch when streams give proportions (default: the sum of the
            sources' lengths).
        chunk: Rows per contiguous unit for sources without windows.
        **options: ``ParquetDataset`` options for the streams given as sources: ``memory``,
            ``storage_options``, ``cache_dir``, ``cache_limit``, ``retries``, ``columns``,
            ``format``, ... (a stream's own ``options`` win).

    Raises:
        ArgumentError: If the streams or their options are inconsistent.
        SourceError: If a source cannot be opened.

    Example:
        >>> mix = Mixture([Stream(code, proportion=0.7), Stream(text, proportion=0.3)])
        >>> sampler = ChunkedSampler(mix, 64, workers=2, shuffle=True)
        >>> remote = Mixture([Stream("s3://b/code/", proportion=0.7, where="len(tokens) < 512"),
        ...                   Stream("s3://b/text/", proportion=0.3)],
        ...                  storage_options={"anon": True}, cache_dir="/scratch/shards")
    """

    def __init__(
        self,
        streams: Sequence[Stream | Any],
        *,
        epoch_size: int | None = None,
        chunk: int = 1024,
        **options: Any,
    ) -> None:
        if not streams or isinstance(streams, str | os.PathLike):
            raise ArgumentError("a Mixture needs a list of streams (at least one)")
        self.streams = [s if isinstance(s, Stream) else Stream(s) for s in streams]
        for k, s in enumerate(self.streams):
            given = [x is not None for x in (s.proportion, s.repeat, s.choose)]
            if sum(given) > 1:
                raise ArgumentError(f"stream {k}: give at most one of proportion, repeat, choose")
            # numpy numbers (weights from a config computed with numpy) count as numbers;
            # bools do not (True would silently weigh 1)
            for name, value in (("proportion", s.proportion), ("repeat", s.repeat)):
                if value is not None and not (
                    is_number(value) and value >= 0 and math.isfinite(value)
                ):
                    raise ArgumentError(f"stream {k}: {name} must be a number >= 0, got {value!r}")
            if s.choose is not None:
                check_int(f"stream {k}: choose", s.choose, 0, say_range=False)
                _check_epoch_rows(f"stream {k}: choose", s.choose)
            if not is_source(s.dataset) and not (
                hasattr(s.dataset, "__len__") and hasattr(s.dataset, "__getitem__")
            ):
                raise ArgumentError(
                    f"stream {k}: {type(s.dataset).__name__} {s.dataset!r:.80} is neither a "
                    "source (a path, URL, glob or list of them) nor a map-style dataset (with "
                    "__len__ and __getitem__)"
                )
        self.streams = [
            dataclasses.replace(
                s,
                proportion=None if s.proportion is None else float(s.proportion),
                repeat=None if s.repeat is None else float(s.repeat),
                choose=None if s.choose is None else int(s.choose),
            )
            for s in self.streams
        ]
        for name, value in (("epoch_size", epoch_size), ("chunk", chunk)):
            if value is not None:
                check_int(name, value, 1 if name == "chunk" else 0, say_range=False)
        epoch_size = None if epoch_size is None else int(epoch_size)
        if epoch_size is not None:
            _check_epoch_rows("epoch_size", epoch_size)
        with_proportion = [s.proportion is not None for s in self.streams]
        if any(with_proportion) and not all(with_proportion):
            raise ArgumentError("either every stream gives a proportion or none does")
        if epoch_size is not None and not all(with_proportion):
            raise ArgumentError("epoch_size= is for streams given by proportion")
        self.streams, self._opened = _open(self.streams, options)
        try:
            lengths = [len(s.dataset) for s in self.streams]
            self.offsets = [0]
            for n in lengths:
                self.offsets.append(self.offsets[-1] + n)
            self.names = [s.name or f"stream{k}" for k, s in enumerate(self.streams)]
            self.counts = self._counts(lengths, epoch_size)
            for k, (n, s, count) in enumerate(zip(lengths, self.streams, self.counts,
                                                  strict=True)):
                if s.repeat is not None:
                    _check_epoch_rows(f"stream {k}: repeat={s.repeat:g} of its {n} rows",
                                      count)
            _check_epoch_rows("the streams' rows per epoch (their sum)", sum(self.counts))
            for k, (n, count) in enumerate(zip(lengths, self.counts, strict=True)):
                if n == 0 and count > 0:  # its rows would be missing from every epoch
                    raise ArgumentError(
                        f"stream {k} ({self.names[k]}) has no rows (an empty dataset, or a "
                        f"view that keeps none), so it cannot give {count} rows per epoch; "
                        "leave it out of the mixture or give it proportion=0"
                    )
            self.chunk = int(chunk)
            self._units = [_units(s.dataset, chunk) for s in self.streams]
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        parts = ", ".join(
            f"{name}: {count} of {self.offsets[k + 1] - self.offsets[k]} rows"
            for k, (name, count) in enumerate(zip(self.names, self.counts, strict=True))
        )
        return f"Mixture([{parts}], epoch={sum(self.counts)} rows)"

    def _counts(self, lengths: list[int], epoch_size: int | None) -> list[int]:
        if all(s.proportion is not None for s in self.streams):
            top = max(s.proportion or 0 for s in self.streams)
            if top <= 0:
                raise ArgumentError("the streams' proportions add up to 0")
            # relative to the largest, so that huge proportions do not add up to inf
            weights = [(s.proportion or 0) / top for s in self.streams]
            total = math.fsum(weights)
            size = sum(lengths) if epoch_size is None else epoch_size
            exact = [size * w / total for w in weights]
            counts = [math.floor(x) for x in exact]
            # hand the rounding remainder to the largest fractions, so counts add up to size
            for k in sorted(range(len(exact)), key=lambda k: counts[k] - exact[k])[
                : size - sum(counts)
            ]:
                counts[k] += 1
            return counts
        out = []
        for s, n in zip(self.streams, lengths, strict=True):
            if s.choose is not None:
                out.append(s.choose)
            elif s.repeat is not None:
                out.append(round(s.repeat * n))
            else:
                out.append(n)
        return out

    @property
    def epoch_size(self) -> int:
        """Rows one epoch visits (with repeats)."""
        return sum(self.counts)

    def epoch_units(self, seed: int, epoch: int) -> list[tuple[int, int]]:
        """The epoch's rows as contiguous ranges of mixture indices, source by source.

        Args:
            seed: The sampler's seed.
            epoch: The epoch.

        Returns:
            Ranges adding up to :attr:`epoch_size` rows; a deterministic function of
            ``(seed, epoch)``.

        Raises:
            ArgumentError: If ``seed`` or ``epoch`` is not an integer >= 0 (numpy's seeding
                would refuse it in its own words).
        """
        seed = check_int("seed", seed, 0)
        epoch = check_int("epoch", epoch, 0)
        out: list[tuple[int, int]] = []
        for k, (units, count) in enumerate(zip(self._units, self.counts, strict=True)):
            n = self.offsets[k + 1] - self.offsets[k]
            start = int(np.random.default_rng([seed, epoch, k]).integers(0, max(n, 1)))
            base = self.offsets[k]
            out.extend((base + a, base + b) for a, b in take(units, count, start))
        return out

    @property
    def units(self) -> list[tuple[int, int]]:
        """Every source's contiguous ranges (windows, or chunks), as mixture indices.

        An epoch's ranges (:meth:`epoch_units`) are cut from these, so a shuffled order is a
        function of them: the sampler's saved state carries their hash.
        """
        return [(base + a, base + b)
                for base, units in zip(self.offsets, self._units, strict=False)
                for a, b in units]

    def source_of(self, index: int) -> tuple[int, int]:
        """``(stream number, index in that stream)`` of a mixture index.

        Args:
            index: A mixture index; negative indices count from the end, as for
                ``ParquetDataset``.

        Raises:
            IndexError: If the index is out of range (the message names the valid range).
            TypeError: If the index is not an integer (a float is never truncated).
        """
        # as ParquetDataset does: int(1.5) would quietly serve row 1
        i = windows.normalize_index(index, self.offsets[-1], noun="mixture", valid_range=True)
        k = bisect.bisect_right(self.offsets, i) - 1
        return k, i - self.offsets[k]

    def locate(self, index: int) -> tuple[str, int]:
        """``(shard path, local row)`` of a mixture index, from its source's ``locate``."""
        k, i = self.source_of(index)
        result: tuple[str, int] = self.streams[k].dataset.locate(i)
        return result

    @property
    def fingerprint(self) -> str:
        """A short hash of the streams (their fingerprints where they have one) and counts."""
        parts = [
            [_fingerprint_of(s.dataset), c, name]
            for s, c, name in zip(self.streams, self.counts, self.names, strict=True)
        ]
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]

    def __len__(self) -> int:
        return self.offsets[-1]

    def close(self) -> None:
        """Close the datasets this mixture opened from sources (not those it was given)."""
        for ds in self._opened:
            ds.close()

    def __getitem__(self, index: int) -> Any:
        k, i = self.source_of(index)
        return self.streams[k].dataset[i]

    def __getitems__(self, indices: Sequence[int]) -> MutableSequence[Any]:
        """Rows for many indices, fetching each source's rows in one batched call."""
        # a 2-d, 0-d or meta tensor: our TypeError, not numpy's or torch's
        where = [self.source_of(i) for i in index_array(indices).tolist()]
        out: list[Any] = [None] * len(where)
        for k in sorted({k for k, _ in where}):
            positions = [p for p, (s, _) in enumerate(where) if s == k]
            local = [where[p][1] for p in positions]
            dataset = self.streams[k].dataset
            rows = (dataset.__getitems__(local) if hasattr(dataset, "__getitems__")
                    else [dataset[i] for i in local])
            for p, row in zip(positions, rows, strict=True):
                out[p] = row
        return out
