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


def _key_body(width: int, lines: int, seed: int = 7) -> list[str]:
    """Lines of a private key's base64 body, ``width`` characters each but the last."""
    import random

    rnd = random.Random(seed)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    body = "".join(rnd.choice(alphabet) for _ in range(width * lines - 20)) + "AB=="
    return [body[i : i + width] for i in range(0, len(body), width)]


@pytest.mark.parametrize(
    ("header", "width"),
    [("-----BEGIN PRIVATE KEY-----", 64), ("-----BEGIN OPENSSH PRIVATE KEY-----", 70)],
)
def test_a_private_key_shown_without_its_header_line_is_redacted(header: str, width: int) -> None:
    """A private key's body matched only after its ``BEGIN`` line: a read_file page from
    line 5, ``sed -n '3,9p'``, ``tail -n +2`` or ``grep -n`` showed its base64 lines
    whole. Runs of two or more lines of a key's width (64, OpenSSH's 70) are hidden
    wherever they start, line numbers and file names before them kept."""
    body = _key_body(width, 12)
    end = header.replace("BEGIN", "END")
    raw_lines = [header, *body, end]
    redactor = Redactor()
    page = "".join(f"{n:6d}\t{line}\n" for n, line in enumerate(raw_lines, 1) if n >= 5)
    by_sed = "\n".join(body[2:9]) + "\n"
    by_grep = "".join(f"id_key:{n}:{line}\n" for n, line in enumerate(raw_lines, 1) if n > 2)
    for shown in (page, by_sed, by_grep):
        out = redactor.redact(shown)
        assert not [line for line in body if line in out], out
        assert out.count("\n") == shown.count("\n")
    assert redactor.redact(page).startswith(f"     5\t{REDACTED}\n     6\t{REDACTED}\n")
    assert redactor.redact(by_grep).startswith(f"id_key:3:{REDACTED}\n")


def test_lines_that_only_look_like_a_key_s_are_left_alone() -> None:
    """SHA-256 digests are 64 hexadecimal characters, a line of base64 alone may be any
    data: a run of hex lines, or one base64 line, is shown."""
    digests = "".join(f"{i:064x}\n" for i in range(1, 6))
    one = _key_body(64, 1)[0] + "\n"
    prose = "x" * 64 + "\n" + "y" * 63 + "\n"
    for text in (digests, one, prose, "sha256:" + "ab" * 32 + "\n"):
        assert Redactor().redact(text) == text


def test_the_line_after_a_key_s_body_is_hidden_only_when_it_ends_the_body() -> None:
    """The shorter line that ends a body is part of the key; a line of other text after
    it keeps its last word."""
    body = _key_body(64, 4)
    page = "".join(f"{n:6d}\t{line}\n" for n, line in enumerate(body, 9))
    out = Redactor().redact(page + "    13\tsee the docs\n")
    assert body[-1] not in out and out.endswith("    13\tsee the docs\n")
    diff = "".join(f"+{line}\n" for line in body) + " context word\n"
    out = Redactor().redact(diff)
    assert not [line for line in body if line in out] and out.endswith(" context word\n")
    assert out.startswith(f"+{REDACTED}\n")


def test_a_key_s_body_is_hidden_in_the_other_views_of_it_too() -> None:
    """``cat -A`` ends each line with ``$``; ``grep -n -C2`` names context lines
    ``key-N-`` and the match ``key:N:``; ``tail -n 2`` shows one full line and the
    padded last one: each showed key material."""
    body = _key_body(64, 6)
    redactor = Redactor()
    cat_a = "".join(f"{line}$\n" for line in body)
    out = redactor.redact(cat_a)
    assert not [line for line in body if line in out] and out.startswith(f"{REDACTED}$\n")
    grep_c = f"key-4-{body[-3]}\nkey-5-{body[-2]}\nkey:6:{body[-1]}\n"
    assert not [line for line in body if line in redactor.redact(grep_c)]
    end = "-----END PRIVATE KEY-----\n"
    for tail in (f"{body[-2]}\n{body[-1]}\n", f"{body[-1]}\n{end}", f"{body[0]}\n{end}"):
        assert not [line for line in body if line in redactor.redact(tail)], tail


