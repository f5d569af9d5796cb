"""Huge output (7), secrets (8) and a damaged or locked store (10), from the real CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli_helpers import CLI_TIMEOUT_S, run_cli
from tests.fakes.openai_server import FakeOpenAIServer
from tests.integration.reliability.helpers import KEY, agent_env, all_files_bytes, store_bytes

HUGE_OUTPUT_BYTES = 50_000_000
# What buffering the whole output would cost at least (one copy); the CLI must stay far
# below that above its baseline. Measured growth is ~0-10 MB (docs/bench/reliability.md).
RSS_GROWTH_LIMIT_KB = 25_000
STORE_LIMIT_BYTES = 5_000_000
LONG_RUN_RE = re.compile(rb"a{2000000}")

MEASURE = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True)
sys.stderr.buffer.write(done.stderr)
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def _peak_rss_kb(args: list[str], *, cwd: Path, env: dict[str, str]) -> tuple[int, int, str]:
    """Run the CLI under a fresh parent; its peak RSS is the children's max RSS."""
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, sys.executable, "-m", "agentgraph", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
    )
    code, rss = done.stdout.split()
    return int(code), int(rss), done.stderr


def test_fifty_megabytes_of_output_bounded_memory_and_store(home: Path, workspace: Path) -> None:
    big = f"printf HEAD-MARK; head -c {HUGE_OUTPUT_BYTES} /dev/zero | tr '\\0' a; printf TAIL-MARK"
    small = "printf HEAD-MARK; printf aaaa; printf TAIL-MARK"
    peaks = {}
    for label, command in (("small", small), ("big", big)):
        script = [
            {"tool_calls": [{"name": "run_bash", "arguments": {"command": command}}]},
            {"content": "done"},
        ]
        with FakeOpenAIServer(script) as server:
            env = agent_env(home, server)
            code, rss, err = _peak_rss_kb(
                ["run", "print a lot", "--thread", label], cwd=workspace, env=env
            )
            assert code == 0, err
            assert server.violations == []
            sent = json.dumps(server.requests[-1]["messages"])
        peaks[label] = rss
        assert "HEAD-MARK" in sent and "TAIL-MARK" in sent  # head and tail kept
    assert "truncated" in sent
    growth = peaks["big"] - peaks["small"]
    assert growth < RSS_GROWTH_LIMIT_KB, peaks
    print(f"peak RSS small={peaks['small']} KB big={peaks['big']} KB growth={growth} KB")
    data = store_bytes(home)
    assert len(data) < STORE_LIMIT_BYTES
    assert b"HEAD-MARK" in data and b"TAIL-MARK" in data
    assert LONG_RUN_RE.search(data) is None  # only the truncated copy is stored


SECRET_ENV = "MY_SERVICE_TOKEN"
SECRET_ENV_VALUE = "tok-abcdefghijklmnop-123456"


def _stored_files(home: Path) -> dict[Path, bytes]:
    """Everything agentgraph wrote under its home: database (+ WAL), artifacts, logs.

    ``snapshots/`` is left out: it holds byte-for-byte copies of the user's own workspace
    files (for undo), in the same trust zone as the workspace itself (docs/security.md).
    """
    root = home / ".agentgraph"
    return {p: b for p, b in all_files_bytes(root).items() if "snapshots" not in p.parts}


def test_secrets_stay_out_of_tools_database_and_logs(home: Path, workspace: Path) -> None:
    (workspace / "config.ini").write_text(f"[openai]\nkey = {KEY}\n")
    script = [
        {
            "tool_calls": [
                {
                    "name": "run_bash",
                    "arguments": {"command": "printenv; echo key=$OPENAI_API_KEY"},
                },
                {"name": "run_bash", "arguments": {"command": "cat config.ini"}},
                {"name": "read_file", "arguments": {"path": "config.ini"}},
                {"name": "grep", "arguments": {"pattern": "key", "path": "."}},
            ]
        },
        {"content": "nothing to see"},
    ]
    with FakeOpenAIServer(script, require_key=KEY) as server:
        env = agent_env(home, server, **{SECRET_ENV: SECRET_ENV_VALUE, "AGENTGRAPH_DEBUG": "1"})
        result = run_cli(["run", "show env", "--thread", "sec"], cwd=workspace, env=env)
        assert result.returncode == 0, result.stderr
        assert server.violations == []
        shown = run_cli(["sessions", "show", "sec"], cwd=workspace, env=env)
        sent = json.dumps(server.requests[-1]["messages"])
    tool_results = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    assert len(tool_results) == 4
    assert "PATH=" in tool_results[0]  # printenv ran
    assert SECRET_ENV not in tool_results[0]  # the credential variable is not passed on
    assert all("[REDACTED]" in r for r in tool_results[1:]), tool_results
    outputs = result.stdout + result.stderr + shown.stdout + shown.stderr
    for secret in (KEY, SECRET_ENV_VALUE):
        assert secret not in sent, "secret sent to the model in a tool result"
        assert secret not in outputs
        for path, data in _stored_files(home).items():
            assert secret.encode() not in data, f"secret in {path}"


