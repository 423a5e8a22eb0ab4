"""Demo: write a small sharded dataset and read it through undertale_duck.

Run with ``python3 tasks.py demo`` (which creates .venv and installs the package first).
"""

from __future__ import annotations

import argparse
import random
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from undertale_duck import ParquetDataset

TOKENS = 32


def write_sample(out: Path, shards: int = 4, rows: int = 2500) -> Path:
    """Write ``shards`` Parquet files of tokenized rows (id, tokens, mask, label)."""
    data = out / "train"
    if data.exists():
        shutil.rmtree(data)
    data.mkdir(parents=True)
    rng = random.Random(0)
    for k in range(shards):
        ids, tokens, masks, labels = [], [], [], []
        for j in range(rows):
            i = k * rows + j
            length = rng.randrange(4, TOKENS + 1)
            ids.append(f"fn-{i:06d}")
            tokens.append([(i * 7 + t) % 30000 for t in range(length)] + [0] * (TOKENS - length))
            masks.append([1] * length + [0] * (TOKENS - length))
            labels.append(i % 4)
        table = pa.table(
            {
                "id": ids,
                "tokens": pa.array(tokens, pa.list_(pa.int32())),
                "mask": pa.array(masks, pa.list_(pa.int8())),
                "label": pa.array(labels, pa.int64()),
            }
        )
        pq.write_table(table, data / f"part-{k:05d}.parquet", row_group_size=500)
    (data / "_SUCCESS").write_text("")
    return data


def validation_demo(data: Path, out: Path) -> None:
    """Validate the sample against a built-in schema, then a copy with planted problems."""
    from undertale_duck import SchemaError
    from undertale_duck.schema import TokenizedClassificationDataset
    from undertale_duck.validation.render import render
    from undertale_duck.validation.runner import report_for

    ds = ParquetDataset(data, memory=64)
    ds.validate(TokenizedClassificationDataset)  # raises SchemaError if any check fails
    print(f"\n== validate: {ds.report(TokenizedClassificationDataset).summary()}")

    # a copy whose LAST shard has problems: two null labels, a duplicated id, text tokens
    planted = out / "planted"
    if planted.exists():
        shutil.rmtree(planted)
    shutil.copytree(data, planted)
    last = sorted(planted.glob("*.parquet"))[-1]
    rows = pq.read_table(last).to_pylist()
    rows[10]["label"] = rows[20]["label"] = None
    rows[30]["id"] = rows[0]["id"]
    table = pa.Table.from_pylist(rows).set_column(
        1, "tokens", pa.array([str(r["tokens"]) for r in rows], pa.string())
    )
    pq.write_table(table, last)
    try:
        ParquetDataset(planted).validate(TokenizedClassificationDataset)
    except SchemaError as exc:  # exc.report holds the full ValidationReport
        print(f"\n== validate the planted copy: SchemaError\n{exc}")
    report = report_for(planted, TokenizedClassificationDataset)
    print(f"\n== validation report (text)\n{render(report, 'text')}")
    page = out / "validation.html"
    page.write_text(render(report, "html"), encoding="utf-8")
    print(f"HTML report: {page}   (CLI: undertale-duck validate {planted} "
          "--schema TokenizedClassificationDataset --format html)")


def lightning_demo(data: Path) -> None:
    """Show the sampler's order, ``load()``, and a tiny Lightning fit through the DataModule."""
    import logging
    import warnings

    import lightning
    import torch

    from undertale_duck import ChunkedSampler, DataModule, load

    ds = ParquetDataset(data, memory=64)
    print("\n== ChunkedSampler: 2 ranks x 2 workers, batch 4 (first 12 indices of each rank)")
    for rank in range(2):
        order = list(ChunkedSampler(ds, batch=4, workers=2, ranks=2, rank=rank))
        print(f"rank {rank}: {order[:12]} ... ({len(order)} indices)")
    shuffled = ChunkedSampler(ds, batch=4, workers=2, ranks=2, rank=0, shuffle=True, mix=2)
    print(f"shuffled rank 0, epoch 0: {list(shuffled)[:8]} ...")

    def collate(rows: list[dict[str, object]]) -> dict[str, torch.Tensor]:
        return {
            "tokens": torch.tensor([r["tokens"] for r in rows]),
            "label": torch.tensor([r["label"] for r in rows]),
        }

    loader = load(data, None, collate, batch=256, workers=2, memory=64, shuffle=True)
    batch = next(iter(loader))
    print(f"\n== load(): batches of {tuple(batch['tokens'].shape)} token tensors")

    class Classifier(lightning.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.EmbeddingBag(30000, 16)
            self.head = torch.nn.Linear(16, 4)
            self.losses: list[float] = []

        def training_step(self, batch: dict[str, torch.Tensor], index: int) -> torch.Tensor:
            logits = self.head(self.embed(batch["tokens"]))
            loss = torch.nn.functional.cross_entropy(logits, batch["label"])
            self.losses.append(float(loss.detach()))
            return loss

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.Adam(self.parameters(), lr=0.05)

    logging.getLogger("lightning").setLevel(logging.WARNING)
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", module="lightning")
    dm = DataModule(data, None, None, collate, batch=256, workers=2, memory=64, seed=0)
    model = Classifier()
    trainer = lightning.Trainer(
        accelerator="cpu", devices=1, max_epochs=1, limit_train_batches=8, logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    )
    trainer.fit(model, datamodule=dm)
    print(f"\n== Lightning fit through DataModule: {len(model.losses)} steps, "
          f"loss {model.losses[0]:.2f} -> {model.losses[-1]:.2f}")
    print(f"data position for the checkpoint: {dm.state_dict()['train']['consumed']} samples "
          f"of epoch {dm.state_dict()['train']['epoch']}")


def main() -> None:
    """Write the sample dataset and show what the library does with it."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("build/demo"))
    args = parser.parse_args()

    data = write_sample(args.out)
    print(f"wrote {len(list(data.glob('*.parquet')))} shards to {data}")

    ds = ParquetDataset(data, memory=64)
    print(f"\n== ParquetDataset\n{ds}")
    row = ds[1234]
    print(f"ds[1234]: id={row['id']} label={row['label']} tokens[:6]={row['tokens'][:6]}")
    print(f"ds[-1]:   id={ds[-1]['id']}")
    batch = ds.__getitems__([0, 5000, 9999])
    print(f"batched fetch: {[r['id'] for r in batch]}")
    print(f"cache: {ds.cache_stats}")
    counts = ds.sql("SELECT label, count(*) AS n FROM dataset GROUP BY label ORDER BY label")
    print(f"\n== ds.sql: rows per label\n{counts.to_pylist()}")

    validation_demo(data, args.out)
    lightning_demo(data)


if __name__ == "__main__":
    main()
