"""Run by the storage tests in a child process: read a remote dataset, print what happened as JSON.

Usage: ``python storage_child.py '<json arguments>'``. Prints ``ready``, waits for the file
``go`` to exist (so several children start their reads together), then one JSON line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

# run as a script: put tests/ on the path so the support package imports
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from support import datagen


def _wait(go: str) -> None:
    print("ready", flush=True)
    deadline = time.monotonic() + 120
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.002)


def main(args: dict[str, Any]) -> dict[str, Any]:
    from undertale_duck import ParquetDataset

    ds = ParquetDataset(
        args["url"],
        memory=64,
        storage_options=args.get("options"),
        cache_dir=args["cache"],
        cache_limit=args.get("limit"),
        read_ahead=False,
    )
    mode = args["mode"]
    if mode == "pin":  # hold one shard (downloading it first); the test kills us meanwhile
        _wait(args["go"])
        with ds.source.shards[args["shard"]].local():
            time.sleep(120)
        return {}
    if mode == "rows":
        _wait(args["go"])
        indices = list(range(len(ds)))
        bad = [i for i in indices if ds[i] != datagen.row(i)]
        return {"bad": bad, "rows": len(indices), "stats": _stats(ds)}
    if mode == "ddp":
        return _ddp(args, ds)
    raise SystemExit(f"unknown mode {mode}")


def _ddp(args: dict[str, Any], ds: Any) -> dict[str, Any]:
    """One rank of a two-rank torch.distributed (gloo) job reading two shuffled epochs."""
    import torch.distributed as dist

    from undertale_duck import load

    dist.init_process_group(
        "gloo", init_method=args["init"], rank=args["rank"], world_size=args["world"]
    )
    try:
        _wait(args["go"])
        loader = load(ds, None, None, batch=8, workers=args.get("workers", 0), shuffle=True,
                      seed=3)
        epochs = []
        for epoch in range(2):
            loader.chunked_sampler.set_epoch(epoch)
            ids = []
            for batch in loader:
                for row in batch:
                    index = int(row["id"].split("-")[1])
                    if row != datagen.row(index):
                        raise AssertionError(f"row {index} differs")
                    ids.append(index)
            epochs.append(ids)
        dist.barrier()
        return {"epochs": epochs, "stats": _stats(ds)}
    finally:
        dist.destroy_process_group()


def _stats(ds: Any) -> dict[str, int]:
    return dataclasses.asdict(ds.source.store.cache.stats)


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))), flush=True)
