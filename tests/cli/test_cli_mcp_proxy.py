"""``loopwatch mcp-proxy``: a lazy hand-off to ``loopwatch.integrations.mcp_proxy``."""

from __future__ import annotations

import sys
import types

import pytest

from loopwatch.cli import PROXY_MODULE, main


def test_arguments_are_passed_on_and_the_code_returned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    received: list[list[str]] = []

    def fake_main(argv: list[str]) -> int:
        received.append(argv)
        return 7

    module = types.ModuleType(PROXY_MODULE)
    module.main = fake_main  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, PROXY_MODULE, module)
    assert main(["mcp-proxy", "--help", "--", "server", "-x"]) == 7
    assert received == [["--help", "--", "server", "-x"]]


def test_missing_module_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, PROXY_MODULE, None)  # makes the import fail
    assert main(["mcp-proxy", "server"]) == 2
    err = capsys.readouterr().err
    assert "mcp-proxy is not available" in err
    assert PROXY_MODULE in err


def test_missing_optional_dependency_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib

    real = importlib.import_module

    def failing(name: str, package: str | None = None) -> types.ModuleType:
        if name == PROXY_MODULE:
            raise ModuleNotFoundError("No module named 'mcp'", name="mcp")
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", failing)
    assert main(["mcp-proxy"]) == 2
    assert "pip install 'loopwatch[mcp]'" in capsys.readouterr().err


def test_module_without_main(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, PROXY_MODULE, types.ModuleType(PROXY_MODULE))
    assert main(["mcp-proxy"]) == 2
    assert "has no main(argv)" in capsys.readouterr().err


def test_help_lists_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "mcp-proxy" in capsys.readouterr().out
