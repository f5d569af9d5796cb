"""Secrets out of reach, from the real CLI: allowlisted environment, sandboxed shell,
redaction of credential formats before the model, the database and exports."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentgraph.capabilities.tools import bash as bash_tool
from agentgraph.capabilities.tools.bash import GIT_PINNED_NOTE, GIT_READ_ONLY_NOTE
from agentgraph.capabilities.tools.sandbox import BWRAP_EXECUTABLE
from tests.cli_helpers import run_cli
from tests.fakes.openai_server import FakeOpenAIServer
from tests.integration.reliability.helpers import (
    KEY,
    agent_env,
    all_files_bytes,
    sigkill,
    spawn_cli,
    wait_for,
)
from tests.proc_helpers import wait_until_gone
from tests.sandbox_helpers import bin_without_bwrap, require_sandbox, sandbox_mode

__all__ = ["sandbox_mode"]  # a fixture, used by name

# Credentials of the kinds a hostile test pass saw leave through printenv and
# /proc/$PPID/environ. The values have no known token format on purpose: only the
# environment allowlist and the sandbox keep them from the command.
AGENT_SECRETS = {
    "MY_PRIVATE_KEY": "pk-9f8e7d6c5b4a3921",
    "STRIPE_KEY": "stripe-Zq81hVx03kLm",
    "DEPLOY_KEY": "dk-71HqPz0aLm2Xc9",
    "DB_PASS": "Tr0ub4dor-3-prod",
    "AUTH_BEARER": "bearer-Qw3rty-8812",
    "SLACK_WEBHOOK_URL": "https://hooks.example.net/T0/B0/xY9zW8",
    "SENTRY_DSN": "https://abc123def456@errors.example.net/42",
    "GITHUB_TOKEN": "gh-token-0aZ9bY8cX7",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI-K7MDENG",
    "PGPASSWORD": "pg-Secret-4711-x",
}

# Known credential formats (fakes, built so no scanner takes them for real ones).
TOKENS = {
    "github": "ghp_" + "A1b2C3d4E5f6G7h8I9j0" + "K1l2M3n4O5p6",
    "github_pat": "github_pat_" + "11ABCDEFG0" + "x" * 40,
    "aws_id": "AKIA" + "IOSFODNN7EXAMPLE",
    "slack": "xoxb-" + "1234567890-abcdefghijKLM",
    "stripe": "sk_live_" + "51Habcdefghijklmnop",
    "openai": "sk-proj-" + "abcdefghijklmnopqrstuvWXYZ0123",
    "anthropic": "sk-ant-api03-" + "abcdefghijklmnopqrstuvwxyz",
    "jwt": "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0." + "dozjgNryP4J3jVmNHl0w5N",
    "pem_body": "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun",
    "url_password": "hunter2-db-Pa55",
    "sentry_key": "0123456789abcdef0123456789abcdef",
}
TOKEN_FILE = f"""# deploy settings
GITHUB = {TOKENS["github"]}
GITHUB_FINE = {TOKENS["github_pat"]}
aws_access_key_id = {TOKENS["aws_id"]}
slack: {TOKENS["slack"]}
stripe={TOKENS["stripe"]}
openai={TOKENS["openai"]}
anthropic={TOKENS["anthropic"]}
session={TOKENS["jwt"]}
DATABASE_URL=postgres://app:{TOKENS["url_password"]}@db.internal:5432/app
SENTRY=https://{TOKENS["sentry_key"]}@o1.ingest.sentry.io/42
-----BEGIN RSA PRIVATE KEY-----
{TOKENS["pem_body"]}
-----END RSA PRIVATE KEY-----
plain line that stays
"""


def _tool_results(server: FakeOpenAIServer) -> list[str]:
    return [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]


def _stored(home: Path) -> bytes:
    """Everything agentgraph wrote under its home but the undo snapshots (user files)."""
    root = home / ".agentgraph"
    return b"".join(b for p, b in all_files_bytes(root).items() if "snapshots" not in p.parts)


def test_commands_never_see_the_agents_secrets(
    home: Path, workspace: Path, sandbox_mode: str
) -> None:
    commands = [
        "printenv",
        "tr '\\0' '\\n' < /proc/$PPID/environ",
        "tr '\\0' '\\n' < /proc/1/environ",
        # Every process the command can see, the agent included when unsandboxed.
        "for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done 2>/dev/null; true",
    ]
    script = [
        {"tool_calls": [{"name": "run_bash", "arguments": {"command": c}} for c in commands]},
        {"content": "done"},
    ]
    with FakeOpenAIServer(script) as server:
        env = agent_env(home, server, AGENTGRAPH_SANDBOX=sandbox_mode, **AGENT_SECRETS)
        done = run_cli(["run", "look around", "--thread", "env"], cwd=workspace, env=env)
        assert done.returncode == 0, done.stderr
        results = _tool_results(server)
        sent = json.dumps(server.requests[-1]["messages"])
    assert len(results) == len(commands)
    assert "PATH=" in results[0]  # printenv ran
    for value in AGENT_SECRETS.values():
        assert value not in sent
        assert value.encode() not in _stored(home)
    for name in AGENT_SECRETS:
        assert f"{name}=" not in results[0], f"{name} passed to the command"
    if sandbox_mode == "on":
        # The agent's process is not even visible: no name, not only no value.
        for result in results:
            for name in [*AGENT_SECRETS, "OPENAI_API_KEY"]:
                assert f"{name}=" not in result, f"{name} readable in the sandbox"
            assert KEY not in result


def test_sandbox_writes_only_the_workspace_and_its_own_tmp(
    tmp_path: Path, home: Path, workspace: Path
) -> None:
    require_sandbox()
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("original\n")
    var_tmp = Path("/var/tmp") / f"agentgraph-sandbox-{secrets.token_hex(6)}"
    command = (
        f"echo pwned > {victim}; touch {outside}/new; touch {var_tmp}; "
        f"echo x > {home}/dotfile; echo scratch > /tmp/s && cat /tmp/s; echo ok > inside.txt"
    )
    script = [
        {"tool_calls": [{"name": "run_bash", "arguments": {"command": command}}]},
        {"content": "done"},
    ]
    try:
        with FakeOpenAIServer(script) as server:
            env = agent_env(home, server, AGENTGRAPH_SANDBOX="on")
            done = run_cli(["run", "write", "--thread", "fs"], cwd=workspace, env=env)
            assert done.returncode == 0, done.stderr
            (result,) = _tool_results(server)
        assert victim.read_text() == "original\n"
        assert not (outside / "new").exists()
        assert not var_tmp.exists()
        assert not (home / "dotfile").exists()
        assert "scratch" in result  # its private /tmp is writable
        assert (workspace / "inside.txt").read_text() == "ok\n"
    finally:
        var_tmp.unlink(missing_ok=True)


@pytest.mark.parametrize("network", ["off", "on"])
def test_sandbox_network_is_off_unless_enabled(home: Path, workspace: Path, network: str) -> None:
    require_sandbox()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        command = (
            f"if (echo hello > /dev/tcp/127.0.0.1/{port}) 2>/dev/null; "
            "then echo CONNECTED; else echo REFUSED; fi"
        )
        script = [
            {"tool_calls": [{"name": "run_bash", "arguments": {"command": command}}]},
            {"content": "done"},
        ]
        with FakeOpenAIServer(script) as server:
            env = agent_env(home, server, AGENTGRAPH_SANDBOX="on", AGENTGRAPH_BASH_NETWORK=network)
            done = run_cli(["run", "connect", "--thread", "net"], cwd=workspace, env=env)
            assert done.returncode == 0, done.stderr
            (result,) = _tool_results(server)
        listener.setblocking(False)
        try:
            connection, _ = listener.accept()
            connection.close()
            reached = True
        except BlockingIOError:
            reached = False
    if network == "off":
        assert "REFUSED" in result and not reached
    else:
        assert "CONNECTED" in result and reached


def test_sandboxed_command_dies_with_a_killed_agent(home: Path, workspace: Path) -> None:
    require_sandbox()
    marker = f"{900 + secrets.randbelow(99)}.{secrets.randbelow(10**6):06d}"
    script = [
        {
            "tool_calls": [
                {"name": "run_bash", "arguments": {"command": f"touch started; sleep {marker}"}}
            ]
        },
    ]
    with FakeOpenAIServer(script) as server:
        env = agent_env(home, server, AGENTGRAPH_SANDBOX="on")
        proc = spawn_cli(["run", "sleep", "--thread", "die"], cwd=workspace, env=env)
        wait_for(workspace / "started", proc)
        sigkill(proc)
    # No later agentgraph start is needed: the kernel ends the sandbox with its parent.
    assert wait_until_gone(lambda cmd, _: marker in cmd) == []


def test_credential_formats_are_redacted_before_model_store_and_export(
    home: Path, workspace: Path
) -> None:
    (workspace / "deploy.env").write_text(TOKEN_FILE)
    script = [
        {
            "tool_calls": [
                {"name": "read_file", "arguments": {"path": "deploy.env"}},
                {"name": "grep", "arguments": {"pattern": "=", "path": "."}},
                {"name": "run_bash", "arguments": {"command": "cat deploy.env"}},
            ]
        },
        {"content": "done"},
    ]
    with FakeOpenAIServer(script) as server:
        env = agent_env(home, server)
        done = run_cli(["run", "read the config", "--thread", "tok"], cwd=workspace, env=env)
        assert done.returncode == 0, done.stderr
        results = _tool_results(server)
        sent = json.dumps(server.requests[-1]["messages"])
        exports = [
            run_cli(["sessions", "export", "tok", "--format", fmt], cwd=workspace, env=env)
            for fmt in ("jsonl", "md")
        ]
    assert len(results) == 3
    for result in results:
        assert "[REDACTED]" in result
    assert "plain line that stays" in results[0]
    assert "postgres://app:[REDACTED]@db.internal" in results[0]  # URL kept, password not
    for export in exports:
        assert export.returncode == 0, export.stderr
        assert "[REDACTED]" in export.stdout
    stored = _stored(home)
    for kind, token in TOKENS.items():
        assert token not in sent, f"{kind} sent to the model"
        assert token.encode() not in stored, f"{kind} stored"
        for export in exports:
            assert token not in export.stdout, f"{kind} exported"


def _bin_without_bwrap(tmp_path: Path) -> str:
    return bin_without_bwrap(tmp_path / "bin")


def test_without_bwrap_run_refuses_commands_and_says_why(
    tmp_path: Path, home: Path, workspace: Path
) -> None:
    """Fail closed: no sandbox and nobody to approve means the command does not run."""
    script = [
        {"tool_calls": [{"name": "run_bash", "arguments": {"command": "touch ran; printenv"}}]},
        {"content": "done"},
    ]
    with FakeOpenAIServer(script) as server:
        env = agent_env(home, server, AGENTGRAPH_SANDBOX="auto", **AGENT_SECRETS)
        env["PATH"] = _bin_without_bwrap(tmp_path)
        done = run_cli(["run", "go", "--thread", "nobwrap"], cwd=workspace, env=env)
        assert done.returncode == 0, done.stderr
        (result,) = _tool_results(server)
    assert not (workspace / "ran").exists()
    assert result.startswith("Error: commands cannot run here: the shell sandbox cannot start")
    assert "bwrap is not installed" in result
    for value in AGENT_SECRETS.values():
        assert value not in result


@pytest.mark.parametrize(("answer", "runs"), [("y", True), ("n", False)])
def test_without_bwrap_the_repl_asks_before_each_command(
    tmp_path: Path, home: Path, workspace: Path, answer: str, runs: bool
) -> None:
    script = [
        {"tool_calls": [{"name": "run_bash", "arguments": {"command": "touch ran"}}]},
        {"content": "finished"},
    ]
    with FakeOpenAIServer(script) as server:
        env = agent_env(home, server, AGENTGRAPH_SANDBOX="auto")
        env["PATH"] = _bin_without_bwrap(tmp_path)
        done = run_cli([], cwd=workspace, env=env, stdin=f"make a file\n{answer}\n/exit\n")
        assert done.returncode == 0, done.stderr
        (result,) = _tool_results(server)
    assert "run_bash wants to run (no sandbox: bwrap is not installed" in done.stderr
    assert (workspace / "ran").exists() is runs
    if not runs:
        assert "declined" in result


def test_without_bwrap_sandbox_off_runs_with_the_allowlist(
    tmp_path: Path, home: Path, workspace: Path
) -> None:
    """The user's own AGENTGRAPH_SANDBOX=off: commands run unsandboxed, still allowlisted."""
    script = [
        {"tool_calls": [{"name": "run_bash", "arguments": {"command": "touch ran; printenv"}}]},
        {"tool_calls": [{"name": "run_bash", "arguments": {"command": "touch ran2"}}]},
        {"content": "done"},
    ]
    with FakeOpenAIServer(script) as server:
        env = agent_env(home, server, AGENTGRAPH_SANDBOX="off", **AGENT_SECRETS)
        env["PATH"] = _bin_without_bwrap(tmp_path)
        done = run_cli(["run", "go", "--thread", "nobwrap"], cwd=workspace, env=env)
        assert done.returncode == 0, done.stderr
        results = _tool_results(server)
    assert "no sandbox" not in done.stderr and "cannot run here" not in done.stderr
    assert (workspace / "ran").exists() and (workspace / "ran2").exists()
    for name in AGENT_SECRETS:
        assert f"{name}=" not in results[0]


