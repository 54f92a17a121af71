"""The command line as a user meets it: version, help, config show, bad settings files."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml

from oncall import __version__
from oncall.cli.lazy_parser import LazyParser
from oncall.cli.main import app_args, build_parser
from tests.cli_runner import Result, run_oncall


def test_version() -> None:
    result = run_oncall("--version")
    assert result.code == 0
    assert result.stdout.strip() == f"oncall {__version__}"


def test_a_lazy_command_is_built_once_and_only_when_named() -> None:
    """`remediate` and `audit` are LazyParsers: their sub-parsers (from the actions' pydantic
    models) are made when the command is parsed, not for another command nor the top help."""
    built: list[str] = []

    def populate(parser: argparse.ArgumentParser) -> None:
        built.append(parser.prog)
        parser.add_argument("x")

    parser = argparse.ArgumentParser(prog="t")
    commands = parser.add_subparsers(dest="command", parser_class=LazyParser)
    commands.add_parser("plain")
    commands.add_parser("lazy", help="made when named", populate=populate)
    assert parser.parse_args(["plain"]).command == "plain"
    assert "made when named" in parser.format_help()
    assert built == []
    assert parser.parse_args(["lazy", "1"]).x == "1"
    assert parser.parse_args(["lazy", "2"]).x == "2"
    assert built == ["t lazy"]


@pytest.mark.parametrize(
    "words",
    [
        [],
        ["--config", "f.yaml"],
        ["--config=f.yaml", "--set", "a=b", "--set=c=d", "--read-only", "--context", "eu"],
        ["--conf", "f.yaml", "--re"],  # abbreviations, as argparse allows them
    ],
)
def test_the_apps_arguments_are_read_as_the_whole_parser_reads_them(words: list[str]) -> None:
    """`oncall [GLOBAL OPTIONS]` starts the app without building every command's parser
    (issue 13.5): the namespace is the one the whole parser makes of the same words."""
    assert app_args(words) == build_parser().parse_args(words)


@pytest.mark.parametrize(
    "words",
    [["--help"], ["-h"], ["--version"], ["config", "show"], ["--config", "f", "alerts"],
     ["--config"], ["--co", "x"], ["--bogus"], ["x"], ["--"], ["--set"]],
)  # fmt: skip
def test_anything_but_global_options_goes_to_the_whole_parser(words: list[str]) -> None:
    """A command, help, version, or a usage error: the whole parser answers, as before."""
    assert app_args(words) is None


def test_help_lists_commands_settings_and_exit_codes() -> None:
    result = run_oncall("--help")
    assert result.code == 0
    assert "config" in result.stdout
    assert "ONCALL_CONFIG" in result.stdout
    assert "exit codes" in result.stdout


def config_show(
    cwd: Path, *args: str, options: Sequence[str] = (), env: dict[str, str] | None = None
) -> Result:
    """`oncall [OPTIONS] config show [ARGS]` in `cwd`, with a clean ONCALL_* environment plus
    `env`."""
    return run_oncall(*options, "config", "show", *args, cwd=cwd, env=env)


def test_config_show_defaults_are_valid_yaml(tmp_path: Path) -> None:
    result = config_show(tmp_path)
    assert result.code == 0, result.stderr
    shown = yaml.safe_load(result.stdout)
    assert shown["prometheus"]["url"] == "http://127.0.0.1:9090"
    assert shown["redis"]["timeout"] == "2s"
    assert shown["read_only"] is False
    assert "# default" in result.stdout


def test_config_show_names_the_source_of_each_value(tmp_path: Path) -> None:
    (tmp_path / "oncall.yaml").write_text(
        "context:\n  name: prod-eu\nredis:\n  timeout: 1500ms\nprometheus:\n  url: http://127.0.0.1:9999\n"
    )
    env = {"ONCALL_PROMETHEUS__TIMEOUT": "3s", "ONCALL_REDIS__TIMEOUT": "4s"}
    packs = "alerts.packs=ai-service,platform"
    result = config_show(tmp_path, "-o", "json", "--set", packs, options=["--read-only"], env=env)
    assert result.code == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["config_file"] == str(tmp_path / "oncall.yaml")
    settings, sources = body["settings"], body["sources"]
    assert settings["context"]["name"] == "prod-eu"
    assert sources["context.name"] == "oncall.yaml:2"
    assert settings["prometheus"]["url"] == "http://127.0.0.1:9999"
    # environment beats the file
    assert settings["redis"]["timeout"] == "4s"
    assert sources["redis.timeout"] == "env ONCALL_REDIS__TIMEOUT"
    assert sources["prometheus.timeout"] == "env ONCALL_PROMETHEUS__TIMEOUT"
    # flags beat both
    assert settings["read_only"] is True
    assert sources["read_only"] == "flag --read-only"
    assert settings["alerts"]["packs"] == ["ai-service", "platform"]
    assert sources["alerts.packs"] == "flag --set alerts.packs"
    assert sources["gpu.source"] == "default"


def test_config_file_from_environment_and_flag(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("context:\n  name: from-env\n")
    (tmp_path / "b.yaml").write_text("context:\n  name: from-flag\n")
    result = config_show(tmp_path, "-o", "json", env={"ONCALL_CONFIG": "a.yaml"})
    assert json.loads(result.stdout)["settings"]["context"]["name"] == "from-env"
    result = config_show(
        tmp_path, "-o", "json", options=["--config", "b.yaml"], env={"ONCALL_CONFIG": "a.yaml"}
    )
    assert json.loads(result.stdout)["settings"]["context"]["name"] == "from-flag"


def test_secrets_are_masked_everywhere(tmp_path: Path) -> None:
    (tmp_path / "oncall.yaml").write_text(
        "redis:\n  url: redis://:hunter2@127.0.0.1:6379/0\n  password: swordfish\n"
        "prometheus:\n  bearer_token: tok-123\n"
    )
    for output in ("yaml", "json"):
        result = config_show(tmp_path, "-o", output)
        assert result.code == 0, result.stderr
        for secret in ("hunter2", "swordfish", "tok-123"):
            assert secret not in result.stdout
        assert "redis://:********@127.0.0.1:6379/0" in result.stdout


def test_secret_with_wrong_type_is_not_echoed(tmp_path: Path) -> None:
    (tmp_path / "oncall.yaml").write_text("redis:\n  password: [hunter2]\n")
    result = config_show(tmp_path)
    assert result.code == 2
    assert "redis.password" in result.stderr
    assert "hunter2" not in result.stderr


def test_unknown_key_and_wrong_type_are_both_reported(tmp_path: Path) -> None:
    (tmp_path / "oncall.yaml").write_text(
        "prometheus:\n"
        "  url: http://127.0.0.1:9090\n"
        "  timout: 5s\n"
        "redis:\n"
        "  timeout: soon\n"
        "guards:\n"
        "  rate_limit_actions: many\n"
    )
    result = config_show(tmp_path)
    assert result.code == 2
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert lines[0] == "oncall: invalid settings (3 problems):"
    assert (
        "oncall.yaml:3:3: prometheus.timout: unknown key 'timout'; did you mean 'timeout'?"
        in lines[1]
    )
    assert "oncall.yaml:5:12: redis.timeout: invalid duration 'soon'" in lines[2]
    assert "oncall.yaml:7:23: guards.rate_limit_actions:" in lines[3]
    assert "'many'" in lines[3]


def test_yaml_syntax_error_reports_its_position(tmp_path: Path) -> None:
    (tmp_path / "oncall.yaml").write_text("redis:\n  url: redis://x\n timeout: 2s\n")
    result = config_show(tmp_path)
    assert result.code == 2
    assert "Traceback" not in result.stderr
    assert "oncall.yaml:3:2: YAML syntax error" in result.stderr


def test_bad_environment_and_flag_values_name_their_source(tmp_path: Path) -> None:
    env = {"ONCALL_REDIS__TIMEOUT": "-1", "ONCALL_NOPE": "1"}
    result = config_show(tmp_path, "--set", "gpu.source=cuda", env=env)
    assert result.code == 2
    assert "env ONCALL_REDIS__TIMEOUT: redis.timeout:" in result.stderr
    assert "env ONCALL_NOPE: nope: unknown key 'nope'" in result.stderr
    assert "flag --set gpu.source: gpu.source:" in result.stderr


def test_missing_config_file_is_a_usage_error(tmp_path: Path) -> None:
    result = config_show(tmp_path, options=["--config", "absent.yaml"])
    assert result.code == 2
    assert "absent.yaml: file not found" in result.stderr


def test_malformed_set_flag(tmp_path: Path) -> None:
    result = config_show(tmp_path, "--set", "read_only")
    assert result.code == 2
    assert "--set expects KEY=VALUE" in result.stderr


def test_bare_oncall_without_a_terminal_says_the_app_needs_one(tmp_path: Path) -> None:
    result = run_oncall(cwd=tmp_path)  # stdin and stdout are pipes here
    assert result.code == 2
    assert "the app needs a terminal" in result.stderr
