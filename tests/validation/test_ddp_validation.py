"""``load()`` under torch.distributed: every rank scans a share, every rank gets the one report."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from support import planted

from undertale_duck.validation import runner

#: Shard sizes and layouts of the failing dataset: drift, planted violations, duplicates.
SIZES = [40, 25, 1, 30, 20, 18, 12]
DRIFTS = ["plain", "plain", "plain", "label32", "no_tag", "label_text", "extra"]


class Loose(BaseModel):
    """A schema the planted rows conform to (no uniqueness, no ranges)."""

    id: int
    label: int | None = None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stats() -> dict[str, int]:
    from undertale_duck.validation import verdicts

    return dict(verdicts.stats().__dict__)


def _rank(rank: int, port: int, failing: str, passing: str, out: str, cache: str) -> None:
    """One rank: load() a failing dataset, a passing one twice, and a view of it."""
    import torch.distributed as dist

    from undertale_duck import SchemaError, load
    from undertale_duck.core.runtime import CACHE_ENV

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), **{CACHE_ENV: cache})
    dist.init_process_group("gloo", rank=rank, world_size=2)
    result: dict[str, Any] = {}
    try:
        try:
            load(failing, planted.Planted, None, 8)
            result["failing"] = "passed"
        except SchemaError as exc:
            result["failing"] = {"error": str(exc), "report": exc.report.model_dump(mode="json")}
        result["fail"] = _stats()
        load(passing, Loose, None, 8)
        result["pass"] = _stats()
        load(passing, Loose, None, 8)  # rank 0 has the verdict on record: nobody scans
        result["again"] = _stats()
        load(passing, Loose, None, 8, where="label > 1")  # a view: rank 0 validates it
        result["view"] = _stats()
    finally:
        dist.destroy_process_group()
    Path(out, f"rank-{rank}.json").write_text(json.dumps(result))


@pytest.mark.heavy
def test_every_rank_validates_a_share_and_ends_with_the_one_report(
    tmp_path: Path,
) -> None:
    import torch.multiprocessing as mp

    failing, passing = tmp_path / "failing", tmp_path / "passing"
    planted.write(failing, SIZES, DRIFTS)
    planted.write(passing, [30, 20, 25])
    cache = tmp_path / "cache"
    mp.spawn(_rank, args=(_free_port(), str(failing), str(passing), str(tmp_path), str(cache)),
             nprocs=2, join=True)
    zero, one = (json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in (0, 1))
    # the failing dataset: our SchemaError on every rank, with the same report
    assert zero["failing"] != "passed" and zero["failing"] == one["failing"]
    assert zero["failing"]["error"].startswith("dataset does not conform")
    got = zero["failing"]["report"]
    got.pop("seconds")
    alone = runner.report_for(failing, planted.Planted)
    want = json.loads(json.dumps(planted.dump(alone), default=str))
    assert got == want
    assert {c["check"] for c in got["checks"] if not c["passed"]} >= {"unique", "shard_schema"}
    # both ranks scanned (a share each), no rank waited for another's verdict
    for stats in (zero["fail"], one["fail"]):
        assert stats == {"scans": 1, "reused": 0, "shared": 0, "together": 1}
    # a passing dataset: scanned together once, then reused from rank 0's record
    assert zero["pass"]["together"] == one["pass"]["together"] == 2
    assert zero["again"]["reused"] == 1 and zero["again"]["scans"] == 2
    assert one["again"]["shared"] == 1 and one["again"]["scans"] == 2
    # a view (side tables live in each process): rank 0 validates, rank 1 takes its verdict
    assert zero["view"]["scans"] == 3 and zero["view"]["together"] == 2
    assert one["view"]["scans"] == 2 and one["view"]["shared"] == 2
    assert len(list((cache / "verdicts").glob("*.json"))) == 2  # the dataset's, the view's