def test_bwrap_that_cannot_start_refuses_commands_with_its_reason(
    tmp_path: Path, home: Path, workspace: Path
) -> None:
    """What a host without unprivileged user namespaces looks like: bwrap fails at once."""
    folder = _bin_without_bwrap(tmp_path)
    broken = Path(folder) / BWRAP_EXECUTABLE
    broken.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create a new namespace' >&2\nexit 1\n"
    )
    broken.chmod(0o755)
    script = [
        {"tool_calls": [{"name": "run_bash", "arguments": {"command": "touch ran"}}]},
        {"content": "done"},
    ]
    with FakeOpenAIServer(script) as server:
        env = agent_env(home, server, AGENTGRAPH_SANDBOX="auto")
        env["PATH"] = folder
        done = run_cli(["run", "go", "--thread", "nouserns"], cwd=workspace, env=env)
        assert done.returncode == 0, done.stderr
        (result,) = _tool_results(server)
    assert "No permissions to create a new namespace" in result
    assert not (workspace / "ran").exists()


def test_sandbox_on_without_bwrap_refuses_commands(
    tmp_path: Path, home: Path, workspace: Path
) -> None:
    script = [
        {"tool_calls": [{"name": "run_bash", "arguments": {"command": "touch ran"}}]},
        {"content": "done"},
    ]
    with FakeOpenAIServer(script) as server:
        env = agent_env(home, server, AGENTGRAPH_SANDBOX="on")
        env["PATH"] = _bin_without_bwrap(tmp_path)
        done = run_cli(["run", "go", "--thread", "refuse"], cwd=workspace, env=env)
        assert done.returncode == 0, done.stderr
        (result,) = _tool_results(server)
    assert result.startswith("Error: the shell sandbox is required (AGENTGRAPH_SANDBOX=on)")
    assert not (workspace / "ran").exists()


