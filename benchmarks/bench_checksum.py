"""The cost of the checksums that guard cached files (disk-tier windows, shard copies).

Run ``python benchmarks/bench_checksum.py [--mib N]``. Times CRC-32 (zlib, what the caches
use), BLAKE2b and SHA-256 over an in-memory buffer and over a file read in 1 MiB steps
(as :func:`shard_cache.file_crc32` does), and writes ``benchmarks/results/checksum.md``.
A check runs once per file and process: a window file when it is first mapped, a shard copy
when a process first uses it.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "checksum.md"


def _best(fn: Callable[[], object], repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    """Measure and write the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mib", type=int, default=256, help="bytes checked, in MiB")
    args = parser.parse_args()
    data = os.urandom(args.mib << 20)
    hashes: dict[str, Callable[[], object]] = {
        "zlib.crc32 (used)": lambda: zlib.crc32(data),
        "hashlib.blake2b": lambda: hashlib.blake2b(data).digest(),
        "hashlib.sha256": lambda: hashlib.sha256(data).digest(),
    }
    rows = []
    for name, fn in hashes.items():
        seconds = _best(fn)
        rows.append((name, args.mib / seconds))
    from undertale_duck.core.source.remote.shard_cache import file_crc32

    with tempfile.NamedTemporaryFile() as fh:
        fh.write(data)
        fh.flush()
        seconds = _best(lambda: file_crc32(fh.name))
    rows.append(("file_crc32 (file in page cache)", args.mib / seconds))
    lines = [
        "# Checksum cost",
        "",
        f"{args.mib} MiB, best of 3, one core (`python benchmarks/bench_checksum.py`).",
        "",
        "| checksum | MiB/s | a 64 MiB window | a 1 GiB shard copy |",
        "|---|---:|---:|---:|",
    ]
    for name, rate in rows:
        lines.append(f"| {name} | {rate:.0f} | {64 / rate * 1000:.0f} ms | {1024 / rate:.2f} s |")
    text = "\n".join(lines) + "\n"
    RESULTS.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