def test_secrets_stay_out_of_exports(home: Path, workspace: Path) -> None:
    with FakeOpenAIServer([{"content": "ok"}]) as server:
        env = agent_env(home, server)
        (workspace / "config.ini").write_text(f"key = {KEY}\n")
        server.add_replies(
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "config.ini"}}]},
            {"content": "done"},
        )
        assert run_cli(["run", "x", "--thread", "exp"], cwd=workspace, env=env).returncode == 0
        assert run_cli(["run", "y", "--thread", "exp"], cwd=workspace, env=env).returncode == 0
        exports = [
            run_cli(["sessions", "export", "exp", "--format", fmt], cwd=workspace, env=env)
            for fmt in ("jsonl", "md")
        ]
    for done in exports:
        assert done.returncode == 0, done.stderr
        assert "config.ini" in done.stdout and "[REDACTED]" in done.stdout
        assert KEY not in done.stdout + done.stderr


GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
OTHER_TOKEN = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
MARK = "[REDACTED]"


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def _run_script(
    home: Path, workspace: Path, script: list[dict[str, Any]], **settings: str
) -> tuple[list[str], str]:
    """Run ``script`` through the CLI: the tool results of its last request, and all it
    sent the model (and printed) as one text."""
    with FakeOpenAIServer(script) as server:
        env = agent_env(home, server) | settings
        result = run_cli(["run", "tidy the config", "--json"], cwd=workspace, env=env)
        assert result.returncode == 0, result.stderr
        assert server.violations == []
        sent = json.dumps([r["messages"] for r in server.requests])
    results = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    return results, sent + result.stdout + result.stderr


def test_a_file_rewritten_or_edited_around_its_tokens_keeps_them(
    home: Path, workspace: Path
) -> None:
    """A model that rewrites or edits a file it read sees its tokens as the marker and
    writes the marker back: the user's token was replaced by it on disk, and the diff
    shown, redacted too, showed no change on that line. Each marker now gets back the
    value of its own line (two tokens, lines moved); a marker whose value is not certain
    is refused and the file left as it was."""
    ci = f'TOKEN = "{GITHUB_TOKEN}"\nURL = "https://api.github.com"\n'
    pair = f'A_TOKEN = "{GITHUB_TOKEN}"\nB_TOKEN = "{OTHER_TOKEN}"\n'
    (workspace / "ci.py").write_text(ci)
    (workspace / "pair.py").write_text(pair)
    script = [
        _call("read_file", path="ci.py"),
        _call("write_file", path="ci.py", content=f'TOKEN = "{MARK}"\nURL = "x"\nTIMEOUT = 30\n'),
        _call("read_file", path="pair.py"),
        _call(
            "write_file",
            path="pair.py",
            content=f'# moved\nB_TOKEN = "{MARK}"\nA_TOKEN = "{MARK}"\n',
        ),
        _call(
            "edit_file",
            path="pair.py",
            old_string=f'A_TOKEN = "{MARK}"',
            new_string=f'A_TOKEN: str = "{MARK}"',
        ),
        _call("write_file", path="pair.py", content=f'TOKENS = ["{MARK}", "{MARK}"]\n'),
        {"content": "done"},
    ]
    results, sent = _run_script(home, workspace, script)
    assert (workspace / "ci.py").read_text() == (
        f'TOKEN = "{GITHUB_TOKEN}"\nURL = "x"\nTIMEOUT = 30\n'
    )
    assert (workspace / "pair.py").read_text() == (
        f'# moved\nB_TOKEN = "{OTHER_TOKEN}"\nA_TOKEN: str = "{GITHUB_TOKEN}"\n'
    )
    assert results[-1].startswith("Error:") and "nothing was written" in results[-1], results
    assert GITHUB_TOKEN not in sent and OTHER_TOKEN not in sent