def test_bash_env_allow_passes_named_variables(home: Path, workspace: Path) -> None:
    script = [
        {"tool_calls": [{"name": "run_bash", "arguments": {"command": "printenv"}}]},
        {"content": "done"},
    ]
    with FakeOpenAIServer(script) as server:
        env = agent_env(
            home,
            server,
            AGENTGRAPH_BASH_ENV_ALLOW="MY_TOOL_HOME,OTHER",
            MY_TOOL_HOME="/opt/tool",
            NOT_ALLOWED="x",
        )
        done = run_cli(["run", "go", "--thread", "allow"], cwd=workspace, env=env)
        assert done.returncode == 0, done.stderr
        (result,) = _tool_results(server)
    assert "MY_TOOL_HOME=/opt/tool" in result
    assert "NOT_ALLOWED" not in result


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """git as the user runs it in their own shell (their config, hooks and monitor)."""
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(
        ["git", "-c", "user.name=u", "-c", "user.email=u@example.net", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


# Every way a command could leave git a program of its choosing: a monitor in its config,
# a hook, a common dir holding another config, or a .git file naming another git dir.
PLANT_COMMANDS = [
    "printf '[core]\\n\\tfsmonitor = \"touch {marker}; false\"\\n' >> .git/config",
    "printf '#!/bin/sh\\ntouch {marker}\\n' > .git/hooks/pre-commit && "
    "chmod +x .git/hooks/pre-commit",
    "mkdir -p evil && cp -r .git/objects .git/refs .git/HEAD evil/ && "
    "printf '[core]\\n\\tfsmonitor = \"touch {marker}; false\"\\n' > evil/config && "
    "echo ../evil > .git/commondir",
    "mv .git .git-old && printf 'gitdir: evil\\n' > .git",
]


@pytest.mark.parametrize("git_write", ["off", "on"])
def test_a_sandboxed_command_cannot_leave_git_a_program_to_run(
    tmp_path: Path, home: Path, workspace: Path, git_write: str
) -> None:
    """What git runs by itself (a monitor, hooks) comes from the repository's .git: a
    command that could rewrite it would have the user's next git, or the agent's own
    outside the sandbox, run its program with the user's rights."""
    require_sandbox()
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    marker = tmp_path / "escaped"
    (workspace / "app.py").write_text("x = 1\n")
    assert _git(workspace, "init", "-q").returncode == 0
    assert _git(workspace, "add", "app.py").returncode == 0
    assert _git(workspace, "commit", "-qm", "start").returncode == 0
    config = (workspace / ".git" / "config").read_bytes()
    # One command, so that the plants run in this order (a reply's calls run together).
    commands = ["; ".join(c.format(marker=marker) for c in PLANT_COMMANDS)]
    commands += ["git log --oneline", "echo y = 2 >> app.py && git add app.py"]
    script = [
        {"tool_calls": [{"name": "run_bash", "arguments": {"command": c}} for c in commands]},
        {"content": "done"},
    ]
    with FakeOpenAIServer(script) as server:
        env = agent_env(home, server, AGENTGRAPH_SANDBOX="on", AGENTGRAPH_BASH_GIT_WRITE=git_write)
        done = run_cli(["run", "plant", "--thread", "git"], cwd=workspace, env=env)
        assert done.returncode == 0, done.stderr
        results = _tool_results(server)
    log, add = results[-2:]
    if git_write == "on":  # the user's own choice: the command writes .git like any file
        # Every plant took: what the protection stops when it is on.
        old = workspace / ".git-old"
        assert (workspace / ".git").read_text() == "gitdir: evil\n"
        assert f"touch {marker}" in (old / "config").read_text()
        assert os.access(old / "hooks" / "pre-commit", os.X_OK)
        assert (old / "commondir").read_text() == "../evil\n"
        assert f"touch {marker}" in (workspace / "evil" / "config").read_text()
        return
    assert (workspace / ".git").is_dir() and not (workspace / ".git-old").exists()
    assert (workspace / ".git" / "config").read_bytes() == config
    assert not (workspace / ".git" / "hooks" / "pre-commit").exists()
    assert not (workspace / ".git" / "commondir").exists()
    assert "start" in log  # commands that only read the repository work
    assert "Read-only file system" in add and GIT_READ_ONLY_NOTE in add
    # The user's own git after the session runs nothing the model chose.
    assert _git(workspace, "status").returncode == 0
    assert _git(workspace, "commit", "-qam", "next").returncode == 0
    assert not marker.exists()


def _repository(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True)
    for name, text in files.items():
        (path / name).write_text(text)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "start"]):
        assert _git(path, *args).returncode == 0
    return path


