"""The run record: one typed, versioned description of a run folder, shared by eval, train and select.

* ``RunHeader`` (``run.json``, and ``summary.json``'s ``run``): kind, config, package versions, git
  revision, start time, wall time, seeds; ``FORMAT_VERSION`` is the format this verigym writes.
* ``EvalSummary``, ``TrainSummary``, ``SelectSummary``: the typed ``summary.json`` of each kind.
* ``Aggregate`` / ``fold`` / ``summarize``: the record -> summary fold (pass@k, reward mean and CI, errors by
  kind, grader means, tokens), written once and used by eval, train's held-out eval and select.
* ``read_run(path)``: the ``RunRecord`` of a folder of any kind, old unversioned runs included; a
  newer ``format_version`` is one ``RunFormatError`` line. ``write_header`` / ``with_header`` write.

The format and its version policy: ``docs/run-record.md``. This package stands on ``types`` only
(layer 1), so every layer above can read and write run records.
"""

from verigym.record._fold import Aggregate, bootstrap_ci, fold, summarize
from verigym.record._header import (
    FORMAT_VERSION,
    RUN_FILE,
    RunHeader,
    RunKind,
    git_revision,
    new_header,
    package_versions,
)
from verigym.record._read import (
    RunFormatError,
    RunRecord,
    check_format_version,
    read_header,
    read_run,
    with_header,
    write_header,
)
from verigym.record._summaries import EvalSummary, SelectSummary, Summary, TrainSummary

__all__ = [
    "FORMAT_VERSION",
    "RUN_FILE",
    "Aggregate",
    "EvalSummary",
    "RunFormatError",
    "RunHeader",
    "RunKind",
    "RunRecord",
    "SelectSummary",
    "Summary",
    "TrainSummary",
    "bootstrap_ci",
    "check_format_version",
    "fold",
    "git_revision",
    "new_header",
    "package_versions",
    "read_header",
    "read_run",
    "summarize",
    "with_header",
    "write_header",
]