def test_a_public_key_s_or_a_certificate_s_body_and_banners_stay() -> None:
    """A certificate or a public key under its header is no secret, and a banner of
    slashes is no key: shown."""
    body = "\n".join(_key_body(64, 6)) + "\n"
    for header in ("CERTIFICATE", "PUBLIC KEY", "PGP PUBLIC KEY BLOCK"):
        text = f"-----BEGIN {header}-----\n{body}-----END {header}-----\n"
        assert Redactor().redact(text) == text
    banner = "/" * 64 + "\n" + "/" * 64 + "\n"
    assert Redactor().redact(banner) == banner


def _pem(label: str, seed: int = 5) -> str:
    """A PEM block of ``label`` with a random body, as a key or certificate file holds."""
    body = "\n".join(_key_body(64, 10, seed))
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----\n"


def _wrapped(data: str, width: int) -> str:
    return "\n".join(data[i : i + width] for i in range(0, len(data), width)) + "\n"


def test_a_private_key_encoded_in_base64_is_redacted() -> None:
    """A kubeconfig's ``client-key-data``, a Kubernetes secret's ``tls.key`` and
    ``base64 key.pem`` hold a whole private key encoded once more: no pattern saw it,
    and ``cat ~/.kube/config`` sent the user's cluster key to the model."""
    import base64

    key = _pem("RSA PRIVATE KEY")
    encoded = base64.b64encode(key.encode()).decode()
    cert = base64.b64encode(_pem("CERTIFICATE", 6).encode()).decode()
    kubeconfig = (
        "users:\n- name: admin\n  user:\n"
        f"    client-certificate-data: {cert}\n    client-key-data: {encoded}\n"
    )
    secret_json = json_text = f'{{"data": {{"tls.crt": "{cert}", "tls.key": "{encoded}"}}}}\n'
    by_tool = _wrapped(encoded, 76)
    numbered = "".join(f"{n:6d}\t{line}\n" for n, line in enumerate(by_tool.splitlines(), 3))
    redactor = Redactor()
    for shown in (kubeconfig, secret_json, by_tool, numbered, kubeconfig + by_tool):
        out = redactor.redact(shown)
        pieces = [encoded[i : i + 24] for i in range(0, len(encoded) - 24, 24)]
        assert not [p for p in pieces if p in out], out
        assert out.count("\n") == shown.count("\n")
    assert cert in redactor.redact(kubeconfig) and cert in redactor.redact(json_text)
    assert f"client-key-data: {REDACTED}\n" in redactor.redact(kubeconfig)
    assert redactor.redact(numbered).startswith(f"     3\t{REDACTED}\n     4\t{REDACTED}\n")


@pytest.mark.parametrize("lead", ["", "x", "xy"])
def test_a_credentials_file_encoded_in_base64_with_a_key_inside_is_redacted(lead: str) -> None:
    """A service account's JSON stored as a secret (``GOOGLE_APPLICATION_CREDENTIALS``
    in a Kubernetes secret) puts the key's header at any offset of the encoded text."""
    import base64
    import json

    account = {"type": "service_account", "client_email": lead, "private_key": _pem("PRIVATE KEY")}
    encoded = base64.b64encode(json.dumps(account).encode()).decode()
    out = Redactor().redact(f"  key.json: {encoded}\n")
    assert out == f"  key.json: {REDACTED}\n"


def test_base64_that_holds_no_private_key_is_left_alone() -> None:
    """Certificates, public keys and other data encoded in base64 are shown."""
    import base64

    for text in (
        _pem("CERTIFICATE"),
        _pem("PUBLIC KEY"),
        "-----BEGIN nothing PRIVATE KEY ... just prose about keys",
    ):
        encoded = base64.b64encode(text.encode()).decode()
        for shown in (f"data: {encoded}\n", _wrapped(encoded, 76)):
            assert Redactor().redact(shown) == shown