def _submodule(top: Path, source: Path, path: str) -> None:
    added = _git(
        top, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(source), path
    )
    assert added.returncode == 0, added.stderr


def _plant_then_write(home: Path, workspace: Path, plant: str, write: str) -> str:
    """Run the ``plant`` command, then ``write``, in one reply through ``agentgraph run``
    sandboxed; check the model was told why the plant failed; ``write``'s result."""
    script = [
        {"tool_calls": [{"name": "run_bash", "arguments": {"command": c}} for c in (plant, write)]},
        {"content": "done"},
    ]
    with FakeOpenAIServer(script) as server:
        env = agent_env(home, server, AGENTGRAPH_SANDBOX="on")
        done = run_cli(["run", "plant", "--thread", "git"], cwd=workspace, env=env)
        assert done.returncode == 0, done.stderr
        planted, written = _tool_results(server)[-2:]
    assert GIT_READ_ONLY_NOTE in planted and GIT_PINNED_NOTE in planted
    return written


# Each way a command could have the user's next ``git status`` in the workspace run a
# program: it steps into every submodule whose folder holds a ``.git``, and into theirs,
# with the config that ``.git`` names. ``plant`` copies a submodule's git dir and gives the
# copy a monitor touching the marker; each line then points a submodule's ``.git`` at it:
# rewritten in place, by moving the folder holding it away (a mount moves along), in a
# submodule of a submodule, and in a submodule that was never checked out.
SUBMODULE_PLANTS = {
    "rewritten": 'plant .git/modules/a/one ev1 {m} && echo "gitdir: $PWD/ev1" > a/one/.git',
    "moved": "plant .git/modules/b/two ev2 {m} && mv b b-old && mkdir -p b/two && "
    'echo "gitdir: $PWD/ev2" > b/two/.git',
    "nested": "plant .git/modules/c/mid/modules/leaf ev3 {m} && "
    'echo "gitdir: $PWD/ev3" > c/mid/leaf/.git',
    "nested moved": "plant .git/modules/d/mid/modules/leaf ev4 {m} && "
    'mv d/mid/leaf d/mid/leaf-old && mkdir d/mid/leaf && echo "gitdir: $PWD/ev4" > d/mid/leaf/.git',
    "not checked out": 'plant .git/modules/e/raw ev5 {m} && echo "gitdir: $PWD/ev5" > e/raw/.git',
}
_PLANT = (
    'plant() { cp -r "$1" "$2" && sed -i /worktree/d "$2/config" && '
    'printf \'[core]\\n\\tfsmonitor = "touch %s; false"\\n\' "$3" >> "$2/config"; }'
)


