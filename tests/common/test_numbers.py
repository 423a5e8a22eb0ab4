"""One integer check for every count, seed and size argument: numpy integers yes, bools no."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from support import datagen

from undertale_duck import (
    ArgumentError,
    ChunkedSampler,
    Mixture,
    Pack,
    ParquetDataset,
    Split,
    Stream,
)
from undertale_duck.common.numbers import check_int, is_integer, is_number


def test_integers_and_numbers() -> None:
    for yes in (0, 7, -3, np.int8(1), np.uint64(2**64 - 1), np.int64(-1)):
        assert is_integer(yes) and is_number(yes)
    for no in (True, False, np.bool_(True), 1.0, np.float32(1), "1", None):
        assert not is_integer(no)
    assert is_number(0.5) and is_number(np.float16(0.5))
    assert not is_number(True) and not is_number(np.bool_(False)) and not is_number("0.5")


def test_check_int_messages() -> None:
    assert check_int("batch", np.int32(4), 1) == 4 and type(check_int("x", np.uint8(3), 0)) is int
    with pytest.raises(ArgumentError, match=re.escape("batch must be an integer >= 1, got True")):
        check_int("batch", True, 1)
    with pytest.raises(ArgumentError, match=re.escape("batch must be >= 1, got 0")):
        check_int("batch", 0, 1)
    with pytest.raises(ArgumentError, match=re.escape("chunk must be an integer >= 1, got 0")):
        check_int("chunk", 0, 1, say_range=False)


def test_every_caller_keeps_its_message(tmp_path: Path) -> None:
    datagen.write_shards(tmp_path / "d", [40], row_group_size=16)
    ds = ParquetDataset(tmp_path / "d")
    cases = [
        (lambda: ChunkedSampler(ds, 0, 0), "batch must be >= 1, got 0"),
        (lambda: ChunkedSampler(ds, 4, 0, seed=np.bool_(True)),  # type: ignore[arg-type]
         "seed must be an integer >= 0, got np.True_"),
        (lambda: Mixture([ds], chunk=0), "chunk must be an integer >= 1, got 0"),
        (lambda: Mixture([ds], epoch_size=True), "epoch_size must be an integer >= 0, got True"),
        (lambda: Mixture([Stream(ds, choose=-1)]),
         "stream 0: choose must be an integer >= 0, got -1"),
        (lambda: Mixture([Stream(ds, repeat=True)]),  # type: ignore[arg-type]
         "stream 0: repeat must be a number >= 0, got True"),
        (lambda: Split("id", 0.5, seed=-1), "split.seed must be an integer >= 0, got -1"),
        (lambda: Split("id", np.bool_(True)),  # type: ignore[arg-type]
         "split.fraction must be a number strictly between 0 and 1, got np.True_"),
        (lambda: Pack(column="tokens", length=True),  # type: ignore[arg-type]
         "must be an integer, got True"),
    ]
    for make, message in cases:
        with pytest.raises(ArgumentError, match=re.escape(message)):
            make()
    # numpy integers are taken, as Python ints
    mix = Mixture([Stream(ds, choose=np.int64(5))], chunk=np.int32(8))
    assert mix.counts == [5] and mix.chunk == 8
    assert Split("id", np.float32(0.25), seed=np.uint16(3)).seed == 3