def test_a_file_a_command_rewrites_around_its_tokens_keeps_them(
    home: Path, workspace: Path
) -> None:
    """A model that prints a file through the shell sees its tokens as the marker and,
    rewriting it with a here-document or a script, writes the marker back: the user's
    token was replaced by it on disk. After the command each marker it wrote into a file
    it names gets back the value of its own line, and the command's result says so; one
    whose value is not certain is left and said, never guessed."""
    ci = f'TOKEN = "{GITHUB_TOKEN}"\nURL = "https://api.github.com"\n'
    pair = f'A_TOKEN = "{GITHUB_TOKEN}"\nB_TOKEN = "{OTHER_TOKEN}"\n'
    (workspace / "ci.py").write_text(ci)
    (workspace / "pair.py").write_text(pair)
    (workspace / "two.py").write_text(pair)
    (workspace / "app.log").write_text(f"token={GITHUB_TOKEN}\n")
    moved = f'# moved\\nB_TOKEN = \\"{MARK}\\"\\nA_TOKEN = \\"{MARK}\\"\\n'
    script = [
        _call("run_bash", command="cat ci.py pair.py"),
        _call(
            "run_bash",
            command=f'cat > ci.py <<\'EOF\'\nTOKEN = "{MARK}"\nURL = "x"\nTIMEOUT = 30\nEOF',
        ),
        _call("run_bash", command=f'printf "{moved}" > pair.py'),
        _call("run_bash", command=f'printf \'TOKENS = ["{MARK}", "{MARK}"]\\n\' > two.py'),
        # A scrub means the marker: it stays.
        _call("run_bash", command=f"sed -i -E 's/ghp_[A-Za-z0-9]+/{MARK}/g' app.log"),
        {"content": "done"},
    ]
    # The shell's own behaviour, bubblewrap or not.
    results, sent = _run_script(home, workspace, script, AGENTGRAPH_SANDBOX="off")
    assert (workspace / "ci.py").read_text() == (
        f'TOKEN = "{GITHUB_TOKEN}"\nURL = "x"\nTIMEOUT = 30\n'
    )
    assert (workspace / "pair.py").read_text() == (
        f'# moved\nB_TOKEN = "{OTHER_TOKEN}"\nA_TOKEN = "{GITHUB_TOKEN}"\n'
    )
    assert (workspace / "two.py").read_text() == f'TOKENS = ["{MARK}", "{MARK}"]\n'
    assert "ci.py" in results[1] and "put back" in results[1], results[1]
    assert "two.py" in results[3] and "not certain" in results[3], results[3]
    assert (workspace / "app.log").read_text() == f"token={MARK}\n"
    assert "put back" not in results[4], results[4]
    assert GITHUB_TOKEN not in sent and OTHER_TOKEN not in sent


def test_a_private_key_read_from_its_middle_never_reaches_the_model(
    home: Path, workspace: Path
) -> None:
    """A page of a key file from line 5, ``sed -n`` or ``grep -n`` of it show no header
    line, and the key's body reached the model whole; its lines are hidden."""
    import random

    rnd = random.Random(3)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    body = [("".join(rnd.choice(alphabet) for _ in range(64))) for _ in range(20)]
    key = "-----BEGIN PRIVATE KEY-----\n" + "\n".join(body) + "\nAB==\n-----END PRIVATE KEY-----\n"
    (workspace / "deploy.pem").write_text(key)
    script = [
        _call("read_file", path="deploy.pem", offset=5, limit=10),
        _call("run_bash", command="sed -n '3,12p' deploy.pem; grep -n A deploy.pem | tail -5"),
        {"content": "done"},
    ]
    results, sent = _run_script(home, workspace, script)
    assert all("[REDACTED]" in r for r in results), results
    assert not [line for line in body if line in sent]


def test_a_private_key_encoded_in_base64_never_reaches_the_model(
    home: Path, workspace: Path
) -> None:
    """A kubeconfig's ``client-key-data`` and ``base64 deploy.pem`` hold a private key
    encoded once more, which no pattern saw: ``cat`` of a cluster's config sent its key.
    Hidden; a rewrite of the config keeps the key on disk."""
    import base64
    import random

    rnd = random.Random(4)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    body = "\n".join("".join(rnd.choice(alphabet) for _ in range(64)) for _ in range(12))
    key = f"-----BEGIN EC PRIVATE KEY-----\n{body}\n-----END EC PRIVATE KEY-----\n"
    encoded = base64.b64encode(key.encode()).decode()
    config = f"users:\n- name: admin\n  user:\n    client-key-data: {encoded}\n"
    (workspace / "kubeconfig.yaml").write_text(config)
    (workspace / "deploy.pem").write_text(key)
    script = [
        _call("read_file", path="kubeconfig.yaml"),
        _call("run_bash", command="cat kubeconfig.yaml; base64 deploy.pem | head -n 4"),
        _call(
            "write_file",
            path="kubeconfig.yaml",
            content=f"users:\n- name: ops\n  user:\n    client-key-data: {MARK}\n",
        ),
        {"content": "done"},
    ]
    results, sent = _run_script(home, workspace, script)
    pieces = [encoded[i : i + 20] for i in range(0, len(encoded) - 20, 20)]
    assert not [p for p in pieces if p in sent]
    assert sum(r.count(MARK) for r in results) >= 5, results
    config_now = (workspace / "kubeconfig.yaml").read_text()
    assert config_now == f"users:\n- name: ops\n  user:\n    client-key-data: {encoded}\n"


