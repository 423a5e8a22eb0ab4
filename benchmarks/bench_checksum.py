"""The cost of the checksums that guard cached files (disk-tier windows, shard copies).

Run ``python benchmarks/bench_checksum.py [--mib N]``. Times XXH3-64 (``xxhash``, what the
caches use), CRC-32 (zlib, what they used before), BLAKE2b and SHA-256 over an in-memory
buffer, and XXH3 and CRC-32 over a file read in 1 MiB steps (as
:func:`shard_cache.file_xxh3` does), and writes ``benchmarks/results/checksum.md``.
A check runs once per file and process: a window file when it is first mapped, a shard copy
when a process first uses it.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import xxhash

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
        "xxhash.xxh3_64 (used)": lambda: xxhash.xxh3_64_intdigest(data),
        "zlib.crc32 (used before)": lambda: zlib.crc32(data),
        "hashlib.blake2b": lambda: hashlib.blake2b(data).digest(),
        "hashlib.sha256": lambda: hashlib.sha256(data).digest(),
    }
    rows = []
    for name, fn in hashes.items():
        seconds = _best(fn)
        rows.append((name, args.mib / seconds))
    from undertale_duck.core.source.remote.shard_cache import file_crc32, file_xxh3

    with tempfile.NamedTemporaryFile() as fh:
        fh.write(data)
        fh.flush()
        readers: dict[str, Callable[[str], int]] = {
            "file_xxh3": file_xxh3, "file_crc32": file_crc32}
        for name, read in readers.items():
            seconds = _best(functools.partial(read, fh.name))
            rows.append((f"{name} (file in page cache)", args.mib / seconds))
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
