"""OpenClaw configs as users already write them (config5): what loads, what is refused, and how.

The rules checked here were read from OpenClaw 2026.6.10 itself (``zod-schema.agent-runtime``:
``ToolLoopDetectionSchema`` and ``AgentToolsSchema`` are strict zod objects;
``agent-scope-config`` / ``tool-loop-detection-config``: an agent's ``tools.loopDetection``
is spread over the global one, ``detectors`` and ``postCompactionGuard`` one level deeper;
``agents.defaults`` has no ``tools``; ``config/includes``: ``$include``;
``config/env-substitution``: ``${VAR}`` in strings). Every refusal is a ``ConfigError`` at
load time whose issues name the field path.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from loopwatch import ConfigError, LoopDetectionConfig, LoopGuard
from loopwatch.cli import main
from loopwatch.config import config_warnings, load_config_file
from loopwatch.config._expand import substitute_env
from loopwatch.config._schema import (
    MSG_ADAPTIVE_NOT_CARRIED,
    MSG_ADAPTIVE_UNUSED_ARGUMENT,
    MSG_ADAPTIVE_UNUSED_CHOSEN,
    MSG_ADAPTIVE_UNUSED_REFERENCE,
    MSG_ADAPTIVE_UNUSED_UNSET,
    MSG_DEFAULTS_TOOLS,
)
from loopwatch.errors import ConfigIssue
from loopwatch.settings import GuardSettings


def _write(tmp_path: Path, text: str, name: str = "openclaw.json5") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _issues(exc: pytest.ExceptionInfo[ConfigError]) -> list[tuple[str, str]]:
    return [(issue.path, issue.message) for issue in exc.value.issues]


# --- 1. adaptive settings under the reference profile: validated, and never silently dropped --

ADAPTIVE_ONLY = """{
  tools: { loopDetection: { enabled: true } },
  loopwatch: { %s adaptive: { repeatedFailure: { warn: 2, block: 3 } } },
}"""


@pytest.mark.parametrize(
    ("profile_line", "expected"),
    [
        ("", MSG_ADAPTIVE_UNUSED_UNSET),
        ('profile: "reference",', MSG_ADAPTIVE_UNUSED_REFERENCE),
        ('profile: "adaptive",', None),
    ],
)
def test_an_adaptive_block_the_profile_ignores_is_a_warning_of_the_file(
    tmp_path: Path, profile_line: str, expected: str | None
) -> None:
    path = _write(tmp_path, ADAPTIVE_ONLY % profile_line)
    warnings = [(w.path, w.message) for w in config_warnings(path)]
    assert warnings == ([] if expected is None else [("loopwatch.adaptive", expected)])
    settings = GuardSettings.resolve(config_file=path)
    assert [(w.path, w.message) for w in settings.warnings] == warnings
    if expected is None:
        assert settings.adaptive is not None
        failure = settings.adaptive.repeated_failure
        assert (failure.warn, failure.block) == (2, 3)


def test_choosing_the_adaptive_profile_uses_the_block_without_a_warning(tmp_path: Path) -> None:
    path = _write(tmp_path, ADAPTIVE_ONLY % 'profile: "reference",')
    settings = GuardSettings.resolve(config_file=path, profile="adaptive")
    assert settings.warnings == ()
    assert settings.adaptive is not None and settings.adaptive.repeated_failure.warn == 2


def test_choosing_reference_over_an_adaptive_file_says_the_block_is_unused(tmp_path: Path) -> None:
    path = _write(tmp_path, ADAPTIVE_ONLY % 'profile: "adaptive",')
    settings = GuardSettings.resolve(config_file=path, profile="reference")
    assert [(w.path, w.message) for w in settings.warnings] == [
        ("loopwatch.adaptive", MSG_ADAPTIVE_UNUSED_CHOSEN)
    ]
    assert settings.adaptive is None


def test_an_adaptive_argument_under_reference_is_logged_when_the_guard_is_built(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="loopwatch.config"):
        guard = LoopGuard({"enabled": True}, adaptive={"window": 5})
    assert guard.profile == "reference"
    assert [r.getMessage() for r in caplog.records if r.name == "loopwatch.config"] == [
        f"loopwatch config: adaptive: {MSG_ADAPTIVE_UNUSED_ARGUMENT}"
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="loopwatch.config"):
        LoopGuard({"enabled": True}, adaptive={"window": 5}, profile="adaptive")
    assert [r for r in caplog.records if r.name == "loopwatch.config"] == []


def test_an_invalid_adaptive_block_fails_whatever_the_profile(tmp_path: Path) -> None:
    path = _write(tmp_path, "{loopwatch: {profile: 'reference', adaptive: {window: 'ten'}}}")
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert [p for p, _m in _issues(info)] == ["loopwatch.adaptive.window"]


def test_the_file_warning_is_logged_by_a_guard_on_the_whole_config(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = load_config_file(_write(tmp_path, ADAPTIVE_ONLY % ""))
    with caplog.at_level(logging.WARNING, logger="loopwatch.config"):
        LoopGuard(openclaw_config=config)
    assert [r.getMessage() for r in caplog.records if r.name == "loopwatch.config"] == [
        f"loopwatch config: loopwatch.adaptive: {MSG_ADAPTIVE_UNUSED_UNSET}"
    ]


def test_config_check_and_scan_show_the_unused_block(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, ADAPTIVE_ONLY % "profile: 'reference',")
    assert main(["config", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"warning: loopwatch.adaptive: {MSG_ADAPTIVE_UNUSED_REFERENCE}\n" in out
    run = _write(tmp_path, '{"tool": "read", "args": {"path": "a"}, "result": "x"}\n', "r.jsonl")
    assert main(["scan", "--config", str(path), str(run)]) == 0
    out = capsys.readouterr().out
    assert f"warning: loopwatch.adaptive: {MSG_ADAPTIVE_UNUSED_REFERENCE}\n" in out
    assert main(["scan", "--config", str(path), "--profile", "adaptive", str(run)]) == 0
    assert "warning: loopwatch.adaptive" not in capsys.readouterr().out


# --- 2. JSON5 as OpenClaw's parser reads it ---------------------------------------------------


@pytest.mark.parametrize(
    ("written", "value"),
    [
        ("10", 10),
        ("0xA", 10),  # hex
        ("+10", 10),  # a leading plus
        ("10.", 10),  # a trailing point: 10.0, an integer
        ("1e1", 10),  # an exponent
        ("10.0000000000000001", 10),  # rounds to 10 in a double, as in JavaScript
    ],
)
def test_json5_numbers_that_are_integers_load(tmp_path: Path, written: str, value: int) -> None:
    path = _write(tmp_path, f"{{tools: {{loopDetection: {{warningThreshold: {written}}}}}}}")
    block = load_config_file(path)["tools"]["loopDetection"]
    assert block["warningThreshold"] == value
    assert (
        LoopGuard(openclaw_config=load_config_file(path)).settings.block_for()[1].warning_threshold
        == value
    )


def test_json5_comments_trailing_commas_quotes_and_unquoted_keys(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """// OpenClaw's own config file
        {
          /* the global block */
          tools: { 'loopDetection': { enabled: true, "historySize": 40, }, },
          agents: { list: [
            { id: 'safe', tools: { loopDetection: { warningThreshold: 4, }, }, },
          ], },
        }
        """,
    )
    guard = LoopGuard(openclaw_config=load_config_file(path))
    resolved = guard.settings.block_for("safe")[1]
    assert (resolved.enabled, resolved.history_size, resolved.warning_threshold) == (True, 40, 4)


@pytest.mark.parametrize(
    "written",
    ["Infinity", "-Infinity", "NaN", "1e400", "-0", "0", "-5", "10.5", "0x0", ".5"],
)
def test_json5_numbers_that_are_no_positive_integer_are_typed_errors(
    tmp_path: Path, written: str
) -> None:
    path = _write(tmp_path, f"{{tools: {{loopDetection: {{criticalThreshold: {written}}}}}}}")
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert _issues(info) == [("tools.loopDetection.criticalThreshold", "expected an integer > 0")]


def test_a_number_past_javascripts_safe_integers_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, '{"tools": {"loopDetection": {"historySize": 9007199254740993}}}')
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert _issues(info) == [
        ("tools.loopDetection.historySize", "expected an integer <= 9007199254740991")
    ]


@pytest.mark.parametrize(
    ("field", "written", "message"),
    [
        ("enabled", '"true"', "expected a boolean"),
        ("enabled", "1", "expected a boolean"),
        ("enabled", "null", "expected a boolean"),
        ("warningThreshold", "true", "expected an integer > 0"),
        ("warningThreshold", '"10"', "expected an integer > 0"),
        ("warningThreshold", '"ten"', "expected an integer > 0"),
        ("warningThreshold", "null", "expected an integer > 0"),
        ("warningThreshold", "[10]", "expected an integer > 0"),
        ("detectors", "true", "expected an object"),
        ("detectors", "null", "expected an object"),
        ("postCompactionGuard", "3", "expected an object"),
    ],
)
def test_wrong_types_name_the_field(tmp_path: Path, field: str, written: str, message: str) -> None:
    for prefix, text in (
        ("tools.loopDetection", f"{{tools: {{loopDetection: {{{field}: {written}}}}}}}"),
        (
            "agents.list[0].tools.loopDetection",
            "{agents: {list: [{id: 'a', tools: {loopDetection: {"
            + f"{field}: {written}"
            + "}}}]}}",
        ),
    ):
        path = _write(tmp_path, text)
        with pytest.raises(ConfigError) as info:
            load_config_file(path)
        assert _issues(info) == [(f"{prefix}.{field}", message)]


def test_every_problem_of_a_newcomers_file_is_reported_at_once(tmp_path: Path) -> None:
    """Strict zod objects in OpenClaw: unknown keys at each level are errors, with paths."""
    path = _write(
        tmp_path,
        """{
          tools: { loopDetection: {
            enabled: "yes", warnThreshold: 5, warningThreshold: 10.5,
            detectors: { genericRepeat: true, argumentChurn: true },
            postCompactionGuard: { windowSize: 0, window: 3 },
          } },
          agents: { list: [ { id: "a", tools: { loopDetection: { profile: "adaptive" } } } ] },
        }""",
    )
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert _issues(info) == [
        ("tools.loopDetection.enabled", "expected a boolean"),
        ("tools.loopDetection.warnThreshold", "unknown key"),
        ("tools.loopDetection.warningThreshold", "expected an integer > 0"),
        ("tools.loopDetection.detectors.argumentChurn", "unknown key"),
        ("tools.loopDetection.postCompactionGuard.windowSize", "expected an integer > 0"),
        ("tools.loopDetection.postCompactionGuard.window", "unknown key"),
        ("agents.list[0].tools.loopDetection.profile", "unknown key"),
    ]
    assert all(isinstance(info.value, cls) for cls in (ConfigError, ValueError))


# --- 3. files that hold no block, or nothing at all --------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "{}",
        "{gateway: {port: 18789}}",  # an OpenClaw file with no tools at all
        "{tools: {exec: {security: 'allowlist'}}}",  # tools, but no loopDetection
        "{agents: {defaults: {model: 'x'}, list: [{id: 'a'}]}}",
    ],
)
def test_a_file_without_a_block_loads_with_detection_off(tmp_path: Path, text: str) -> None:
    path = _write(tmp_path, text)
    guard = LoopGuard(openclaw_config=load_config_file(path))
    block, resolved = guard.settings.block_for("a")
    assert block is None and resolved.enabled is False
    assert resolved.guard_enabled is True  # the post-compaction guard stays on, as in OpenClaw


@pytest.mark.parametrize(
    ("text", "issue"),
    [
        ("", ("", "JSON5 syntax error at line 1, column 1: Empty strings are not legal JSON5")),
        ("\n  \n", ("", "JSON5 syntax error at line 3, column 1: Unexpected end of input")),
        (
            "\ufeff",
            ("", "JSON5 syntax error at line 1, column 1: Empty strings are not legal JSON5"),
        ),
        ("[]", ("", "expected an object")),
        ("null", ("", "expected an object")),
        ('"openclaw"', ("", "expected an object")),
    ],
)
def test_empty_and_non_object_files_are_one_issue(
    tmp_path: Path, text: str, issue: tuple[str, str]
) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert _issues(info) == [issue]


def test_a_bom_is_skipped(tmp_path: Path) -> None:
    path = _write(tmp_path, "\ufeff{tools: {loopDetection: {enabled: true}}}")
    assert load_config_file(path) == {"tools": {"loopDetection": {"enabled": True}}}


@pytest.mark.parametrize("data", [b'{"a": "\xff"}', '{"tools": {}}'.encode("utf-16")])
def test_bytes_that_are_not_utf8_are_refused(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "openclaw.json"
    path.write_bytes(data)
    with pytest.raises(ConfigError, match="is not valid UTF-8"):
        load_config_file(path)


def test_an_unreadable_file_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, "{}")

    def refuse(*_args: object, **_kwargs: object) -> int:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "open", refuse)  # as chmod 000 would, even for root
    with pytest.raises(ConfigError, match=r"cannot read .*Permission denied") as info:
        load_config_file(path)
    assert [issue.path for issue in info.value.issues] == [""]


def test_agents_defaults_has_no_tools_in_openclaw(tmp_path: Path) -> None:
    """OpenClaw's ``AgentDefaultsSchema`` is strict and has no ``tools``: the whole config is
    refused there, so a block written there is an error here, not silently ignored."""
    path = _write(tmp_path, "{agents: {defaults: {tools: {loopDetection: {enabled: true}}}}}")
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert _issues(info) == [("agents.defaults.tools", MSG_DEFAULTS_TOOLS)]
    # Other defaults are OpenClaw's business and load as they are.
    assert load_config_file(_write(tmp_path, "{agents: {defaults: {contextTokens: 1000}}}"))


# --- 4. per-agent overrides as OpenClaw merges them --------------------------------------------

AGENTS = """{
  tools: { loopDetection: {
    enabled: true, warningThreshold: 5, criticalThreshold: 12,
    detectors: { pingPong: false }, postCompactionGuard: { windowSize: 4 },
  } },
  agents: { list: [
    { id: "Safe Runner",
      tools: { loopDetection: { criticalThreshold: 8, detectors: { genericRepeat: false } } } },
    { id: "no-block", tools: { exec: { security: "allowlist" } } },
    { id: "no-block", tools: { loopDetection: { enabled: false } } },
    { id: "off", tools: { loopDetection: { enabled: false } } },
  ] },
}"""


def test_an_agent_override_spreads_over_the_global_block_one_level_deep(tmp_path: Path) -> None:
    """OpenClaw's ``resolveToolLoopDetectionConfig``: ``{...global, ...agent}``, with
    ``detectors`` and ``postCompactionGuard`` spread key by key (checked against it on 2000
    generated configs while writing this)."""
    guard = LoopGuard(openclaw_config=load_config_file(_write(tmp_path, AGENTS)))
    block, resolved = guard.settings.block_for("safe-runner")  # the id, normalised
    assert block == {
        "enabled": True,
        "warningThreshold": 5,
        "criticalThreshold": 8,
        "detectors": {"pingPong": False, "genericRepeat": False},
        "postCompactionGuard": {"windowSize": 4},
    }
    assert (resolved.generic_repeat, resolved.ping_pong, resolved.guard_window_size) == (
        False,
        False,
        4,
    )


def test_an_absent_agent_or_a_first_entry_without_a_block_gets_the_global_block(
    tmp_path: Path,
) -> None:
    guard = LoopGuard(openclaw_config=load_config_file(_write(tmp_path, AGENTS)))
    global_block = guard.settings.block_for(None)[0]
    assert guard.settings.block_for("nobody")[0] == global_block
    # The first entry with the id wins even without a block: the second is never read.
    assert guard.settings.block_for("no-block")[0] == global_block
    off = guard.settings.block_for("off")[1]
    assert (off.enabled, off.guard_enabled) == (False, False)


# --- 5. $include, as OpenClaw resolves it before validating ------------------------------------


def test_include_merges_files_as_openclaw_does(tmp_path: Path) -> None:
    """The expected value is what OpenClaw 2026.6.10's ``resolveConfigIncludes`` returned for
    these files: sibling keys merge over the included content, lists concatenate."""
    (tmp_path / "sub").mkdir()
    _write(
        tmp_path,
        """// base
        { tools: { loopDetection: { enabled: true, warningThreshold: 5,
                                    detectors: { pingPong: false } } },
          agents: { list: [ { id: "a", tools: { loopDetection: { criticalThreshold: 40 } } } ] } }
        """,
        "base.json5",
    )
    _write(tmp_path, '{ list: [ { id: "b", $include: "./b-tools.json5" } ] }', "sub/agents.json5")
    _write(tmp_path, "{ tools: { loopDetection: { enabled: false } } }", "sub/b-tools.json5")
    path = _write(
        tmp_path,
        """{
          $include: "./base.json5",
          tools: { loopDetection: { warningThreshold: 7, detectors: { genericRepeat: false } } },
          agents: { $include: "./sub/agents.json5" },
        }""",
    )
    assert load_config_file(path) == {
        "tools": {
            "loopDetection": {
                "enabled": True,
                "warningThreshold": 7,
                "detectors": {"pingPong": False, "genericRepeat": False},
            }
        },
        "agents": {
            "list": [
                {"id": "a", "tools": {"loopDetection": {"criticalThreshold": 40}}},
                {"tools": {"loopDetection": {"enabled": False}}, "id": "b"},
            ]
        },
    }


def test_a_list_of_includes_merges_in_order(tmp_path: Path) -> None:
    _write(tmp_path, "{enabled: true, warningThreshold: 4}", "a.json5")
    _write(tmp_path, "{warningThreshold: 6, criticalThreshold: 9}", "b.json5")
    path = _write(tmp_path, '{tools: {loopDetection: {$include: ["a.json5", "b.json5"]}}}')
    assert load_config_file(path)["tools"]["loopDetection"] == {
        "enabled": True,
        "warningThreshold": 6,
        "criticalThreshold": 9,
    }


def test_an_included_block_is_validated_at_the_path_it_lands_on(tmp_path: Path) -> None:
    _write(tmp_path, "{loopDetection: {warningThreshold: 'ten', extra: 1}}", "tools.json5")
    path = _write(tmp_path, "{tools: {$include: './tools.json5'}}")
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert _issues(info) == [
        ("tools.loopDetection.warningThreshold", "expected an integer > 0"),
        ("tools.loopDetection.extra", "unknown key"),
    ]


def test_duplicate_keys_in_an_included_file_are_still_reported(tmp_path: Path) -> None:
    _write(tmp_path, "{loopDetection: {enabled: true, enabled: false}}", "tools.json5")
    path = _write(tmp_path, "{tools: {$include: './tools.json5'}}")
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert _issues(info) == [("tools.loopDetection.enabled", "duplicate key")]


@pytest.mark.parametrize(
    ("setup", "text", "path", "reason"),
    [
        ({}, "{tools: {$include: './absent.json5'}}", "tools.$include", "cannot read"),
        (
            {"bad.json5": "{oops"},
            "{tools: {$include: 'bad.json5'}}",
            "tools.$include",
            "JSON5 syntax error at line 1",
        ),
        (
            {"self.json5": "{$include: './self.json5'}"},
            "{$include: 'self.json5'}",
            "$include",
            "circular include",
        ),
        (
            {},
            "{tools: {$include: '../outside.json5'}}",
            "tools.$include",
            "outside the config's folder",
        ),
        (
            {},
            "{tools: {$include: '/etc/hostname'}}",
            "tools.$include",
            "outside the config's folder",
        ),
        ({}, "{tools: {$include: 5}}", "tools.$include", "expected a string or a list of strings"),
        ({}, "{tools: {$include: ['a.json5', 5]}}", "tools.$include[1]", "expected a string"),
        (
            {"list.json5": "[1, 2]"},
            "{tools: {$include: 'list.json5', x: 1}}",
            "tools.$include",
            "sibling keys need",
        ),
    ],
)
def test_include_problems_are_config_errors_where_the_include_is(
    tmp_path: Path, setup: dict[str, str], text: str, path: str, reason: str
) -> None:
    for name, content in setup.items():
        _write(tmp_path, content, name)
    _write(tmp_path, "{}", "a.json5")
    with pytest.raises(ConfigError) as info:
        load_config_file(_write(tmp_path, text))
    assert [issue.path for issue in info.value.issues] == [path]
    assert reason in info.value.issues[0].message


def test_includes_nest_at_most_ten_levels(tmp_path: Path) -> None:
    for level in range(12):
        _write(tmp_path, f"{{$include: './{level + 1}.json5'}}", f"{level}.json5")
    _write(tmp_path, "{}", "12.json5")
    with pytest.raises(ConfigError, match="more than 10 nested includes"):
        load_config_file(tmp_path / "0.json5")
    # Ten levels below the main file are fine.
    _write(tmp_path, "{tools: {}}", "10.json5")
    assert load_config_file(tmp_path / "0.json5") == {"tools": {}}


def test_a_symlink_out_of_the_folder_is_refused_and_roots_can_allow_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inside, outside = tmp_path / "cfg", tmp_path / "shared"
    inside.mkdir()
    outside.mkdir()
    _write(outside, "{loopDetection: {enabled: true}}", "tools.json5")
    (inside / "tools.json5").symlink_to(outside / "tools.json5")
    path = _write(inside, "{tools: {$include: './tools.json5'}}")
    monkeypatch.delenv("OPENCLAW_INCLUDE_ROOTS", raising=False)
    with pytest.raises(ConfigError, match="symlink to outside"):
        load_config_file(path)
    monkeypatch.setenv("OPENCLAW_INCLUDE_ROOTS", str(outside))
    assert load_config_file(path) == {"tools": {"loopDetection": {"enabled": True}}}


def test_an_include_left_in_a_mapping_is_an_issue_not_a_hidden_block() -> None:
    with pytest.raises(ConfigError) as info:
        LoopGuard(openclaw_config={"tools": {"$include": "./tools.json5"}})
    assert [issue.path for issue in info.value.issues] == ["tools.$include"]


# --- 6. ${VAR} in strings, as OpenClaw substitutes them ----------------------------------------


def test_env_vars_are_substituted_in_strings_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOP_AGENT", "safe")
    monkeypatch.setenv("MY_TOOL", "book_reservation")
    monkeypatch.delenv("UNSET_TOOL", raising=False)
    path = _write(
        tmp_path,
        """{
          agents: { list: [
            { id: "${LOOP_AGENT}", tools: { loopDetection: { enabled: true } } },
          ] },
          loopwatch: { profile: "adaptive", adaptive: {
            mutatingTools: ["${MY_TOOL}", "$${MY_TOOL}", "${UNSET_TOOL}"],
          } },
        }""",
    )
    config = load_config_file(path)
    assert config["agents"]["list"][0]["id"] == "safe"
    assert config["loopwatch"]["adaptive"]["mutatingTools"] == [
        "book_reservation",
        "${MY_TOOL}",
        "${UNSET_TOOL}",
    ]
    assert [(w.path, w.message) for w in config_warnings(path)] == [
        (
            "loopwatch.adaptive.mutatingTools[2]",
            "environment variable UNSET_TOOL is not set: the text ${UNSET_TOOL} is kept",
        )
    ]
    assert LoopGuard(openclaw_config=config).settings.block_for("safe")[1].enabled is True


def test_the_configs_own_env_block_fills_in_unset_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LOOP_AGENT", raising=False)
    path = _write(
        tmp_path,
        """{ env: { vars: { LOOP_AGENT: "from-vars" } },
             agents: { list: [ { id: "${LOOP_AGENT}" } ] } }""",
    )
    assert load_config_file(path)["agents"]["list"][0]["id"] == "from-vars"
    monkeypatch.setenv("LOOP_AGENT", "from-process")
    assert load_config_file(path)["agents"]["list"][0]["id"] == "from-process"


def test_a_number_from_an_env_var_stays_a_string_and_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenClaw substitutes strings only, and its zod ``number()`` refuses ``"8"``."""
    monkeypatch.setenv("WARN", "8")
    path = _write(tmp_path, '{tools: {loopDetection: {warningThreshold: "${WARN}"}}}')
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert _issues(info) == [("tools.loopDetection.warningThreshold", "expected an integer > 0")]


