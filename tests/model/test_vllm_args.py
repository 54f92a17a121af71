"""`--max-num-seqs` in every form a Deployment can carry it (backends.md §1.6), with locations
precise enough for a JSON patch that changes exactly the value."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oncall.model.vllm_args import MaxNumSeqs, parse_max_num_seqs


def test_equals_form_in_args() -> None:
    found = parse_max_num_seqs(None, ["--model", "qwen", "--max-num-seqs=256"])
    assert found == MaxNumSeqs(
        value=256,
        form="equals",
        field="args",
        index=2,
        span=(15, 18),
        text="--max-num-seqs=256",
        flag="--max-num-seqs",
        occurrences=1,
    )
    assert found.editable
    assert found.rewrite(128) == "--max-num-seqs=128"
    assert found.json_pointer(0) == "/spec/template/spec/containers/0/args/2"


def test_separate_form_points_at_the_value_element() -> None:
    found = parse_max_num_seqs(None, ["--model", "qwen", "--max-num-seqs", "256"])
    assert (found.value, found.form, found.field, found.index) == (256, "separate", "args", 3)
    assert (found.text, found.span) == ("256", (0, 3))
    assert found.rewrite(64) == "64"
    assert found.json_pointer(1) == "/spec/template/spec/containers/1/args/3"


@pytest.mark.parametrize(
    ("args", "form", "flag"),
    [
        (["--max_num_seqs", "32"], "separate", "--max_num_seqs"),
        (["--max_num_seqs=32"], "equals", "--max_num_seqs"),
        (["--max-num_seqs=32"], "equals", "--max-num_seqs"),
    ],
)
def test_underscores_are_the_same_flag(args: list[str], form: str, flag: str) -> None:
    found = parse_max_num_seqs(None, args)
    assert (found.value, found.form, found.flag) == (32, form, flag)
    assert found.rewrite(16).endswith("16")


def test_flag_in_command_when_the_container_overrides_the_entrypoint() -> None:
    found = parse_max_num_seqs(
        ["vllm", "serve", "qwen", "--max-num-seqs", "512"], ["--port", "8000"]
    )
    assert (found.value, found.field, found.index) == (512, "command", 4)
    found = parse_max_num_seqs(["vllm", "serve", "qwen", "--max-num-seqs"], ["96", "--port", "1"])
    assert (found.value, found.form, found.field, found.index) == (96, "separate", "args", 0)


def test_shell_string_in_args_like_the_vllm_k8s_guide() -> None:
    script = "vllm serve mistralai/Mistral-7B --trust-remote-code --max-num-seqs 256 --port 8000"
    found = parse_max_num_seqs(["/bin/sh", "-c"], [script])
    assert (found.value, found.form, found.field, found.index) == (256, "shell", "args", 0)
    assert found.text == script
    start, end = found.span or (0, 0)
    assert script[start:end] == "256"
    assert found.rewrite(64) == script.replace("256", "64")


def test_shell_string_in_command_with_equals_and_options() -> None:
    script = "set -e\nexec vllm serve qwen \\\n  --max_num_seqs=128 --gpu-memory-utilization 0.9"
    found = parse_max_num_seqs(["bash", "-ec", script], None)
    assert (found.value, found.form, found.field, found.index) == (128, "shell", "command", 2)
    assert found.flag == "--max_num_seqs"
    assert found.rewrite(256) == script.replace("=128", "=256")


def test_shell_value_in_quotes_is_edited_inside_the_quotes() -> None:
    script = "vllm serve qwen --max-num-seqs '256' && echo done"
    found = parse_max_num_seqs(["sh", "-c", script])
    assert found.value == 256
    assert found.rewrite(8) == "vllm serve qwen --max-num-seqs '8' && echo done"


def test_shell_comments_and_other_commands_are_not_flags() -> None:
    script = "# --max-num-seqs 1\necho '--max-num-seqs 2'; vllm serve qwen"
    found = parse_max_num_seqs(["sh", "-c", script])
    assert (found.form, found.value, found.occurrences) == ("default", None, 0)


def test_shell_value_that_is_an_expansion_is_not_editable() -> None:
    found = parse_max_num_seqs(["sh", "-c", 'vllm serve qwen --max-num-seqs "$SEQS"'])
    assert (found.form, found.value) == ("shell", None)
    assert found.problem == "value '$SEQS' is not a literal integer"
    assert not found.editable
    with pytest.raises(ValueError, match="cannot be rewritten"):
        found.rewrite(64)


def test_shell_positional_parameters_after_the_script_are_not_vllm_args() -> None:
    found = parse_max_num_seqs(["sh", "-c", 'vllm serve "$@"', "sh", "--max-num-seqs", "4"])
    assert found.form == "default"


def test_kubernetes_env_reference_is_reported_not_guessed() -> None:
    found = parse_max_num_seqs(None, ["--max-num-seqs", "$(MAX_NUM_SEQS)"])
    assert (found.form, found.value, found.index) == ("separate", None, 1)
    assert found.problem is not None and "not a literal integer" in found.problem


def test_last_occurrence_wins_like_argparse() -> None:
    found = parse_max_num_seqs(None, ["--max-num-seqs=256", "--model", "m", "--max_num_seqs", "64"])
    assert (found.value, found.index, found.occurrences) == (64, 4, 2)


def test_config_file_form() -> None:
    found = parse_max_num_seqs(None, ["--config", "/etc/vllm/config.yaml", "--port", "8000"])
    assert found == MaxNumSeqs(value=None, form="config", config_file="/etc/vllm/config.yaml")
    assert not found.editable
    with pytest.raises(ValueError, match="no element"):
        found.json_pointer(0)
    in_shell = parse_max_num_seqs(["sh", "-c", "vllm serve --config=/cfg/v.yaml"])
    assert (in_shell.form, in_shell.config_file) == ("config", "/cfg/v.yaml")


def test_command_line_beats_config_file() -> None:
    found = parse_max_num_seqs(None, ["--config", "/etc/v.yaml", "--max-num-seqs=32"])
    assert (found.form, found.value, found.config_file) == ("equals", 32, "/etc/v.yaml")


@pytest.mark.parametrize(
    ("command", "args"), [(None, None), ([], []), (["vllm", "serve", "qwen"], ["--port", "1"])]
)
def test_absent_means_vllms_default(command: list[str] | None, args: list[str] | None) -> None:
    found = parse_max_num_seqs(command, args)
    assert found == MaxNumSeqs(value=None, form="default")
    assert found.facts()["form"] == "default"


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--max-num-seqs"], "--max-num-seqs has no value"),
        (["--max-num-seqs", "--port", "8000"], "--max-num-seqs has no value"),
        (["--max-num-seqs="], "value '' is not a literal integer"),
        (["--max-num-seqs 256"], "flag and value share one element, which vLLM rejects"),
    ],
)
def test_malformed_flags_are_reported(args: list[str], problem: str) -> None:
    found = parse_max_num_seqs(None, args)
    assert found.value is None
    assert found.problem == problem
    assert not found.editable


def test_shell_flag_without_value_and_unterminated_quote() -> None:
    assert parse_max_num_seqs(["sh", "-c", "vllm serve --max-num-seqs; echo"]).problem == (
        "--max-num-seqs has no value"
    )
    found = parse_max_num_seqs(["sh", "-c", "vllm serve --max-num-seqs '12"])
    assert found.value == 12  # the shell would reject it; we still point at the digits
    assert found.rewrite(3) == "vllm serve --max-num-seqs '3"


def test_rewrite_rejects_non_positive_values() -> None:
    found = parse_max_num_seqs(None, ["--max-num-seqs=256"])
    for bad in (0, -1, True):
        with pytest.raises(ValueError, match="positive integer"):
            found.rewrite(bad)


def test_facts_are_json_able() -> None:
    found = parse_max_num_seqs(["sh", "-c", "vllm serve --max-num-seqs 7"])
    assert found.facts() == {
        "value": 7,
        "form": "shell",
        "field": "command",
        "index": 2,
        "span": [26, 27],
        "flag": "--max-num-seqs",
        "config_file": None,
        "occurrences": 1,
        "problem": None,
        "edit_problem": None,
        "from_env": [],
    }


argv_words = st.lists(
    st.one_of(
        st.text(max_size=30),
        st.sampled_from(
            [
                "--max-num-seqs",
                "--max_num_seqs=",
                "--max-num-seqs=12",
                "--config",
                "sh",
                "-c",
                "bash",
                "-ec",
                "256",
                "'",
                '"',
                "\\",
                "--max-num-seqs '9",
                'vllm serve --max-num-seqs "1_0"',
            ]
        ),
    ),
    max_size=8,
)


@given(command=st.one_of(st.none(), argv_words), args=st.one_of(st.none(), argv_words))
def test_never_raises_and_locations_are_consistent(
    command: list[str] | None, args: list[str] | None
) -> None:
    found = parse_max_num_seqs(command, args)
    assert found.form in {"equals", "separate", "shell", "config", "default"}
    if not found.editable:
        return
    assert found.index is not None and found.span is not None
    source = command if found.field == "command" else args
    assert source is not None and source[found.index] == found.text
    # Rewriting changes exactly that value: parsing the result finds the new one, same place.
    patched = list(source)
    patched[found.index] = found.rewrite(77)
    again = (
        parse_max_num_seqs(patched, args)
        if found.field == "command"
        else parse_max_num_seqs(command, patched)
    )
    assert (again.value, again.form, again.field, again.index) == (
        77,
        found.form,
        found.field,
        found.index,
    )
