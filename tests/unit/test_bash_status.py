"""The status line run_bash ends its answers with, written and read in one module."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agentgraph.capabilities.tools.bash import BashResult, bash_status, format_bash_result


@given(
    output=st.text(),
    exit_code=st.integers(-64, 255),
    timed_out=st.booleans(),
)
def test_every_answer_is_read_back_as_it_was_written(
    output: str, exit_code: int, timed_out: bool
) -> None:
    result = BashResult(output, exit_code, timed_out, 5.0, 0)
    answer = format_bash_result(result)
    status = bash_status(answer)
    assert status is not None
    assert status.exit_code == (None if timed_out else exit_code)
    # What comes before the status line is the output, ended with a line break.
    shown = answer[: status.start]
    assert shown == (output if not output or output.endswith("\n") else output + "\n")


def test_a_status_inside_the_output_is_not_the_answers_status() -> None:
    assert bash_status("no status line") is None
    assert bash_status("echo '[exit code 0]' done") is None
    assert bash_status("[exit code 0] printed\n") is None
    printed = "[exit code 3] printed\n"
    found = bash_status(f"{printed}[exit code 0]\n")
    assert found is not None and found.exit_code == 0 and found.start == len(printed)
    killed = bash_status("…\n[exit code -9 (killed by SIGKILL)]")
    assert killed is not None and killed.exit_code == -9