#: Strings and what OpenClaw 2026.6.10's ``resolveConfigEnvVars`` made of them, with
#: ``A=one B=two A_1=three`` set and ``MISSING`` unset.
ENV_CASES = [
    ("${A}", "one"),
    ("$${A}", "${A}"),
    ("${a}", "${a}"),
    ("${A", "${A"),
    ("$$${A}", "$${A}"),
    ("${A}${B}", "onetwo"),
    ("x${MISSING}y", "x${MISSING}y"),
    ("$", "$"),
    ("${}", "${}"),
    ("${A_1}z", "threez"),
    ("$${lower}", "$${lower}"),
    ("no dollar", "no dollar"),
]


@pytest.mark.parametrize(("written", "expected"), ENV_CASES)
def test_env_substitution_matches_openclaw_character_for_character(
    written: str, expected: str
) -> None:
    config = {"loopwatch": {"adaptive": {"mutatingTools": [written]}}}
    warnings: list[ConfigIssue] = []
    substitute_env(config, warnings, env={"A": "one", "B": "two", "A_1": "three"})
    assert config["loopwatch"]["adaptive"]["mutatingTools"] == [expected]
    assert bool(warnings) == ("MISSING" in written)


def test_a_loopwatch_file_can_include_the_openclaw_file_it_extends(tmp_path: Path) -> None:
    """OpenClaw's root schema is strict: it refuses a top-level ``loopwatch`` key. So the
    loopwatch block goes in a file of its own that includes OpenClaw's, unchanged."""
    _write(
        tmp_path,
        '{"tools": {"loopDetection": {"enabled": true}}, "agents": {"list": [{"id": "a"}]}}',
        "openclaw.json",
    )
    path = _write(
        tmp_path,
        '{ $include: "./openclaw.json", loopwatch: { profile: "adaptive" } }',
        "loopwatch.json5",
    )
    settings = GuardSettings.resolve(config_file=path)
    assert settings.profile == "adaptive" and settings.warnings == ()
    assert settings.block_for("a")[0] == {"enabled": True}


