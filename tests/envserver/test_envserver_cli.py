"""``verigym env-server``'s flags: bad values are one-line errors (exit 2) before anything is served, and the
defaults spelled in the CLI (for a fast ``--help``) equal the server's own."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from verigym._cli import _server_opts, envserver_cmd
from verigym._http_server import ServerLimits
from verigym.cli import app
from verigym.envserver._app import MAX_BODY_BYTES


@pytest.mark.parametrize(
    ("args", "word"),
    [
        (["calc", "--port", "0"], "--port"),
        (["calc", "--max-sessions", "0"], "--max-sessions"),
        (["calc", "--max-body-bytes", "-1"], "--max-body-bytes"),
        (["calc", "--session-timeout", "nan"], "--session-timeout"),
        (["calc", "--header-timeout", "0"], "--header-timeout"),
        (["calc", "--keep-alive-timeout", "inf"], "--keep-alive-timeout"),
        (["calc", "--max-connections", "0"], "--max-connections"),
        (["calc", "--api-key-env", "VG_ENVSERVER_UNSET"], "VG_ENVSERVER_UNSET"),
        (["calc", "--api-key", ""], "--api-key"),
        (["calc", "--api-key", " "], "empty"),
        (["calc", "--api-key", "k", "--api-key-env", "HOME"], "give one of them"),
        (["no-such-env", "--port", "1"], "no-such-env"),
        (["calc", "--env-arg", "digits=99", "--port", "1"], "digits"),
        (["calc", "--env-arg", "novalue", "--port", "1"], "--env-arg"),
        (["calc", "calc", "--port", "1"], "twice"),
    ],
)
def test_bad_flags_are_one_line_errors(args: list[str], word: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VG_ENVSERVER_UNSET", raising=False)
    result = CliRunner().invoke(app, ["env-server", *args])
    assert result.exit_code == 2 and word in result.output, result.output
    assert "Traceback" not in result.output


def test_cli_defaults_are_the_servers() -> None:
    limits = ServerLimits()
    assert envserver_cmd.MAX_BODY_BYTES == MAX_BODY_BYTES
    assert (limits.max_connections, limits.header_timeout_s, limits.body_timeout_s, limits.keep_alive_s) == (
        _server_opts.MAX_CONNECTIONS,
        _server_opts.HEADER_TIMEOUT_S,
        _server_opts.BODY_TIMEOUT_S,
        _server_opts.KEEP_ALIVE_S,
    )
