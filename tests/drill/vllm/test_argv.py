"""The simulator's command line: every form of vLLM arguments a container spec carries."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oncall_drill.vllm_sim import ArgvError, main, normalize_argv, parse_argv

NOISE = [
    ["--dtype", "auto"],
    ["--trust-remote-code"],
    ["--tensor-parallel-size", "2"],
    ["-tp", "2"],
    ["--enable-prefix-caching"],
    ["--no-enable-prefix-caching"],
    ["--gpu_memory_utilization=0.85"],
    ["--disable-log-requests"],
    ["--chat-template", "/etc/template.jinja"],
]


def _flag_forms(n: int) -> list[list[str]]:
    return [
        ["--max-num-seqs", str(n)],
        [f"--max-num-seqs={n}"],
        ["--max_num_seqs", str(n)],
        [f"--max_num_seqs={n}"],
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ["--model", "m", "--max-num-seqs", "12"],
        ["--model", "m", "--max-num-seqs=12"],
        ["--model", "m", "--max_num_seqs", "12"],
        ["--model=m", "--max_num_seqs=12"],
        ["vllm", "serve", "m", "--max-num-seqs", "12"],
        ["vllm serve m --trust-remote-code --max_num_seqs 12"],
        ["/bin/sh", "-c", "vllm serve m --max_num_batched_tokens 1024 --max_num_seqs 12"],
        ["-c", "exec vllm serve m --max-num-seqs=12"],
        [
            "python3",
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            "m",
            "--max-num-seqs",
            "12",
        ],
        ["--model", "m", "--max-num-seqs", "256", "--max-num-seqs=12"],
    ],
)
def test_max_num_seqs_forms(argv: list[str]) -> None:
    config = parse_argv(argv).config
    assert config.max_num_seqs == 12
    assert config.model == "m"


@given(
    n=st.integers(min_value=1, max_value=4096),
    form=st.integers(min_value=0, max_value=3),
    noise=st.lists(st.sampled_from(NOISE), max_size=4),
    split_at=st.integers(min_value=0, max_value=4),
    wrapper=st.sampled_from(["flags", "vllm-serve", "shell-string", "sh-c"]),
)
def test_max_num_seqs_any_form_with_other_flags(
    n: int, form: int, noise: list[list[str]], split_at: int, wrapper: str
) -> None:
    flags = [token for group in noise[:split_at] for token in group]
    flags += _flag_forms(n)[form]
    flags += [token for group in noise[split_at:] for token in group]
    if wrapper == "flags":
        argv = ["--model", "m", *flags]
    elif wrapper == "vllm-serve":
        argv = ["vllm", "serve", "m", *flags]
    elif wrapper == "shell-string":
        argv = [shlex.join(["vllm", "serve", "m", *flags])]
    else:
        argv = ["/bin/sh", "-c", shlex.join(["vllm", "serve", "m", *flags])]
    parsed = parse_argv(argv)
    assert parsed.config.max_num_seqs == n
    assert parsed.config.model == "m"


def test_config_file_and_precedence(tmp_path: Path) -> None:
    config_file = tmp_path / "vllm.yaml"
    config_file.write_text("max_num_seqs: 24\nmax-model-len: 2048\nserved_model_name: [a, b]\n")
    from_file = parse_argv(["vllm", "serve", "m", "--config", str(config_file)]).config
    assert (from_file.max_num_seqs, from_file.max_model_len) == (24, 2048)
    assert from_file.served_model_names == ("a", "b")
    assert from_file.served_model_name == "a"
    cli_wins = parse_argv(["--config", str(config_file), "--model", "m", "--max-num-seqs=5"])
    assert cli_wins.config.max_num_seqs == 5


def test_unknown_flags_are_ignored_without_eating_known_ones() -> None:
    parsed = parse_argv(
        ["vllm", "serve", "m", "--dtype", "bfloat16", "--enforce-eager", "--port", "9001",
         "-tp", "2", "--no-enable-prefix-caching", "--kv-capacity-tokens", "4096"]
    )  # fmt: skip
    assert parsed.config.port == 9001
    assert parsed.config.kv_capacity_tokens == 4096
    assert parsed.config.model == "m"
    assert "--dtype bfloat16" in parsed.config.ignored_flags
    assert "--enforce-eager" in parsed.config.ignored_flags
    assert any("not simulated" in note for note in parsed.notes)


def test_non_loopback_host_becomes_loopback() -> None:
    parsed = parse_argv(["--model", "m", "--host", "0.0.0.0", "--port", "8000"])
    assert parsed.config.host == "127.0.0.1"
    assert any("0.0.0.0" in note for note in parsed.notes)


def test_lengths_blocks_and_defaults() -> None:
    config = parse_argv(
        ["--model", "m", "--max-model-len", "4K", "--num-gpu-blocks-override", "500"]
    ).config
    assert config.max_model_len == 4096
    assert config.kv_capacity_tokens == 500 * 16
    small = parse_argv(["--model", "m", "--kv-capacity-tokens", "1000"]).config
    assert small.max_model_len == 1000  # the default never exceeds the KV cache
    assert small.startup_error() is None
    too_long = parse_argv(
        ["--model", "m", "--kv-capacity-tokens", "1000", "--max-model-len", "2000"]
    )
    assert "larger than the available KV cache memory" in (too_long.config.startup_error() or "")


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(ArgvError) as info:
        parse_argv(["--model", "m", "--max-num-seqs", "many", "--speed", "fast", "--port"])
    problems = info.value.problems
    assert len(problems) == 3
    assert any("--max-num-seqs" in p and "many" in p for p in problems)
    assert any("--speed" in p for p in problems)
    assert any("--port expects a value" in p for p in problems)


def test_invalid_values_after_conversion() -> None:
    with pytest.raises(ArgvError) as info:
        parse_argv(["--model", "m", "--max-num-seqs", "0", "--metrics-version", "0.5"])
    assert len(info.value.problems) == 2


def test_normalize_argv_unwraps_commands() -> None:
    assert normalize_argv(["/bin/bash", "-c", "vllm serve m --port 1"]) == ["m", "--port", "1"]
    assert normalize_argv(
        ["python", "-m", "vllm.entrypoints.openai.api_server", "--port", "1"]
    ) == [
        "--port",
        "1",
    ]
    assert normalize_argv(["--chat-template", "a b c"]) == ["--chat-template", "a b c"]


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_usage(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vllm", "serve", "m", flag]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage:")
    assert "--max-num-seqs" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["--model", "m", "--max-num-seq=12"],
        ["--model", "m", "--max-num-s", "12"],
        ["--model", "m", "--max_num_seq", "12"],
        ["/bin/sh", "-c", "vllm serve m --max-num-seq 12"],
    ],
)
def test_abbreviated_flags_as_argparse_reads_them(argv: list[str]) -> None:
    assert parse_argv(argv).config.max_num_seqs == 12


@pytest.mark.parametrize("flag", ["--max-num", "--max-num-", "--max"])
def test_an_ambiguous_abbreviation_is_an_error(flag: str) -> None:
    with pytest.raises(ArgvError, match="ambiguous option") as caught:
        parse_argv(["--model", "m", flag, "12"])
    assert "--max-num-seqs" in str(caught.value) and "--max-num-batched-tokens" in str(caught.value)


def test_max_num_active_seqs_is_read_and_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    config = parse_argv(["--model", "m", "--max-num-seqs", "64", "--max_num_active_seqs=16"]).config
    assert (config.max_num_seqs, config.max_num_active_seqs, config.running_cap) == (64, 16, 16)
    assert parse_argv(["--model", "m", "--max-num-a", "8"]).config.max_num_active_seqs == 8
    # Above --max-num-seqs vLLM refuses to start (ValueError), and so does the simulator.
    code = main(["--model", "m", "--max-num-seqs", "8", "--max-num-active-seqs", "16"])
    assert code != 0
    captured = capsys.readouterr()
    assert "max_num_active_seqs (16) must be less than or equal to max_num_seqs (8)" in (
        captured.err + captured.out
    )
