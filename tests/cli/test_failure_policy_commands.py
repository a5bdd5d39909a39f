"""`tidepool job submit` with an ExitCodeAndErrorMsg policy, and `job show` naming it."""

from __future__ import annotations

from typing import Any

from tests.cli.conftest import as_json, fails, login

SUBMIT = ("--workspace", "workspace_b", "--gpus", "8")


def test_job_submit_takes_the_policy_lists_and_show_names_policy_and_checkpoint(cli: Any) -> None:
    login(cli, "bob")
    policy = ("--failure-policy", "ExitCodeAndErrorMsg", "--retry-exit-code", "137")
    made = as_json(
        cli,
        "job",
        "submit",
        *SUBMIT,
        *policy,
        "--retry-exit-code",
        "143",
        "--fail-message",
        "CUDA out of memory",
        "picky",
    )
    assert made["failure_policy"] == "ExitCodeAndErrorMsg"
    assert (made["retry_exit_codes"], made["fail_messages"]) == ([137, 143], ["CUDA out of memory"])
    code, out, _ = cli("job", "show", "picky")
    assert code == 0 and "ExitCodeAndErrorMsg" in out and "no checkpoint reported" in out
    err = fails(cli, "job", "submit", *SUBMIT, *policy, "--retry-message", "(oops", "bad")
    assert "retry_messages:" in err and "not a valid regular expression" in err
