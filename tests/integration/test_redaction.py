"""security.redaction: which credentials are recognised, and what ordinary text is left alone."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agentgraph.config import Settings
from agentgraph.security.redaction import (
    REDACTED,
    Redactor,
    build_redactor,
    is_secret_env_name,
    redact_token_formats,
    secret_env_values,
)
from tests.integration.test_sandbox import AGENT_SECRETS, TOKENS

PEM = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
    "-----END OPENSSH PRIVATE KEY-----"
)


@pytest.mark.parametrize("kind", sorted(TOKENS))
def test_each_token_format_is_redacted(kind: str) -> None:
    token = TOKENS[kind]
    contexts = {
        "url_password": f"postgres://app:{token}@db:5432/x",
        "sentry_key": f"https://{token}@o1.ingest.sentry.io/42",
        "pem_body": f"-----BEGIN RSA PRIVATE KEY-----\n{token}\n-----END RSA PRIVATE KEY-----",
    }
    text = f"before {contexts.get(kind, token)} after"
    out = redact_token_formats(text)
    assert token not in out
    assert out.startswith("before ") and out.endswith(" after") and REDACTED in out


def test_formats_keep_their_context() -> None:
    assert redact_token_formats("postgres://app:pw-secret-1@db/x") == (
        f"postgres://app:{REDACTED}@db/x"
    )
    assert redact_token_formats("https://0123456789abcdef0123456789abcdef@o1.sentry.io/2") == (
        f"https://{REDACTED}@o1.sentry.io/2"
    )
    assert redact_token_formats(f"x\n{PEM}\ny") == f"x\n{REDACTED}\ny"
    # Output cut in the middle of a key: everything from the header on goes.
    assert redact_token_formats("x\n-----BEGIN PRIVATE KEY-----\nMIIE") == f"x\n{REDACTED}"
    # A label stays outside the marker: a model spelling the line out writes it once.
    aws = "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    assert redact_token_formats(aws) == f"aws_secret_access_key = {REDACTED}"
    assert redact_token_formats('"AWS_SECRET_ACCESS_KEY": "' + aws[-40:] + '"') == (
        f'"AWS_SECRET_ACCESS_KEY": "{REDACTED}"'
    )
    assert redact_token_formats("Authorization: Bearer abcdefghijklmnop1234") == (
        f"Authorization: Bearer {REDACTED}"
    )
    assert redact_token_formats("authorization: bearer abcdefghijklmnop1234==") == (
        f"authorization: bearer {REDACTED}"
    )


@pytest.mark.parametrize(
    "text",
    [
        "def get_token(self) -> str:  # returns the session token",
        "password = os.environ['DB_PASSWORD']",
        "commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a3f",
        "id 123e4567-e89b-12d3-a456-426614174000",
        "https://example.com/a/b?c=d and git@github.com:org/repo.git",
        "ssh://git@github.com/org/repo and user@example.com",
        "sk-short is too short; task-1234 is not a key",
        "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkq\n-----END PUBLIC KEY-----",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact_token_formats(text) == text


def test_secret_names() -> None:
    for name in [*AGENT_SECRETS, "OPENAI_API_KEY", "my_service_token", "DJANGO_SECRET_KEY"]:
        assert is_secret_env_name(name), name
    for name in ("PATH", "HOME", "PWD", "OLDPWD", "KEYBOARD_LAYOUT", "LANG", "MONKEY_BUSINESS"):
        assert not is_secret_env_name(name), name


def test_agent_environment_values_are_redacted_whatever_their_format() -> None:
    env = {
        **AGENT_SECRETS,
        "PATH": "/usr/bin:/bin",
        "AUTH_MODE": "disabled",  # secret-named, but a setting: low entropy, short
        "SSH_AUTH_SOCK": "/tmp/ssh-XXXX/agent.1234",  # a path, not a credential
        "FEATURE_TOKEN_LIMIT": "aaaaaaaaaaaa",  # one repeated character
    }
    values = secret_env_values(env)
    assert set(values) == set(AGENT_SECRETS.values())
    redactor = build_redactor(["short"], env)
    text = " ".join(AGENT_SECRETS.values()) + " disabled /tmp/ssh-XXXX/agent.1234 short"
    out = redactor.redact(text)
    for value in AGENT_SECRETS.values():
        assert value not in out
    assert "disabled /tmp/ssh-XXXX/agent.1234" in out
    assert out.endswith(REDACTED)  # the settings' own secret, whatever its length


def test_content_blocks_are_redacted() -> None:
    redactor = Redactor(exact_values=["hunter2-secret"])
    content = [
        "a hunter2-secret",
        {"type": "text", "text": "b hunter2-secret"},
        {"type": "image", "url": "x"},
    ]
    assert redactor.redact_content(content) == [
        f"a {REDACTED}",
        {"type": "text", "text": f"b {REDACTED}"},
        {"type": "image", "url": "x"},
    ]


@pytest.mark.parametrize(
    ("base_url", "key", "redacted"),
    [
        ("http://127.0.0.1:8089/v1", "local", False),  # a local server's placeholder
        ("http://192.168.1.20:8000/v1", "EMPTY", False),
        ("http://127.0.0.1:4000/v1", "sk-local-proxy-key", True),  # long enough to be one
        ("https://llm.example.com/v1", "sk-1234", True),  # a hosted endpoint's key
        ("", "Zq7#pX", True),  # OpenAI's (no base URL)
    ],
)
def test_only_a_local_endpoints_short_key_is_left_unredacted(
    make_settings: Callable[..., Settings], base_url: str, key: str, redacted: bool
) -> None:
    """A local server takes any key, so a short one is its placeholder word and is left
    in what tools show (redacted, ``localhost`` read ``[REDACTED]host``); a key any other
    endpoint takes is redacted whatever its length, and so is the subagent server's."""
    settings = make_settings(
        OPENAI_BASE_URL=base_url, OPENAI_API_KEY=key, AGENTGRAPH_SUBAGENT_SERVER_API_KEY="Zq7#pY"
    )
    values = settings.secret_values()
    assert (key in values) is redacted
    assert "Zq7#pY" in values
    text = f"url = http://localhost:8080  # key {key}"
    shown = build_redactor(values, None).redact(text)
    assert (REDACTED in shown) is redacted and ("localhost" in shown)