# --- 7. one way to read a config file, whoever reads it ----------------------------------------

WHOLE = """{
  tools: { loopDetection: { warningThreshold: 6, criticalThreshold: 9 } },
  agents: { list: [ { id: "a", tools: { loopDetection: { historySize: 12 } } } ] },
  loopwatch: { %s adaptive: { repeatedFailure: { warn: 2, block: 4 }, mutatingTools: ["book"] } },
}"""


def _readers(path: Path, agent: str | None) -> dict[str, GuardSettings]:
    """The settings each entry point builds from one ``--config`` file."""
    from loopwatch.cli._scan import load_setup
    from loopwatch.hooks import default_guard
    from loopwatch.integrations import mcp_proxy

    args = ["--config", str(path)] + (["--agent", agent] if agent else [])
    proxy_args = mcp_proxy._parser().parse_args(args)
    return {
        "GuardSettings.resolve": GuardSettings.resolve(config_file=path),
        "LoopGuard(openclaw_config)": LoopGuard(openclaw_config=load_config_file(path)).settings,
        "scan --config": load_setup(str(path), agent, None).settings.guard_settings(),
        "mcp-proxy --config": mcp_proxy._guard(proxy_args).settings,
        # The hooks' own default (adaptive when the file names none) aside, the same.
        "hook --config": default_guard("memory://", str(path)).settings,
    }


