"""``verigym eval --mcp`` / ``--penalty``: flags that add MCP servers and cheating penalties to the
config (after ``[[tools.mcp]]`` / ``[[rubric.penalties]]`` of ``--config``); ``verigym.evaluate``
applies them to the environment."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import ValidationError

from verigym._cli.common import fail

if TYPE_CHECKING:
    from verigym.eval.config import EvalConfig

__all__ = ["MCP_HELP", "PENALTY_HELP", "extend_config"]

MCP_HELP = (
    "MCP server whose tools the environment offers: a command run over stdio ('python server.py') "
    "or a streamable-HTTP URL (http://127.0.0.1:PORT/mcp); repeatable. Also the tools.mcp "
    "array of tables in --config."
)
PENALTY_HELP = (
    "Cheating penalty NAME[=AMOUNT] (hedged_answer, copied_answer, network_attempts, protected_edits, "
    "deleted_tests; default amount 1); repeatable. A cheat judge (an LLM at a base URL): the "
    "rubric.penalties array of tables in --config."
)


def _one_line(exc: ValueError) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        return str(first["msg"]).removeprefix("Value error, ")
    return str(exc)


def extend_config(config: EvalConfig, mcp: list[str] | None, penalty: list[str] | None) -> EvalConfig:
    """``config`` with the ``--mcp`` and ``--penalty`` flags appended to its tables."""
    from verigym.graders.penalties import RubricSpec, parse_penalty_flag
    from verigym.tools.mcp_config import ToolsSpec, parse_mcp_flag

    if not mcp and not penalty:
        return config
    try:
        servers = [parse_mcp_flag(v) for v in mcp or []]
        penalties = [parse_penalty_flag(v) for v in penalty or []]
        rubric = RubricSpec(penalties=[*config.rubric.penalties, *penalties])
    except ValueError as exc:
        fail(_one_line(exc))
    tools = ToolsSpec(mcp=[*config.tools.mcp, *servers])
    return config.model_copy(update={"rubric": rubric, "tools": tools})


AGENT_HELP = (
    "Your agent program as the harness: FILE.py:FUNC or module:FUNC, an `agent(task, client)` that gets "
    "the task and an openai.AsyncOpenAI client pointed at the run's recording gateway (verigym.agents)."
)
AGENT_CMD_HELP = (
    "Your agent program as a command, run once per rollout with OPENAI_BASE_URL/OPENAI_API_KEY set for it "
    "and the task as JSON on stdin; its stdout is the answer."
)
ON_ERROR_HELP = (
    "error (default): a failed agent program is an errored sample, out of rewards; truncate: keep the "
    "calls it made as a truncated trajectory."
)