def test_an_encoded_key_wrapped_and_shown_by_grep_is_redacted_line_by_line() -> None:
    """``grep -n`` names each wrapped line ``file:N:``; the header of a key inside an
    encoded credentials file may fall across two wrapped lines."""
    import base64
    import json

    pem = _pem("PRIVATE KEY")
    account = {"type": "service_account", "project_id": "p" * 41, "private_key": pem}
    encoded = base64.b64encode(json.dumps(account).encode()).decode()
    lines = _wrapped(encoded, 76).splitlines()
    shown = "".join(f"sa.b64:{n}:{line}\n" for n, line in enumerate(lines, 1))
    out = Redactor().redact(shown)
    assert out == "".join(f"sa.b64:{n}:{REDACTED}\n" for n in range(1, len(lines) + 1))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("DATABASE_PASSWORD=Sup3rS3cretPa55\n", "Sup3rS3cretPa55"),
        ("export API_TOKEN='abcdef0123456789abcdef'\n", "abcdef0123456789abcdef"),
        ("db:\n  password: Sup3rS3cretPa55\n  port: 5432\n", "Sup3rS3cretPa55"),
        ("machine api.example.com\n  login me\n  password Sup3rS3cretPa55\n", "Sup3rS3cretPa55"),
        ("db:\n  api_key: abcdef0123456789XYZ\n", "abcdef0123456789XYZ"),
        ("[pypi]\nusername = __token__\npassword = pAssw0rd-very-secret-42\n", "pAssw0rd-very"),
        ("//registry.npmjs.org/:_authToken=a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d\n", "a1b2c3d4-e5"),
        ('{"auths": {"https://index.docker.io/v1/": {"auth": "bWU6ZGNrcl9wYXQ="}}}', "bWU6ZGNr"),
        ("machine api.example.com login me password Sup3rS3cretPa55\n", "Sup3rS3cretPa55"),
        ("    token: kubeadmtoken0123456789abcdef\n", "kubeadmtoken0123456789abcdef"),
        ('const config = { clientSecret: "9f8e7d6c5b4a39f8e7d6", region: "eu" };', "9f8e7d6c5b4a"),
        ('DB_PASS = "p@ss!w0rd#x"  # local only\n', "p@ss!w0rd#x"),
        ("app.py:12:SECRET_KEY = 'django-insecure-4f3k2j1h0g9f8e7d'\n", "django-insecure-4f3k"),
        ("curl -H 'X-Api-Key: 0c6a9f2e77d14b55a1c3' https://api.example.com\n", "0c6a9f2e77d1"),
        ("SECRET_KEY = 'django-insecure-)&(k2#x!v@9w$e^r*t+y=u'\n", "django-insecure-)&(k2"),
        ("APP_KEY=base64:q1w2E3r4T5y6U7i8O9p0aSdFgHjKlZxC=\n", "base64:q1w2E3r4T5y6U7i8O9p0"),
        ("DB_PASSWORD=Tr0ub4dor&3xyz\n", "Tr0ub4dor"),
        ("GET https://x.io/api?api_key=0c6a9f2e77d14b55a1c3&q=1\n", "0c6a9f2e77d1"),
        ("authtoken: 2AbCdEfGh1234567890XyZ\n", "2AbCdEfGh1234567890XyZ"),
        ("NOTION_TOKEN=secret_AbC123dEf456GhI789jKl012MnO345\n", "secret_AbC123dEf456GhI789"),
        ('"Default": "Server=db;User Id=sa;Password=Xk9mQ2vLp7!;"\n', "Xk9mQ2vLp7"),
        ('    - "POSTGRES_PASSWORD=Xk9mQ2vLp7"\n', "Xk9mQ2vLp7"),
        ("<server><password>Xk9mQ2vLp7Rt</password></server>\n", "Xk9mQ2vLp7Rt"),
        ("define('DB_PASSWORD', 'Xk9mQ2vLp7Rt');\n", "Xk9mQ2vLp7Rt"),
        ("    'password' => 'Xk9mQ2vLp7Rt',\n", "Xk9mQ2vLp7Rt"),
        ("$db_password = 'Xk9mQ2vLp7Rt';\n", "Xk9mQ2vLp7Rt"),
        ('\tpassword := "Xk9mQ2vLp7Rt"\n', "Xk9mQ2vLp7Rt"),
        ('SECRET = b"Xk9mQ2vLp7Rt"\n', "Xk9mQ2vLp7Rt"),
        ("mysql -u root --password=Xk9mQ2vLp7Rt app\n", "Xk9mQ2vLp7Rt"),
        ("DB_PASSWORD=Xk9,mQ2vL[p7]\n", "Xk9,mQ2vL[p7]"),
    ],
)
def test_a_value_written_to_a_secret_named_setting_is_redacted(text: str, value: str) -> None:
    """A password, token or key set in a config file (``.env``, YAML, INI, ``.npmrc``,
    ``.netrc``, Docker's ``auth``, a constant in code) has no format of its own: read or
    printed, it reached the model whole. A secret-named setting's value that looks like
    a credential is hidden, its name, quotes and the rest of the line kept."""
    out = Redactor().redact(text)
    assert value not in out, out
    assert out.count(REDACTED) == 1 and out.count("\n") == text.count("\n")
    name_end = text.index(value)
    assert out.startswith(text[:name_end] + REDACTED)


