"""Child process of test_split_groups' RSS test: peak memory reading large row groups.

``python split_rss_child.py DATA MEMORY MODE [DISK_DIR]`` prints one JSON line: the fixed
footprint (RSS after the same pipeline over a tiny dataset of the same kind), the peak RSS
(the kernel's high-water mark) and peak anonymous RSS (sampled: the disk tier's mapped
files are file-backed and reclaimable, so they are reported apart), the rows checked and
the pyarrow reads. MODE: ``sequential`` (one epoch in order), ``random`` (two epochs of
torch's ``shuffle=True`` with the disk tier) or ``uniform`` (the first batches of
``shuffle=True`` without it: each batch touches most windows).
"""

from __future__ import annotations

import gc
import json
import sys
import tempfile
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import torch
from torch.utils.data import DataLoader

from undertale_duck import ParquetDataset, collate

WIDTH = 16384  # int32 tokens per row: 64 KiB


def table(start: int, stop: int) -> pa.Table:
    """Rows ``start..stop-1``: token ``k`` of row ``i`` is ``(i + k // 512) % 1000``."""
    import numpy as np

    i = np.arange(start, stop, dtype=np.int64)
    tokens = ((i[:, None] + np.arange(WIDTH)[None, :] // 512) % 1000).astype(np.int32)
    offsets = np.arange(0, (stop - start + 1) * WIDTH, WIDTH, dtype=np.int32)
    return pa.table({"i": i, "tokens": pa.ListArray.from_arrays(offsets, tokens.ravel())})


def write(root: Path, shards: int, rows: int, group: int) -> None:
    """``shards`` files of ``rows`` rows in row groups of ``group``."""
    root.mkdir(parents=True, exist_ok=True)
    for k in range(shards):
        pq.write_table(table(k * rows, (k + 1) * rows), root / f"part-{k:03d}.parquet",
                       row_group_size=group)


def status(*keys: str) -> dict[str, int]:
    found = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            name, _, value = line.partition(":")
            if name in keys:
                found[name] = int(value.split()[0]) * 1024
    return found


def check(batch: dict[str, torch.Tensor]) -> int:
    i, tokens = batch["i"], batch["tokens"]
    bad = int((tokens[:, 0] != i % 1000).sum()) + int((tokens[:, -1] != (i + 31) % 1000).sum())
    return bad + int(tokens.shape[1] != WIDTH)


def main() -> None:
    data, memory, mode = Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    disk = {"disk": 4096, "disk_dir": sys.argv[4]} if mode == "random" else {}

    def loader(ds: ParquetDataset, seed: int) -> DataLoader[dict[str, torch.Tensor]]:
        shuffle = mode != "sequential"
        return DataLoader(ds, batch_size=64, shuffle=shuffle, collate_fn=collate,
                          generator=torch.Generator().manual_seed(seed) if shuffle else None)

    with tempfile.TemporaryDirectory() as tmp:  # the footprint: the same pipeline, tiny data
        write(Path(tmp) / "tiny", 2, 128, 128)
        warm = ParquetDataset(Path(tmp) / "tiny", memory=memory, format="torch", **disk)
        for batch in loader(warm, 0):
            check(batch)
        warm.close()
        del warm
    gc.collect()
    ds = ParquetDataset(data, memory=memory, format="torch", **disk)
    footprint = status("VmRSS", "RssAnon")
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # reset the high-water mark
    most_anon = footprint["RssAnon"]
    stop = threading.Event()

    def sample() -> None:
        nonlocal most_anon
        while not stop.wait(0.002):
            most_anon = max(most_anon, status("RssAnon")["RssAnon"])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    rows = bad = 0
    for epoch in range(2 if mode == "random" else 1):
        for k, batch in enumerate(loader(ds, epoch + 1)):
            bad += check(batch)
            rows += len(batch["i"])
            if mode == "uniform" and k == 5:
                break
    stop.set()
    sampler.join()
    direct = ds.reader.direct
    print(json.dumps({
        "footprint": footprint["VmRSS"], "footprint_anon": footprint["RssAnon"],
        "peak": status("VmHWM")["VmHWM"], "peak_anon": most_anon, "rows": rows, "bad": bad,
        "windows": len(ds.windows), "decodes": None if direct is None else direct.stats["streams"],
        "groups": sum(len(s.row_groups) for s in ds.source.shards),
    }))
    ds.close()


if __name__ == "__main__":
    main()
