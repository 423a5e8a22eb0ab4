"""Every ```python and ```bash block of README.md and docs/*.md runs, on data written to match.

The python blocks of a page run in order, as one script, in a fresh working directory that
holds the data the docs name (``data/train`` and friends, the demo's ``build/demo/train``, the
side files the examples read). Bash blocks run one by one with the venv's ``undertale-duck``
first on ``PATH``. Object storage URLs go to the moto S3 server the storage tests use, GPUs
become CPU ranks. A block that cannot run even so says why in an HTML comment right above it,
``<!-- illustrative: reason -->``, and is skipped by name with that reason.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent
_FENCE = re.compile(r"^```(\w*)\s*$")
_ILLUSTRATIVE = re.compile(r"^<!--\s*illustrative:\s*(.+?)\s*-->\s*$")
TIMEOUT = 540

#: The first line of a page's script: it imports ``WATCHDOG_MODULE`` (written beside it).
WATCHDOG = "import _docs_watchdog  # the docs test's: stacks to stderr before its timeout"

#: Every Python process of a page's run prints its threads' stacks to stderr shortly before
#: the test's timeout, so a run that hangs says where: the script's (DDP ranks re-run it)
#: by faulthandler's own thread, and every process forked from one (DataLoader workers) by
#: a timer thread started in the child. A forked child cannot re-arm faulthandler's timer:
#: it would wait forever for the parent's watchdog thread, which fork() did not copy.
WATCHDOG_MODULE = f'''"""The docs test's watchdog (see tests/test_docs.py)."""
import faulthandler
import os
import sys
import threading
import time

AT = time.monotonic() + {TIMEOUT - 30}


def _dump() -> None:
    print(f"--- stacks of process {{os.getpid()}}, forked from {{os.getppid()}}",
          file=sys.stderr, flush=True)
    faulthandler.dump_traceback(file=sys.stderr)


def _arm_in_child() -> None:
    timer = threading.Timer(max(0.0, AT - time.monotonic()), _dump)
    timer.daemon = True
    timer.start()


faulthandler.dump_traceback_later({TIMEOUT - 30}, file=sys.stderr)
os.register_at_fork(after_in_child=_arm_in_child)
'''


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: str
    line: int
    lang: str
    code: str
    illustrative: str | None

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The ```python and ```bash blocks of a page, with the illustrative reason above each."""
    page = path.relative_to(ROOT).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        start, lang = i, match[1]
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            i += 1
        if lang in ("python", "bash"):
            above = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
            reason = _ILLUSTRATIVE.match(above.strip())
            code = "\n".join(lines[start + 1 : i]) + "\n"
            found.append(Block(page, start + 1, lang, code, reason[1] if reason else None))
        i += 1
    return found


ALL = [b for p in PAGES for b in blocks(p)]
PYTHON_PAGES = sorted({b.page for b in ALL if b.lang == "python" and not b.illustrative})
BASH = [b for b in ALL if b.lang == "bash" and not b.illustrative]
ILLUSTRATIVE = [b for b in ALL if b.illustrative]


# --------------------------------------------------------------------------- the data


def tokenized(start: int, stop: int) -> pa.Table:
    """Rows ``start..stop-1`` shaped as the docs describe: id, ragged tokens, mask, label.

    Row ``i`` has id ``fn-{i:06d}``, ``8 + (37 * i) % 600`` tokens (so some are longer than
    512), a mask of ones as long as its tokens, and label ``i % 4``.
    """
    ids, tokens, masks, labels = [], [], [], []
    for i in range(start, stop):
        length = 8 + (37 * i) % 600
        ids.append(f"fn-{i:06d}")
        tokens.append([(i * 7 + t) % 30000 for t in range(length)])
        masks.append([1] * length)
        labels.append(i % 4)
    return pa.table(
        {
            "id": ids,
            "tokens": pa.array(tokens, pa.list_(pa.int32())),
            "mask": pa.array(masks, pa.list_(pa.int8())),
            "label": pa.array(labels, pa.int64()),
        }
    )


def write_dataset(directory: Path, shards: int, rows: int, first: int = 0) -> Path:
    directory.mkdir(parents=True)
    for k in range(shards):
        start = first + k * rows
        pq.write_table(
            tokenized(start, start + rows), directory / f"part-{k:05d}.parquet", row_group_size=250
        )
    return directory


FUNCTIONS = '''\
from typing import Annotated, Literal

