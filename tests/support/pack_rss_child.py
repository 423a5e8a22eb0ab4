"""Child process of test_pack_acceptance's RSS test: peak memory packing a large dataset.

``python pack_rss_child.py DATA MEMORY LENGTH`` opens ``DATA`` packed into blocks of
``LENGTH`` tokens under ``memory=MEMORY`` (MiB), which runs the indexing pass, then serves
one shuffled epoch through a DataLoader and checks every block (with a fourth argument
``rows``: the same shuffled epoch over the unpacked rows, for comparison). It prints one
JSON line: the fixed footprint (RSS after the same pipeline over a tiny dataset), the peak
RSS after the open (``indexed``) and at the end (the kernel's high-water mark, reset after
the footprint), the blocks served and the bad ones.

The stream's token at position ``p`` is ``p % MODULUS`` (no end-of-document token), so
block ``k`` is ``(k * LENGTH + arange(LENGTH)) % MODULUS`` whatever the documents' lengths.
"""

from __future__ import annotations

import gc
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from torch.utils.data import DataLoader

from undertale_duck import ChunkedSampler, Pack, ParquetDataset, collate

MODULUS = 30_011
BATCH = 32


def write(root: Path, shards: int, documents: int, longest: int, group: int) -> int:
    """``shards`` files of ``documents`` documents of 1..``longest`` tokens; the tokens."""
    root.mkdir(parents=True, exist_ok=True)
    at = 0
    for k in range(shards):
        g = np.arange(k * documents, (k + 1) * documents, dtype=np.int64)
        lengths = (g * 2654435761) % longest + 1
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        values = ((at + np.arange(int(offsets[-1]), dtype=np.int64)) % MODULUS).astype(np.int32)
        at += int(offsets[-1])
        tokens = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values))
        table = pa.table({"id": g, "tokens": tokens.cast(pa.list_(pa.int32()))})
        pq.write_table(table, root / f"part-{k:03d}.parquet", row_group_size=group)
    return at


def status(*keys: str) -> dict[str, int]:
    found = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            name, _, value = line.partition(":")
            if name in keys:
                found[name] = int(value.split()[0]) * 1024
    return found


def epoch(ds: ParquetDataset, length: int) -> tuple[int, int]:
    """Blocks served in one shuffled epoch, and how many differ from the rule."""
    sampler = ChunkedSampler(ds, BATCH, workers=0, shuffle=True, seed=0, drop_last=False)
    loader = DataLoader(ds, batch_size=BATCH, sampler=sampler, collate_fn=collate)
    order = torch.as_tensor(np.asarray(sampler.order()), dtype=torch.int64)
    ramp = torch.arange(length, dtype=torch.int64)
    blocks = bad = 0
    for batch in loader:
        index = order[blocks : blocks + len(batch["tokens"])]
        expected = (index[:, None] * length + ramp[None, :]) % MODULUS
        bad += int((batch["tokens"].to(torch.int64) != expected).any(dim=1).sum())
        blocks += len(batch["tokens"])
    return blocks, bad


def rows_epoch(ds: ParquetDataset, length: int) -> tuple[int, int]:
    """The unpacked rows' shuffled epoch (``__getitems__``, one tensor per row): rows, 0."""
    del length
    sampler = ChunkedSampler(ds, BATCH, workers=0, shuffle=True, seed=0, drop_last=False)
    # the order alone, not a pass over the sampler: a pass declares its rows, so its small
    # batches are gathered a few at a time (13-20 MiB less peak here, which blocks cannot
    # do); the reference stays what the packed bound was set against, each batch by itself
    order = sampler.order().tolist()
    for start in range(0, len(order), BATCH):
        ds.__getitems__(order[start : start + BATCH])
    return len(order), 0


def main() -> None:
    data, memory, length = Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    if sys.argv[4:] == ["rows"]:  # the same epoch over the unpacked rows, for comparison
        global epoch
        epoch = rows_epoch  # type: ignore[assignment]
        spec = None
    else:
        spec = Pack(column="tokens", length=length)
    with tempfile.TemporaryDirectory() as tmp:  # the footprint: the same pipeline, tiny data
        write(Path(tmp) / "tiny", 2, 64, 64, 16)
        warm = ParquetDataset(Path(tmp) / "tiny", memory=memory, pack=spec, format="torch",
                              columns=["tokens"])
        epoch(warm, length)
        warm.close()
        del warm
    gc.collect()
    footprint = status("VmRSS")["VmRSS"]
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # reset the high-water mark
    ds = ParquetDataset(data, memory=memory, pack=spec, format="torch",
                        columns=["tokens"])  # with pack=: the indexing pass
    indexed = status("VmHWM")["VmHWM"]
    blocks, bad = epoch(ds, length)
    print(json.dumps({
        "footprint": footprint, "indexed": indexed, "peak": status("VmHWM")["VmHWM"],
        "blocks": blocks, "bad": bad, "length": len(ds), "memory_bytes": ds.memory_bytes,
    }))
    ds.close()


if __name__ == "__main__":
    main()
