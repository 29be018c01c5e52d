"""``verigym view``: a local web app over run folders (eval, train, compare, suite, select, profile).

``create_app(runs_dir)`` is the FastAPI app (a JSON API and the static page in ``static/``);
``start_viewer(runs_dir)`` runs it on a background thread on 127.0.0.1 (tests, notebooks) and returns
the server's handle (``.url``, ``.stop()``). ``ResultsIndex`` is the byte-offset index of one
``results.jsonl`` the sample table pages through. See ``docs/viewer.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verigym.view._app import ViewError, create_app
from verigym.view._index import ResultsIndex
from verigym.view._query import Query, QueryError, compare_indexes, run_query

__all__ = [
    "Query",
    "QueryError",
    "ResultsIndex",
    "ViewError",
    "compare_indexes",
    "create_app",
    "run_query",
    "start_viewer",
]


def start_viewer(runs_dir: str | Path, *, host: str = "127.0.0.1", port: int = 0) -> Any:
    """Serve the viewer over ``runs_dir`` on a daemon thread; returns a handle with ``.url`` and ``.stop()``."""
    from verigym._http_server import start_in_thread

    return start_in_thread(create_app(runs_dir), host, port, name="verigym-view")
