"""Every code block of docs/packing.md runs, in order, on the data its first block writes."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "packing.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def blocks(kind: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(DOC.read_text()) if lang == kind]


def test_python_and_shell_blocks_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    python = blocks("python")
    assert len(python) >= 6
    namespace: dict[str, object] = {"__name__": "docs_packing"}
    for k, body in enumerate(python):
        exec(compile(body, f"{DOC.name}[python block {k}]", "exec"), namespace)
    cli = Path(sys.executable).with_name("undertale-duck")
    env = {**os.environ, "PATH": f"{cli.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    lines = [line for body in blocks("sh") for line in body.splitlines() if line.strip()]
    assert lines
    for line in lines:
        done = subprocess.run(shlex.split(line), cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300, check=False)
        assert done.returncode == 0, (line, done.stderr)
        assert done.stdout