def test_a_sandboxed_command_cannot_leave_a_submodule_s_git_a_program_to_run(
    tmp_path: Path, home: Path, workspace: Path
) -> None:
    """The workspace's own .git is read-only, but ``git status`` also runs git in each
    submodule with the config its folder's ``.git`` names: a command that could rewrite,
    move or make one had the user's next ``git status`` run its program."""
    require_sandbox()
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    sources = tmp_path / "sources"
    leaf = _repository(sources / "leaf", {"leaf.txt": "leaf\n"})
    mid = _repository(sources / "mid", {"mid.txt": "mid\n"})
    _submodule(mid, leaf, "leaf")
    assert _git(mid, "commit", "-qm", "leaf").returncode == 0
    one = _repository(sources / "one", {"README.md": "one\n"})
    (workspace / "app.py").write_text("x = 1\n")
    assert _git(workspace, "init", "-q").returncode == 0
    paths = {"a/one": one, "b/two": one, "c/mid": mid, "d/mid": mid, "e/raw": one}
    for path, source in paths.items():
        _submodule(workspace, source, path)
    init = _git(
        workspace,
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "update",
        "-q",
        "--init",
        "--recursive",
    )
    assert init.returncode == 0, init.stderr
    assert _git(workspace, "add", "-A").returncode == 0
    assert _git(workspace, "commit", "-qm", "start").returncode == 0
    assert _git(workspace, "submodule", "deinit", "-q", "-f", "e/raw").returncode == 0
    assert (workspace / "e" / "raw").is_dir() and not any((workspace / "e" / "raw").iterdir())
    markers = {name: tmp_path / f"escaped-{i}" for i, name in enumerate(SUBMODULE_PLANTS)}
    plants = [_PLANT] + [p.format(m=markers[n]) for n, p in SUBMODULE_PLANTS.items()]
    # One command: the plants share its ``plant`` function.
    written = _plant_then_write(
        home, workspace, "; ".join(plants), "echo two >> a/one/README.md && cat a/one/README.md"
    )
    assert "one\ntwo" in written  # a submodule's own files stay writable
    # The user's own git after the session runs nothing the model chose.
    status = _git(workspace, "status")
    assert status.returncode == 0, status.stderr
    assert [name for name, marker in markers.items() if marker.exists()] == []