from pydantic import Field

from undertale_duck.schema import TokenizedClassificationDataset, Unique


class Functions(TokenizedClassificationDataset):
    id: Annotated[str, Unique, Field(pattern=r"^fn-\\d{6}$")]
    label: Literal[0, 1, 2, 3]
'''


def demo_module() -> Any:
    spec = importlib.util.spec_from_file_location("_docs_demo", ROOT / "examples" / "demo.py")
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    return demo


DATASETS = {"train": (4, 1000, 0), "val": (1, 500, 4000), "code": (2, 500, 10_000),
            "text": (2, 500, 20_000)}


@pytest.fixture(
    scope="session",
    params=["ragged", pytest.param("demo-shaped", marks=pytest.mark.heavy)],
)
def docs_data(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    """Everything the docs' examples read, in one directory.

    ``ragged``: tokens of 8 to 607 ids (data shaped as the README says); ``demo-shaped``: the
    demo's own writer (tokens padded to 32, as ``python3 tasks.py demo`` writes them).
    """
    root = tmp_path_factory.mktemp("docs_data")
    demo = demo_module()
    for name, (shards, rows, first) in DATASETS.items():
        if request.param == "ragged":
            write_dataset(root / "data" / name, shards=shards, rows=rows, first=first)
        else:
            written = demo.write_sample(root / "written" / name, shards=shards, rows=rows)
            (root / "data").mkdir(exist_ok=True)
            written.rename(root / "data" / name)
            shutil.rmtree(root / "written")
    demo.write_sample(root / "build" / "demo")  # exactly what `python3 tasks.py demo` writes
    long = "SELECT id, len(tokens) AS n FROM dataset WHERE len(tokens) > 500 ORDER BY id\n"
    (root / "long.sql").write_text(long)
    (root / "queries").mkdir()
    (root / "queries" / "long.sql").write_text(long)
    (root / "view.sql").write_text(
        "SELECT d.id, d.tokens, n.name FROM dataset d JOIN names n ON d.label = n.label\n"
    )
    (root / "labels.csv").write_text("label,name\n0,add\n1,mul\n2,div\n3,sub\n")
    (root / "schemas.py").write_text(FUNCTIONS)
    (root / "myproject").mkdir()
    (root / "myproject" / "__init__.py").write_text("")
    (root / "myproject" / "schemas.py").write_text(FUNCTIONS)
    return root


def workdir(tmp_path: Path, data: Path) -> Path:
    """A fresh working directory that sees the shared data (by links) and nothing else."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    for entry in data.iterdir():
        (cwd / entry.name).symlink_to(entry)
    return cwd


@pytest.fixture(scope="module")
def s3_env(docs_data: Path) -> Iterator[dict[str, str]]:
    """The moto S3 server holding ``s3://bucket/{tokenized/train,code,text}/``, as env vars."""
    from support.storage_server import S3Server

    server = S3Server()
    server.bucket("bucket")
    server.upload(docs_data / "data" / "train", "s3://bucket/tokenized/train/")
    server.upload(docs_data / "data" / "code", "s3://bucket/code/")
    server.upload(docs_data / "data" / "text", "s3://bucket/text/")
    aws = docs_data / "aws"
    aws.mkdir(exist_ok=True)
    # the profile the storage examples name
    (aws / "credentials").write_text(
        "[default]\naws_access_key_id = testing\naws_secret_access_key = testing\n"
        "[training]\naws_access_key_id = testing\naws_secret_access_key = testing\n"
    )
    (aws / "config").write_text(
        "[default]\nregion = us-east-1\n[profile training]\nregion = us-east-1\n"
    )
    try:
        yield {
            "AWS_ENDPOINT_URL": server.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_SHARED_CREDENTIALS_FILE": str(aws / "credentials"),
            "AWS_CONFIG_FILE": str(aws / "config"),
        }
    finally:
        server.close()


def environment(cwd: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(cwd)  # `--schema myproject.schemas:Functions` imports from here
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def needs_s3(code: str) -> bool:
    return "s3://" in code


def failure(result: subprocess.CompletedProcess[str], where: str) -> str:
    return (
        f"{where} exited {result.returncode}\n"
        f"--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    )


# --------------------------------------------------------------------------- the tests


@pytest.mark.parametrize("page", PYTHON_PAGES)
def test_python_blocks_of_a_page_run_in_order(
    page: str, docs_data: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    runnable = [b for b in ALL if b.page == page and b.lang == "python" and not b.illustrative]
    cwd = workdir(tmp_path, docs_data)
    script: list[str] = [WATCHDOG]
    starts: list[tuple[int, Block]] = []
    for block in runnable:
        script.append(f"# --- {block.name}")
        starts.append((len(script) + 1, block))
        script.extend(block.code.splitlines())
    path = cwd / "page.py"
    path.write_text("\n".join(script) + "\n")
    (cwd / "_docs_watchdog.py").write_text(WATCHDOG_MODULE)
    extra = request.getfixturevalue("s3_env") if needs_s3("".join(script)) else None
    result = run_script(page, [sys.executable, str(path)], cwd, environment(cwd, extra))
    if result.returncode != 0:
        lines = [int(n) for n in re.findall(r'File ".*page\.py", line (\d+)', result.stderr)]
        where = page
        if lines:
            line = lines[-1]
            first, block = max((s for s in starts if s[0] <= line), key=lambda s: s[0])
            where = f"the block at {block.name} (its line {line - first + 1})"
        pytest.fail(failure(result, where))


def run_script(
    name: str, command: list[str], cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """Run a page's script or a block; past ``TIMEOUT`` kill every process it started and fail.

    The command runs in a session of its own, so the processes it started (DDP ranks,
    DataLoader workers, a command line run by a shell block) are killed with it, and the
    failure shows the ends of its output: for a page's Python script, with the stacks its
    first line (``WATCHDOG``) dumps. Its ``TMPDIR`` is a directory removed afterwards, so
    the pages' ``tempfile`` examples leave nothing in the machine's temporary directory; a
    short one (under it, not the test's ``tmp_path``): the AF_UNIX sockets that
    multiprocessing makes there have paths of at most 107 bytes. Ray keeps its usual one.
    """
    scratch = tempfile.mkdtemp(prefix="ud-docs-")
    env = {**env, "TMPDIR": scratch, "RAY_TMPDIR": env.get("RAY_TMPDIR", tempfile.gettempdir())}
    try:
        with subprocess.Popen(
            command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, start_new_session=True,
        ) as process:
            try:
                out, err = process.communicate(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                out, err = process.communicate()
                # the whole output, kept with the test's tmp_path (pytest keeps the last
                # three runs' directories): a worker's error can come long before the stacks
                (cwd.parent / "stdout.txt").write_text(out)
                (cwd.parent / "stderr.txt").write_text(err)
                pytest.fail(
                    f"{name} ran past {TIMEOUT} s; every process of its session was killed. "
                    f"A Python page's threads' stacks at {TIMEOUT - 30} s are in stderr. "
                    f"Whole output: {cwd.parent}/stdout.txt and stderr.txt.\n"
                    f"--- stdout (end)\n{out[-4000:]}\n--- stderr (start)\n{err[:8000]}\n"
                    f"--- stderr (end)\n{err[-20000:]}"
                )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


@pytest.mark.parametrize("block", BASH, ids=[b.name for b in BASH])
def test_bash_block_runs(
    block: Block, docs_data: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    cwd = workdir(tmp_path, docs_data)
    extra = request.getfixturevalue("s3_env") if needs_s3(block.code) else None
    result = run_script(
        block.name, ["bash", "-e", "-o", "pipefail", "-c", block.code], cwd,
        environment(cwd, extra),
    )
    assert result.returncode == 0, failure(result, block.name)


@pytest.mark.parametrize("block", ILLUSTRATIVE, ids=[b.name for b in ILLUSTRATIVE])
def test_illustrative_block(block: Block) -> None:
    pytest.skip(f"{block.name} is illustrative: {block.illustrative}")


def test_every_page_has_its_blocks_found() -> None:
    # a fence the parser missed would silently escape the tests above
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        fences = len(re.findall(r"^```(?:python|bash)\s*$", text, flags=re.MULTILINE))
        assert fences == len(blocks(page)), page


# --------------------------------------------------------------------------- signatures

_HEADING = re.compile(r"^#{2,4} `(?P<name>\w+)\((?P<args>.*)\)`\s*$", re.MULTILINE)


def documented_signatures() -> list[tuple[str, str, str]]:
    found = []
    for page in PAGES:
        for match in _HEADING.finditer(page.read_text(encoding="utf-8")):
            found.append((page.relative_to(ROOT).as_posix(), match["name"], match["args"]))
    return found


NONE = inspect.Parameter.empty


def parameters(args: str) -> list[tuple[str, str, object]]:
    """``a, b=1, *, c=None, **options`` -> [(name, kind, default)], kind positional/keyword/var."""
    out: list[tuple[str, str, object]] = []
    keyword = False
    depth = 0
    parts, current = [], ""
    for ch in args:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    for part in (p.strip() for p in parts if p.strip()):
        if part == "*":
            keyword = True
        elif part.startswith("**"):
            out.append((part[2:], "var", NONE))
        else:
            name, _, default = part.partition("=")
            value = ast.literal_eval(default.strip()) if default else NONE
            out.append((name.strip(), "keyword" if keyword else "positional", value))
    return out


def actual(name: str) -> Any:
    import undertale_duck

    return getattr(undertale_duck, name)


@pytest.mark.parametrize(
    ("page", "name", "args"), documented_signatures(), ids=lambda v: str(v)[:40]
)
def test_documented_signature_matches_the_code(page: str, name: str, args: str) -> None:
    signature = inspect.signature(actual(name))
    real = [
        (
            p.name,
            "var"
            if p.kind is p.VAR_KEYWORD
            else "keyword"
            if p.kind is p.KEYWORD_ONLY
            else "positional",
            p.default,
        )
        for p in signature.parameters.values()
        if p.name != "self"
    ]
    documented = parameters(args)
    has_var = any(kind == "var" for _, kind, _ in documented)
    if has_var:
        # `**options` stands for the keyword-only tail: the named ones must still be right
        named = [p for p in documented if p[1] != "var"]
        assert real[: len(named)] == named, f"{page}: {name}{signature}"
    else:
        assert documented == real, f"{page}: documented {name}({args}), code {name}{signature}"


def test_signatures_are_documented() -> None:
    names = {name for _, name, _ in documented_signatures()}
    assert {"ParquetDataset", "load", "ChunkedSampler", "DataModule"} <= names


def test_builtin_schema_table_lists_each_schemas_columns() -> None:
    from undertale_duck.validation.schemas import BUILTIN

    text = (ROOT / "docs" / "validation.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `(\w+)` \| (.+) \|$", text, flags=re.MULTILINE))
    for name, schema in BUILTIN.items():
        assert name in rows, f"docs/validation.md: no row for {name}"
        documented = set(re.findall(r"`(\w+):", rows[name]))
        assert documented == set(schema.model_fields), name


# --------------------------------------------------------------------------- links, records

_LINK = re.compile(r"\]\((?!https?://|#|mailto:)([^)\s]+)\)")


def test_relative_links_resolve() -> None:
    pages = [*PAGES, ROOT / "DESIGN.md", *sorted((ROOT / "docs" / "decisions").glob("*.md"))]
    pages.append(ROOT / "benchmarks" / "results" / "notes.md")
    for page in pages:
        for target in _LINK.findall(page.read_text(encoding="utf-8")):
            path = (page.parent / target.split("#")[0]).resolve()
            assert path.exists(), f"{page.relative_to(ROOT)} links to {target}, which is missing"


def test_decision_records_have_context_decision_and_consequence() -> None:
    # lasting decisions live in docs/decisions/, raw figures in benchmarks/results/
    assert not (ROOT / "NOTES.md").exists()
    records = sorted((ROOT / "docs" / "decisions").glob("[0-9][0-9][0-9][0-9]-*.md"))
    assert records
    index = (ROOT / "docs" / "decisions" / "README.md").read_text(encoding="utf-8")
    for number, record in enumerate(records, start=1):
        assert record.name.startswith(f"{number:04d}-"), record.name  # numbered without gaps
        text = record.read_text(encoding="utf-8")
        for part in ("**Context.**", "**Decision.**", "**Measured consequence.**"):
            assert part in text, f"{record.name}: no {part}"
        assert f"({record.name})" in index, f"docs/decisions/README.md does not list {record.name}"