def test_passwords_and_tokens_set_in_a_repository_s_config_never_reach_the_model(
    home: Path, workspace: Path
) -> None:
    """A repository's ``.env``, YAML settings and ``.npmrc`` set passwords and tokens with
    no format of their own: read, printed or grepped, they reached the model whole. Their
    values are hidden, the names kept, and an edit of another line keeps them on disk."""
    secrets = ["Sup3rS3cretPa55", "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d", "9f8e7d6c5b4a39f8e7d6"]
    env_file = f"DEBUG=1\nDB_PASSWORD={secrets[0]}\nSTRIPE_WEBHOOK_SECRET='{secrets[2]}'\n"
    (workspace / ".env").write_text(env_file)
    (workspace / "settings.yaml").write_text(f"db:\n  host: db\n  password: {secrets[0]}\n")
    (workspace / ".npmrc").write_text(f"//registry.npmjs.org/:_authToken={secrets[1]}\n")
    script = [
        _call("read_file", path=".env"),
        _call("run_bash", command="cat settings.yaml .npmrc; grep -rn PASSWORD ."),
        _call("edit_file", path=".env", old_string="DEBUG=1", new_string="DEBUG=0"),
        {"content": "done"},
    ]
    results, sent = _run_script(home, workspace, script)
    assert not [s for s in secrets if s in sent], [s for s in secrets if s in sent]
    assert "DB_PASSWORD=[REDACTED]" in results[0] and "_authToken=[REDACTED]" in results[1]
    assert (workspace / ".env").read_text() == env_file.replace("DEBUG=1", "DEBUG=0")


@pytest.mark.parametrize("damage", ["header-kept", "random", "truncated", "wal-garbage"])
def test_damaged_store_is_reported_and_untouched(home: Path, workspace: Path, damage: str) -> None:
    with FakeOpenAIServer([{"content": "a"}] * 3) as server:
        env = agent_env(home, server)
        assert run_cli(["run", "hi", "--thread", "x1"], cwd=workspace, env=env).returncode == 0
        db = home / ".agentgraph" / "sessions.db"
        wal = Path(str(db) + "-wal")
        for suffix in ("-wal", "-shm"):
            Path(str(db) + suffix).unlink(missing_ok=True)
        data = db.read_bytes()
        if damage == "header-kept":  # a valid header over garbage pages
            db.write_bytes(data[:100] + os.urandom(len(data) - 100))
        elif damage == "random":
            db.write_bytes(os.urandom(len(data)))
        elif damage == "truncated":
            db.write_bytes(data[: len(data) // 3])
        else:
            wal.write_bytes(os.urandom(8192))
        before = {p.name: p.read_bytes() for p in db.parent.iterdir() if p.is_file()}
        for args in (["run", "hi", "--thread", "x1"], ["sessions", "list"], ["--resume", "x1"]):
            result = run_cli(args, cwd=workspace, env=env, stdin="")
            if damage == "wal-garbage":
                # SQLite ignores a WAL whose header checksum is wrong: the data is intact.
                assert result.returncode == 0, (args, result.stderr)
                continue
            assert result.returncode != 0, args
            assert "Traceback" not in result.stderr
            assert len(result.stderr.strip().splitlines()) == 1, result.stderr
            assert "session store" in result.stderr and str(db) in result.stderr
        if damage != "wal-garbage":
            after = {p.name: p.read_bytes() for p in db.parent.iterdir() if p.is_file()}
            assert after["sessions.db"] == before["sessions.db"]


def test_store_locked_by_another_process_during_run(home: Path, workspace: Path) -> None:
    with FakeOpenAIServer([{"content": "a"}, {"content": "b"}]) as server:
        env = agent_env(home, server, AGENTGRAPH_SQLITE_BUSY_TIMEOUT_S="1")
        assert run_cli(["run", "hi", "--thread", "x1"], cwd=workspace, env=env).returncode == 0
        db = home / ".agentgraph" / "sessions.db"
        holder = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
                "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); sys.stdin.read()",
                str(db),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
            before = db.read_bytes()
            result = run_cli(["run", "again", "--thread", "x1"], cwd=workspace, env=env)
            assert db.read_bytes() == before
        finally:
            holder.communicate("")
        assert result.returncode == 1
        assert "locked" in result.stderr and "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        # Once the lock is gone the session carries on where it was.
        again = run_cli(["run", "again", "--thread", "x1", "--json"], cwd=workspace, env=env)
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout)["answer"] == "b"
        assert server.violations == []