# A workspace holding repositories of its own (the agent started in a folder of clones, a
# vendored clone): git run there by the user reads each one's .git. The lines rewrite a
# clone's config, and replace a deeper one by a copy whose config is the command's.
NESTED_PLANTS = {
    "config": "printf '[core]\\n\\tfsmonitor = \"touch {m}; false\"\\n' >> app/.git/config",
    "moved": "mv vendor vendor-old && cp -r vendor-old vendor && "
    "printf '[core]\\n\\tfsmonitor = \"touch {m}; false\"\\n' >> vendor/lib/.git/config",
    "git dir elsewhere": "printf '[core]\\n\\tfsmonitor = \"touch {m}; false\"\\n' "
    ">> store/tool.git/config",
}


def test_a_sandboxed_command_cannot_leave_a_repository_in_the_workspace_a_program_to_run(
    tmp_path: Path, home: Path, workspace: Path
) -> None:
    """A workspace that is no repository may hold some: the user's next ``git status`` in
    one ran what a command wrote into its ``.git``."""
    require_sandbox()
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    app = _repository(workspace / "app", {"app.py": "x = 1\n"})
    lib = _repository(workspace / "vendor" / "lib", {"lib.py": "y = 1\n"})
    tool = workspace / "tool"  # its .git a file naming a git dir in the workspace too
    (workspace / "store").mkdir()
    separate = f"--separate-git-dir={workspace / 'store' / 'tool.git'}"
    assert _git(workspace, "init", "-q", separate, str(tool)).returncode == 0
    markers = {name: tmp_path / f"escaped-{i}" for i, name in enumerate(NESTED_PLANTS)}
    plants = [p.format(m=markers[n]) for n, p in NESTED_PLANTS.items()]
    written = _plant_then_write(
        home, workspace, "; ".join(plants), "echo x = 2 > app/app.py && cat app/app.py"
    )
    assert "x = 2" in written  # a repository's own files stay writable
    for repo in (app, lib, tool):
        status = _git(repo, "status")
        assert status.returncode == 0, status.stderr
    assert [name for name, marker in markers.items() if marker.exists()] == []