@pytest.mark.parametrize(
    "text",
    [
        "password = request.form.get('password')",
        "password = settings.DB_PASSWORD\n",
        "token = tokenizer.encode(text)",
        "tokenizer: gpt2-tokenizer\nmax_tokens: 4096\n",
        'TOKEN_ENV = "GITHUB_TOKEN"\nPASSWORD_FILE = "secrets/db.txt"\n',
        "auth_method: oauth2\nauth_provider: auth0\nauth_url: https://auth.example.com/v2/token\n",
        "private_key: ~/.ssh/id_ed25519\nkey_file: certs/server2.key\n",
        "primary_key: user_id2\nsort_key: created_at\npublic_key: ssh-ed25519\n",
        "API_KEY=your-api-key-here\nPASSWORD=changeme\nSECRET=********\n",
        'password = "${DB_PASSWORD}"\ntoken: "{{ vault_token }}"\nkey = "%(key)s"\n',
        "key: ${{ hashFiles('**/uv.lock') }}\n",
        "f(token=token_value, api_key=api_key_2)\n",
        "secret_name: my-secret-2\nsecretName: tls-cert-2024\n",
        "const STORAGE_KEY = 'todos-vuejs-2.0'\nlock_key = \"lock-job-42\"\n",
        '{"nextPageToken": "CiAKGjBpNDd2Nmp2Zml2cXRwYjBpOXA2", "NextToken": "eyJ2IjoxfQ2"}',
        "const apiKey = process.env.API_KEY!\nemitKey = !!key.emitKey\n",
        "'secret': 'V1SecretVolumeSource',\n'webhook': 'V1alpha1Webhook',\n",
        'git commit -m "fix password reset-flow2"\nPASSWORD_HASHER = "argon2id"\n',
    ],
)
def test_code_and_settings_that_name_secrets_without_holding_one_are_left_alone(text: str) -> None:
    """A reference (an attribute, a call, an environment variable, a template), a path,
    a placeholder, an identifier or a setting about a secret holds none: shown."""
    assert Redactor().redact(text) == text


@pytest.mark.parametrize("width", [48, 80, 100])
def test_an_encoded_key_wrapped_at_any_width_in_a_diff_or_with_trailing_spaces_is_redacted(
    width: int,
) -> None:
    """``base64 -w 80`` wraps at other widths, ``git diff`` puts a ``+`` before each line
    and an editor may leave spaces after one: each line of the key was shown but the
    first."""
    import base64

    encoded = base64.b64encode(_pem("PRIVATE KEY").encode()).decode()
    lines = _wrapped(encoded, width).splitlines()
    pieces = [encoded[i : i + 24] for i in range(0, len(encoded) - 24, 24)]
    for shown in (
        "\n".join(lines) + "\n",
        "".join(f"+{line}\n" for line in lines),
        "".join(f"{line}  \n" for line in lines),
    ):
        out = Redactor().redact(shown)
        assert not [p for p in pieces if p in out], out
        assert out.count(REDACTED) == len(lines)
