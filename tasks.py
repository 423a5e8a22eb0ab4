#!/usr/bin/env python3
"""Project tasks that need only Python 3.11 and pip: ``demo``, ``test``, ``quick``, ``bench``.

Usage:
    python3 tasks.py demo     # venv + install + write a sample sharded dataset + read it
    python3 tasks.py test     # venv + test deps + ruff + mypy + the whole pytest suite
    python3 tasks.py quick    # the suite without heavy and slow cases, under 5 minutes
    python3 tasks.py slow     # run the suite and rewrite tests/slow.txt from its timings
    python3 tasks.py bench    # run the benchmarks in benchmarks/
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("UNDERTALE_DUCK_VENV", ROOT / ".venv"))
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"
CONSTRAINTS = ROOT / "ci" / "constraints.txt"
REPORT = ROOT / "build" / "test-report.xml"
LINTED = ("undertale_duck", "tests", "benchmarks", "examples", "tasks.py")


def run(*args: str | Path, **env: str) -> None:
    """Run a command from the repository root, echoing it; exit with its status on failure."""
    print("+", " ".join(str(a) for a in args), flush=True)
    result = subprocess.run([str(a) for a in args], cwd=ROOT, env={**os.environ, **env})
    if result.returncode != 0:
        sys.exit(result.returncode)


def ensure_venv(extra: str) -> None:
    """Create .venv and install the package (with ``extra``) when its inputs changed."""
    if not PY.exists():
        print(f"+ creating virtual environment {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    digest = hashlib.sha256()
    for name in ("pyproject.toml", "ci/constraints.txt"):
        digest.update((ROOT / name).read_bytes())
    digest.update(extra.encode())
    stamp = VENV / f".installed-{extra or 'base'}"
    if stamp.exists() and stamp.read_text() == digest.hexdigest():
        return
    target = f".[{extra}]" if extra else "."
    run(PY, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    run(PY, "-m", "pip", "install", "--quiet", "-c", CONSTRAINTS, "-e", target)
    stamp.write_text(digest.hexdigest())


def demo() -> None:
    """Install the package and run examples/demo.py on a freshly written sample dataset."""
    ensure_venv("")
    run(PY, "examples/demo.py", "--out", "build/demo")
    cli = BIN / ("undertale-duck.exe" if os.name == "nt" else "undertale-duck")
    query = (
        "SELECT label, count(*) AS n, avg(list_sum(mask)) AS mean_length "
        "FROM dataset GROUP BY label ORDER BY label"
    )
    run(cli, "sql", "build/demo/train", query, "--format", "table")
    run(cli, "describe", "build/demo/train")
    where = os.path.relpath(VENV)
    activate = os.path.join(where, "Scripts" if os.name == "nt" else "bin", "activate")
    print(
        f"\nThe package is installed in {where}. Use its Python as {os.path.relpath(PY)}, or "
        f"activate it (source {activate}) to get python and undertale-duck on your PATH; the "
        "sample dataset is build/demo/train (see README.md).",
        flush=True,
    )


def test(marker: str | None = None) -> None:
    """Install test dependencies and run ruff, mypy and pytest."""
    ensure_venv("test")
    lint = [p for p in LINTED if (ROOT / p).exists()]
    run(PY, "-m", "ruff", "check", *lint)
    run(PY, "-m", "mypy")
    # the 15 slowest tests, every run; every case's time in build/ for `tasks.py slow`
    args = ["-m", "pytest", "-q", "--durations=15", f"--junitxml={REPORT}"]
    workers = test_workers()
    if workers > 1:
        # a module's tests stay in one process, so its servers and fixtures start once
        args += ["-n", str(workers), "--dist", "loadfile"]
    if marker:
        args += ["-m", marker]
    run(PY, *args)


SLOW_S = 1.5  # a case over this many seconds on a quiet 2-core machine is "slow"


def slow() -> None:
    """Run the suite (heavy cases apart) and list in tests/slow.txt each case over SLOW_S."""
    import xml.etree.ElementTree as ET

    test("not heavy")
    slow_ids = sorted(
        f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
        for case in ET.parse(REPORT).getroot().iter("testcase")
        if float(case.get("time") or 0) > SLOW_S
    )
    listing = ROOT / "tests" / "slow.txt"
    header = [line for line in listing.read_text().splitlines() if line.startswith("#")]
    listing.write_text("\n".join([*header, *slow_ids]) + "\n")
    print(f"{len(slow_ids)} cases over {SLOW_S} s listed in {listing.relative_to(ROOT)}")


def test_workers() -> int:
    """Processes pytest runs the suite in: one per core up to 4, or $UNDERTALE_DUCK_TEST_WORKERS."""
    given = os.environ.get("UNDERTALE_DUCK_TEST_WORKERS", "")
    if given.strip():
        return max(1, int(given))
    return max(1, min(os.cpu_count() or 1, 4))


def bench() -> None:
    """Run every benchmark script's main() with its default (small) sweep."""
    ensure_venv("test")
    for script in sorted((ROOT / "benchmarks").glob("bench_*.py")):
        run(PY, script)


def main() -> None:
    """Dispatch the task named on the command line."""
    task = sys.argv[1] if len(sys.argv) > 1 else ""
    if task == "demo":
        demo()
    elif task == "test":
        test()
    elif task == "quick":
        test("not heavy and not slow")
    elif task == "slow":
        slow()
    elif task == "bench":
        bench()
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