def test_a_repository_a_command_made_runs_nothing_when_the_agent_reads_its_index(
    tmp_path: Path, home: Path, workspace: Path
) -> None:
    """The agent reads each repository's index in the workspace to find its submodules:
    ``git ls-files`` on one a command made (a sparse index missing a tree, a promisor
    remote whose ``uploadpack`` is a program) fetched the tree and ran the program in the
    agent's own process, outside the sandbox, at the next command."""
    require_sandbox()
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    marker = tmp_path / "escaped"
    config = "git -c user.email=a@b -c user.name=a"
    plant = (
        (
            "git init -q evil && cd evil && mkdir a b && echo 1 > a/f && echo 2 > b/g && "
            f"git add . && {config} commit -qm i && "
            "git sparse-checkout init --cone --sparse-index && git sparse-checkout set a && "
            'tree=$(git rev-parse HEAD:b) && rm -f ".git/objects/${{tree:0:2}}/${{tree:2}}" && '
            "git config core.repositoryformatversion 1 && "
            "git config extensions.partialClone origin && "
            'git config remote.origin.url "$PWD" && git config remote.origin.promisor true && '
            f"git config remote.origin.uploadpack 'touch {marker}; false' && echo planted"
        )
        .replace("{{", "{")
        .replace("}}", "}")
    )

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        done = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        if not done:
            return {"tool_calls": [{"name": "run_bash", "arguments": {"command": plant}}]}
        if len(done) == 1:
            return {"tool_calls": [{"name": "run_bash", "arguments": {"command": "echo next"}}]}
        return {"content": "done"}

    with FakeOpenAIServer([reply], on_exhausted="repeat_last") as server:
        env = agent_env(home, server, AGENTGRAPH_SANDBOX="on")
        done = run_cli(["run", "plant", "--thread", "git"], cwd=workspace, env=env)
        assert done.returncode == 0, done.stderr
        planted, following = _tool_results(server)
    assert "planted" in planted and "next" in following
    assert not marker.exists()


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A folder whose files sandboxed commands see (read-only) outside their workspace:
    not under /tmp, which the sandbox replaces by a private one."""
    folder = Path(tempfile.mkdtemp(prefix="agentgraph-outside-", dir="/var/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_folder_swapped_for_a_link_after_the_guard_looked_opens_nothing_outside(
    outside_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command running beside another (a subagent's) can swap a folder the guard found
    for a link between the guard's look and the sandbox's start: bound by path, the folder
    the link names, outside the workspace, was bound writable."""
    require_sandbox()
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    # Beside each other, as ~/ws and ~/other are: the link names its target relatively.
    workspace = Path(os.path.realpath(outside_tmp)) / "ws"
    _repository(workspace / "clone", {"a.py": "x = 1\n"})
    outside = _repository(workspace.parent / "other", {"victim.txt": "mine\n"})
    looked = bash_tool.git_guard

    def racing(root: str) -> Any:
        guard = looked(root)
        (workspace / "clone").rename(workspace / "clone-real")  # the other command's swap
        (workspace / "clone").symlink_to("../other")
        return guard

    monkeypatch.setattr(bash_tool, "git_guard", racing)
    bwrap = shutil.which(BWRAP_EXECUTABLE)
    assert bwrap is not None
    launch = bash_tool.sandbox_launch(bwrap, str(workspace), network=False, git=True)
    try:
        bash_tool.run_command(
            "echo theirs > clone/victim.txt",
            cwd=str(workspace),
            env={"PATH": os.environ.get("PATH", os.defpath)},
            timeout_s=30,
            sandbox=launch.args,
            pass_fds=launch.take_fds(),
        )
    finally:
        launch.close()
    assert (outside / "victim.txt").read_text() == "mine\n"


