"""The viewer's HTTP app: a JSON API over the runs directory and the static front end shipped in the wheel.

Every path comes from the runs directory: a run is named by its path under it, and a name that
resolves outside it (``..``, an absolute path, a symlink out) or to a folder that is not a run is
refused (403 / 404). The page is static (``static/``), sent with a Content-Security-Policy that allows
only its own script and style, and it puts every text a model wrote into the page as text, never as
HTML. Results files are indexed once (``ResultsIndex``) and extended as they grow.
"""

from __future__ import annotations

import math
import threading
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from verigym.view._index import ResultsIndex
from verigym.view._query import Query, QueryError, compare_indexes, facets, run_query
from verigym.view._runs import describe, discover, run_config, sample_view, summary_rows
from verigym.view._train import TrainView

__all__ = ["ViewError", "create_app"]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_STATIC = ("index.html", "app.js", "app.css", "views.js")


class ViewError(Exception):
    """A request the viewer refuses: ``status`` and a one-line message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Runs:
    """The runs directory: safe lookups, and an index per results file kept between requests."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.lock = threading.Lock()
        self.indexes: dict[Path, ResultsIndex] = {}
        self.trains: dict[Path, TrainView] = {}

    def folder(self, run: str | None) -> tuple[Path, str]:
        """The folder of run ``run`` and its kind, or a ``ViewError``."""
        if not run:
            raise ViewError(400, "run: expected a run id from /api/runs")
        if "\x00" in run or run.startswith(("/", "\\")) or ":" in run:
            raise ViewError(403, f"run {run!r}: not a path inside the runs directory")
        folder = (self.root / run).resolve()
        if not folder.is_relative_to(self.root):
            raise ViewError(403, f"run {run!r}: not a path inside the runs directory")
        for run_id, kind, path in discover(folder) if folder.is_dir() else ():
            if run_id == ".":
                return path, kind
            break
        raise ViewError(404, f"run {run!r}: no run there (see /api/runs)")

    def index(self, folder: Path, wait_s: float = 1.0) -> ResultsIndex:
        """The folder's index, brought up to date on a background thread; waits up to ``wait_s`` for it
        and returns with the rows so far (a large run keeps indexing while its first page shows)."""
        with self.lock:
            found = self.indexes.get(folder)
            if found is None:
                found = self.indexes[folder] = ResultsIndex(folder / "results.jsonl")
        if not found.building:
            worker = threading.Thread(target=found.refresh, name="verigym-view-index", daemon=True)
            worker.start()
            worker.join(wait_s)
        return found

    def train(self, folder: Path) -> TrainView:
        with self.lock:
            found = self.trains.get(folder)
            if found is None:
                found = self.trains[folder] = TrainView(folder)
            return found

    def eval_index(self, run: str | None) -> tuple[Path, ResultsIndex]:
        folder, kind = self.folder(run)
        if kind != "eval":
            raise ViewError(400, f"run {run!r}: no results.jsonl, so no samples table (an eval run has one)")
        return folder, self.index(folder)


def _live_figures(info: dict[str, Any], index: ResultsIndex) -> None:
    """Fill an eval run's list row from its index while it has no summary (being written or killed)."""
    with index.lock:
        live = index.column("live").astype(bool)
        reward = index.column("reward")[live]
        scored = reward[~(reward != reward)]
        info["n"] = int(live.sum())
        info["errors"] = int((index.column("error")[live] >= 0).sum())
        info["reward"] = float(scored.mean()) if len(scored) else None
        info["tokens"] = int(
            index.column("prompt_tokens")[live].sum() + index.column("completion_tokens")[live].sum()
        )
        info["model"] = info["model"] or index.model or None
        info["env"] = info["env"] or index.env or None