@pytest.mark.parametrize("profile_line", ['profile: "adaptive",', 'profile: "reference",'])
@pytest.mark.parametrize("agent", [None, "a"])
def test_every_entry_point_reads_a_file_the_same_way(
    tmp_path: Path, profile_line: str, agent: str | None
) -> None:
    path = _write(tmp_path, WHOLE % profile_line)
    seen = {
        name: (
            settings.profile,
            settings.adaptive,
            settings.block_for(agent),
            [(w.path, w.message) for w in settings.warnings],
        )
        for name, settings in _readers(path, agent).items()
    }
    first = next(iter(seen.values()))
    assert all(value == first for value in seen.values()), seen
    profile, adaptive, (_block, resolved), _warnings = first
    assert profile == ("adaptive" if "adaptive" in profile_line else "reference")
    if profile == "adaptive":
        assert adaptive is not None and adaptive.repeated_failure.block == 4
        assert resolved.enabled is True  # the adaptive profile is its own opt-in
    assert resolved.history_size == (12 if agent else 30)


def test_the_hooks_default_profile_uses_a_files_adaptive_block(tmp_path: Path) -> None:
    from loopwatch.hooks import default_guard

    path = _write(tmp_path, WHOLE % "")
    settings = default_guard("memory://", str(path)).settings
    assert settings.profile == "adaptive" and settings.warnings == ()
    assert settings.adaptive is not None and settings.adaptive.repeated_failure.warn == 2
    # Everywhere else the default profile is reference, and the block is reported unused.
    assert GuardSettings.resolve(config_file=path).warnings[0].message == MSG_ADAPTIVE_UNUSED_UNSET