def _made_repository_reply(marker: Path) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A model that makes a repository whose config names a filter (a program git runs on
    each file it adds), then hands a task to a subagent with writes; the subagent
    answers at once."""
    plant = (
        f"git init -q && git config filter.x.clean 'touch {marker}; cat' && "
        "echo '* filter=x' > .gitattributes && echo a > a.txt"
    )

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        first = next((m["content"] for m in messages if m["role"] == "user"), "")
        done = [m for m in messages if m["role"] == "tool"]
        if first == "SUBTASK":
            return {"content": "nothing to do"}
        if not done:
            return {"tool_calls": [{"name": "run_bash", "arguments": {"command": plant}}]}
        if len(done) == 1:
            task = {"task": "SUBTASK", "writes": True}
            return {"tool_calls": [{"name": "call_subagent", "arguments": task}]}
        return {"content": "done"}

    return reply


def test_a_repository_a_command_made_runs_nothing_of_its_own_outside_the_sandbox(
    tmp_path: Path, home: Path, workspace: Path
) -> None:
    """Where there was no repository a command may make one (the read-only .git covers
    only one that exists): the agent's own git — a subagent's snapshot, ``/commit`` —
    does not use it, or its filter ran outside the sandbox."""
    require_sandbox()
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    marker = tmp_path / "filter-ran"
    with FakeOpenAIServer([_made_repository_reply(marker)], on_exhausted="repeat_last") as server:
        env = agent_env(home, server, AGENTGRAPH_SANDBOX="on")
        done = run_cli(["run", "make a repo", "--thread", "made"], cwd=workspace, env=env)
        assert done.returncode == 0, done.stderr
        results = _tool_results(server)
    assert (workspace / ".git").is_dir()  # the command made it
    assert "[exit code 0]" in results[0] and "subagent" in results[1]
    assert not marker.exists()
