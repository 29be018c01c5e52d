"""CLI: ``verigym models`` (list local checkpoints) and ``verigym models create SIZE --out DIR``."""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path

import typer
from rich.table import Table

from verigym._cli.common import console, fail

__all__ = ["register"]

models_app = typer.Typer(
    help="List local model checkpoints, or create a fresh tiny/small/base model.",
    invoke_without_command=True,
    no_args_is_help=False,
)


def _disk_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _parameters(path: Path) -> int | None:
    """Parameter count from the safetensors headers (no weights are loaded); None if unreadable."""
    total, found = 0, False
    for file in path.glob("*.safetensors"):
        try:
            with file.open("rb") as f:
                (size,) = struct.unpack("<Q", f.read(8))
                header = json.loads(f.read(size))
        except (OSError, ValueError, struct.error):
            return None
        for key, info in header.items():
            if key != "__metadata__":
                count = 1
                for dim in info.get("shape", []):
                    count *= int(dim)
                total, found = total + count, True
    return total if found else None


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


@models_app.callback()
def models(ctx: typer.Context) -> None:
    """List local checkpoints: quickstart output and the paths in $VERIGYM_MODELS / $VERIGYM_HOME/config.toml."""
    if ctx.invoked_subcommand is not None:
        return
    from verigym.policies.default import find_checkpoints, quickstart_dirs, verigym_home

    try:
        found = find_checkpoints()
    except ValueError as exc:
        fail(str(exc))
    if not found:
        where = ", ".join(str(p) for p in quickstart_dirs())
        console.print(
            f"No local checkpoints (looked in {where}, $VERIGYM_MODELS and {verigym_home()}/config.toml)."
        )
        console.print(
            "Train one with [bold]verigym quickstart[/] or make one with [bold]verigym models create tiny --out DIR[/]."
        )
        return
    table = Table(title="local models", title_justify="left")
    for col in ("path", "source", "kind", "size", "parameters", "created"):
        table.add_column(
            col, no_wrap=col != "path", justify="right" if col in ("size", "parameters") else "left"
        )
    for c in found:
        params = _parameters(c.path)
        kind = "LoRA adapter" if (c.path / "adapter_config.json").is_file() else "model"
        table.add_row(
            str(c.path),
            c.source,
            kind,
            _human(_disk_size(c.path)),
            "?" if params is None else f"{params:,}",
            time.strftime("%Y-%m-%d %H:%M", time.localtime(c.created)),
        )
    console.print(table)


@models_app.command("create")
def create(
    size: str = typer.Argument(..., help="Model size: tiny (~0.4M params), small (~3M) or base (~19M)."),
    out: Path = typer.Option(..., "--out", help="Directory to write the model and tokenizer into."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random initialisation."),
) -> None:
    """Write a fresh (untrained) model + tokenizer that from_pretrained(DIR) and `verigym serve DIR` load."""
    from verigym.policies.tiny import SIZES

    if size not in SIZES:
        fail(f"SIZE {size!r}: expected one of {', '.join(SIZES)}")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        fail(f"--out {out}: exists and is not an empty directory")
    from transformers.utils import logging as hf_logging

    from verigym.policies.tiny import create as create_model

    hf_logging.disable_progress_bar()
    with console.status(f"building {size} model..."):
        path = create_model(size, out, seed=seed)
    meta = json.loads((path / "verigym.json").read_text())
    console.print(
        f"Wrote a {size} model ({meta['parameters']:,} parameters, seed {seed}) to [bold]{path}[/]\n"
        f"Serve it: [bold]verigym serve {path}[/]   Evaluate it: [bold]verigym eval arithmetic --model {path}[/]"
    )


def register(app: typer.Typer) -> None:
    """Add ``models`` (with ``models create``) to ``app``."""
    app.add_typer(models_app, name="models")