def test_mcp_proxy_no_longer_calls_an_adaptive_file_detection_off(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from loopwatch.integrations import mcp_proxy

    path = _write(tmp_path, WHOLE % 'profile: "adaptive",')
    with caplog.at_level(logging.WARNING):
        guard = mcp_proxy._guard(mcp_proxy._parser().parse_args(["--config", str(path)]))
    assert guard.profile == "adaptive"
    assert not [r for r in caplog.records if "detection is off" in r.getMessage()]
    off = _write(tmp_path, "{tools: {loopDetection: {warningThreshold: 5}}}", "off.json5")
    with caplog.at_level(logging.WARNING):
        mcp_proxy._guard(mcp_proxy._parser().parse_args(["--config", str(off)]))
    assert [r for r in caplog.records if "detection is off" in r.getMessage()]


@pytest.mark.parametrize(
    ("text", "line", "effective"),
    [
        ("{loopwatch: {profile: 'adaptive'}}", "detection: on (the adaptive profile", True),
        (
            "{tools: {loopDetection: {enabled: false}}, loopwatch: {profile: 'adaptive'}}",
            "detection: off (enabled is false)",
            False,
        ),
        ("{}", "detection: off (enabled is not true)", False),
    ],
)
def test_config_check_says_what_a_guard_on_the_file_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, line: str, effective: bool
) -> None:
    path = _write(tmp_path, text)
    assert main(["config", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert line in out
    assert GuardSettings.resolve(config_file=path).block_for()[1].enabled is effective
    assert main(["config", "check", "--json", str(path)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["enabled"] is effective
    enabled_row = next(r for r in document["settings"] if r["path"] == "enabled")
    assert enabled_row["effective"] is effective


def test_from_file_says_it_leaves_the_adaptive_settings_behind(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _write(tmp_path, WHOLE % 'profile: "adaptive",')
    with caplog.at_level(logging.WARNING, logger="loopwatch.config"):
        block = LoopDetectionConfig.from_file(path)
    assert block.profile == "adaptive" and block.warning_threshold == 6
    messages = [r.getMessage() for r in caplog.records if r.name == "loopwatch.config"]
    assert messages == [MSG_ADAPTIVE_NOT_CARRIED.format(path=str(path))]