def _finite(value: Any) -> Any:
    """``value`` with NaN/inf as None (JSON has neither)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def create_app(runs_dir: str | Path) -> FastAPI:
    """The viewer's app over ``runs_dir`` (which must exist)."""
    runs = _Runs(Path(runs_dir))
    app = FastAPI(title="verigym view", docs_url=None, redoc_url=None, openapi_url=None)
    static = resources.files("verigym.view") / "static"

    @app.exception_handler(ViewError)
    async def _refused(request: Request, exc: ViewError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=exc.status)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error": f"{request.url.path}: {exc.detail}"}, status_code=exc.status_code)

    @app.exception_handler(QueryError)
    async def _bad_query(request: Request, exc: QueryError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=400)

    def _json(value: Any) -> JSONResponse:
        return JSONResponse(_finite(value), headers={"cache-control": "no-store"})

    @app.get("/")
    def _page() -> Response:
        return _asset("index.html")

    @app.get("/favicon.ico")
    def _icon() -> Response:
        return Response(status_code=204)

    @app.get("/static/{name}")
    def _asset(name: str) -> Response:
        if name not in _STATIC:
            raise ViewError(404, f"no static file {name!r}")
        media = {"html": "text/html", "js": "text/javascript", "css": "text/css"}[name.rsplit(".", 1)[1]]
        body = (static / name).read_bytes()
        return Response(
            body,
            media_type=media,
            headers={"content-security-policy": CSP, "x-content-type-options": "nosniff"},
        )

    @app.get("/api/runs")
    def _list() -> JSONResponse:
        out = []
        for run_id, kind, folder in discover(runs.root):
            info = describe(run_id, kind, folder)
            if info["live"] and kind == "eval":
                _live_figures(info, runs.index(folder))
            out.append(info)
        return _json({"root": str(runs.root), "runs": out})

    @app.get("/api/run")
    def _run(run: str | None = None) -> JSONResponse:
        folder, kind = runs.folder(run)
        info = describe(str(run), kind, folder)
        body: dict[str, Any] = {"info": info, "summary": summary_rows(folder)}
        if kind == "eval":
            index = runs.index(folder)
            if info["live"]:
                _live_figures(info, index)
            body["facets"] = facets(index)
            body["bad_lines"] = index.bad_lines
            body["config"] = run_config(folder)
        return _json(body)

    @app.get("/api/samples")
    def _samples(request: Request) -> JSONResponse:
        params = dict(request.query_params)
        _, index = runs.eval_index(params.pop("run", None))
        return _json(run_query(index, Query.parse(params)))

    @app.get("/api/sample")
    def _sample(
        run: str | None = None, row: str | None = None, task: str | None = None, index_: str | None = None
    ) -> JSONResponse:
        folder, index = runs.eval_index(run)
        at: int | None
        if row is not None:
            if not row.isdigit():
                raise ViewError(400, f"row: expected a whole number, got {row!r}")
            at = int(row)
        elif task is not None:
            at = index.find(task, int(index_) if index_ and index_.isdigit() else 0)
        else:
            raise ViewError(400, "sample: expected row=N, or task=ID and index_=N")
        if at is None or not 0 <= at < len(index):
            raise ViewError(404, f"run {run!r}: no such sample")
        try:
            view = sample_view(index.line(at), folder, runs.root)
        except ValueError as exc:
            raise ViewError(
                422, f"run {run!r} row {at}: not a results record ({str(exc).splitlines()[0]})"
            ) from None
        view["row"] = at
        return _json(view)

    @app.get("/api/compare")
    def _compare(a: str | None = None, b: str | None = None, show: str = "all") -> JSONResponse:
        folder_a, index_a = runs.eval_index(a)
        _, index_b = runs.eval_index(b)
        threshold = describe(str(a), "eval", folder_a)["threshold"]
        return _json(
            {"a": a, "b": b, **compare_indexes(index_a, index_b, threshold=float(threshold), show=show)}
        )

    @app.get("/api/train")
    def _train(run: str | None = None) -> JSONResponse:
        folder, kind = runs.folder(run)
        if kind != "train":
            raise ViewError(400, f"run {run!r}: not a training run")
        return _json(runs.train(folder).curves())

    @app.get("/api/step")
    def _step(run: str | None = None, step: str | None = None) -> JSONResponse:
        folder, kind = runs.folder(run)
        if kind != "train":
            raise ViewError(400, f"run {run!r}: not a training run")
        if step is None or not step.isdigit():
            raise ViewError(400, f"step: expected a whole number, got {step!r}")
        data = runs.train(folder).step(int(step))
        if data is None:
            raise ViewError(404, f"run {run!r}: no rollouts kept for step {step} (rollouts_sample.jsonl)")
        return _json(data)

    @app.get("/api/report")
    def _report(run: str | None = None, name: str = "report.html") -> Response:
        folder, _ = runs.folder(run)
        if "/" in name or "\\" in name or not name.endswith(".html") or name.startswith("."):
            raise ViewError(403, f"name {name!r}: only an .html file in the run's own folder")
        path = folder / name
        if not path.is_file():
            raise ViewError(404, f"run {run!r}: no {name}")
        return FileResponse(
            path, media_type="text/html", headers={"content-security-policy": "script-src 'none'"}
        )

    return app
