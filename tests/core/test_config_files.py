"""Config files as a hostile path can name them (issue 17): special files, sizes, duplicates."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwatch import ConfigError, LoopDetectionConfig
from loopwatch.config import MAX_CONFIG_BYTES, MSG_SHADOWED_KEY, config_warnings, load_config_file


def _issues(exc: pytest.ExceptionInfo[ConfigError]) -> list[tuple[str, str]]:
    return [(issue.path, issue.message) for issue in exc.value.issues]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    done: list[BaseException] = []

    def load() -> None:
        try:
            load_config_file(fifo)
        except BaseException as exc:
            done.append(exc)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(timeout=30)
    if worker.is_alive():  # unblock the reader before failing
        with open(fifo, "w") as handle:
            handle.write("{}")
        worker.join(timeout=5)
        pytest.fail("loading a FIFO blocked")
    assert len(done) == 1 and isinstance(done[0], ConfigError)
    assert "not a regular file" in str(done[0])


def test_a_device_is_refused() -> None:
    with pytest.raises(ConfigError, match="not a regular file"):
        load_config_file("/dev/zero")


def test_a_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a regular file"):
        load_config_file(tmp_path)


def test_an_oversized_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_text('{"x": "' + "a" * MAX_CONFIG_BYTES + '"}')
    with pytest.raises(ConfigError, match="larger than"):
        load_config_file(path)


def test_a_missing_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config_file(tmp_path / "absent.json5")


def test_a_duplicate_top_level_tools_key_keeps_the_last_but_is_a_warning(tmp_path: Path) -> None:
    """SPEC §7.2 keeps OpenClaw's last-wins rule; config check warns (issue 17)."""
    path = tmp_path / "openclaw.json5"
    path.write_text('{tools: {loopDetection: {enabled: true}}, other: 1, tools: {x: "y"}}')
    assert load_config_file(path)["tools"] == {"x": "y"}
    warnings = [(w.path, w.message) for w in config_warnings(path)]
    assert warnings == [("tools", MSG_SHADOWED_KEY)]


def test_shadowed_keys_on_the_way_to_agent_blocks_are_warnings(tmp_path: Path) -> None:
    path = tmp_path / "openclaw.json"
    path.write_text(
        '{"agents": {"list": [{"id": "a", "tools": {"loopDetection": {"enabled": true},'
        ' "loopDetection": {}}}]}, "loopwatch": {}, "loopwatch": {}}'
    )
    paths = [w.path for w in config_warnings(path)]
    assert sorted(paths) == ["agents.list[0].tools.loopDetection", "loopwatch"]
    assert config_warnings(path) == config_warnings(path)  # no state left behind


def test_config_check_shows_the_warning(tmp_path: Path) -> None:
    from loopwatch.cli import main

    path = tmp_path / "openclaw.json5"
    path.write_text("{tools: {loopDetection: {enabled: true}}, tools: {}}")
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["config", "check", str(path)])
    assert code == 0
    assert "warning: tools: duplicate key" in out.getvalue()


def test_duplicates_elsewhere_keep_the_last_value(tmp_path: Path) -> None:
    path = tmp_path / "openclaw.json"
    path.write_text('{"gateway": 1, "gateway": 2, "tools": {"loopDetection": {"enabled": true}}}')
    assert load_config_file(path)["gateway"] == 2


def test_plain_json_and_json5_give_the_same_config(tmp_path: Path) -> None:
    block = {"tools": {"loopDetection": {"enabled": True, "historySize": 40}}, "x": [1, 2.5]}
    as_json = tmp_path / "a.json"
    as_json.write_text(json.dumps(block))
    as_json5 = tmp_path / "a.json5"
    as_json5.write_text(
        "// comment\n{tools: {loopDetection: {enabled: true, historySize: 40,}}, x: [1, 2.5]}"
    )
    assert load_config_file(as_json) == load_config_file(as_json5) == block
    assert LoopDetectionConfig.from_file(as_json).history_size == 40


@given(
    st.dictionaries(
        st.text(min_size=1, max_size=8),
        st.one_of(st.integers(), st.booleans(), st.text(max_size=8), st.none()),
        max_size=5,
    )
)
@settings(max_examples=40, deadline=None)
def test_any_json_document_loads_as_itself(
    tmp_path_factory: pytest.TempPathFactory, extra: dict[str, object]
) -> None:
    extra.pop("tools", None)
    extra.pop("agents", None)
    extra.pop("loopwatch", None)
    path = tmp_path_factory.mktemp("cfg") / "c.json"
    path.write_text(json.dumps(extra))
    assert load_config_file(path) == extra
