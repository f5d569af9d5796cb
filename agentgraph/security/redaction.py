"""Credentials out of tool output: the one place every tool result is redacted.

Tool output is hostile data that may hold credentials: ``printenv``, ``cat .env``,
``read_file`` on a config, ``grep`` over a deploy script. The tools node
(:mod:`agentgraph.runtime.nodes.tools`) passes every result, error results included, through
a :class:`Redactor` before the model, the checkpoints or the artifact files see it,
and exports go through one too; a tool added later (MCP or another) is covered
by the same node.

Two kinds of evidence are used:

- **Known token formats** (:data:`TOKEN_PATTERNS`): GitHub, AWS, Slack, Stripe,
  OpenAI/Anthropic and other ``sk-`` keys, Google, Hugging Face, GitLab, npm, JWTs,
  PEM private keys, passwords inside URLs, Sentry DSN keys, bearer tokens, AWS secret
  keys next to their variable name. Matched with RE2, so hostile text cannot make
  redaction itself slow.
- **A private key's body without its header** (:func:`redact_key_bodies`): two or more
  lines of base64 of a key's width (a page of a key file from line 5, ``sed -n``,
  ``grep -n``), the lines' prefixes kept.
- **A private key encoded in base64 once more** (:func:`redact_encoded_keys`): a
  kubeconfig's ``client-key-data``, a Kubernetes secret's ``tls.key``, ``base64 key.pem``,
  a service account's JSON stored as a secret; found by the encoded ``-----BEGIN`` and
  decoded to check it is a private key's.
- **A secret-named setting's value** (:func:`redact_secret_assignments`): ``DB_PASS=…``
  in a ``.env``, ``password: …`` in YAML or INI, ``_authToken=`` in ``.npmrc``, Docker's
  ``"auth"``, ``.netrc``'s ``password``, a constant in code, when the value looks like a
  credential and is no reference, path, template or placeholder.
- **Known values**: the settings' secrets (API key, database URL and password) and
  the values of secret-named variables in the agent's own environment
  (:func:`secret_env_values`), which may have any format (``DB_PASS=hunter2-prod``).
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import re2

REDACTED = "[REDACTED]"
# Shorter values are not replaced: replacing every "dev" or "1234" in the output
# would garble ordinary text and say nothing about where the secret is.
SECRET_VALUE_MIN_CHARS = 8
# Shannon entropy per character under which a secret-named variable's value is
# taken for a setting (``AUTH_MODE=disabled``) rather than a credential.
SECRET_VALUE_MIN_ENTROPY_BITS = 2.5
# A value of letters only (``disabled``, ``production``) is taken for a word unless it
# is at least this long (``correcthorsebatterystaple``).
SECRET_WORDLIKE_MIN_CHARS = 16

# Name parts (split on ``_``) that mark a variable as holding a credential.
SECRET_NAME_PARTS = frozenset(
    {
        "KEY",
        "KEYS",
        "APIKEY",
        "TOKEN",
        "TOKENS",
        "SECRET",
        "SECRETS",
        "PASS",
        "PASSWD",
        "PASSWORD",
        "PASSPHRASE",
        "PWD",
        "AUTH",
        "BEARER",
        "CREDENTIAL",
        "CREDENTIALS",
        "CREDS",
        "PRIVATE",
        "DSN",
        "WEBHOOK",
        "COOKIE",
        "PAT",
        "SIGNATURE",
    }
)
SECRET_NAME_SUBSTRINGS = ("SECRET", "PASSWORD", "PASSWD", "TOKEN", "APIKEY", "PRIVATE_KEY")
# PWD/OLDPWD are the shell's working directories, not passwords.
NOT_SECRET_NAMES = frozenset({"PWD", "OLDPWD"})

_SECRET_FORMATS: tuple[str, ...] = (
    # PEM private keys; an unterminated block (output cut) is redacted to the end.
    r"-----BEGIN[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----"
    r"(?:[\s\S]*?-----END[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----|[\s\S]*)",
    # GitHub personal, OAuth, user-to-server, server-to-server, refresh tokens.
    r"\b(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{30,255})",
    # AWS access key ids.
    r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b",
    # Slack tokens and incoming-webhook URLs.
    r"\bxox[abeoprs]-[A-Za-z0-9-]{10,}",
    r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]+",
    # Stripe secret and restricted keys, live and test.
    r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}",
    # OpenAI (sk-, sk-proj-…), Anthropic (sk-ant-…) and the many sk- compatible keys.
    r"\bsk-[A-Za-z0-9_-]{16,}",
    # Google API keys, Hugging Face, GitLab, npm, PyPI tokens.
    r"\bAIza[0-9A-Za-z_-]{35}",
    r"\bhf_[A-Za-z0-9]{30,}",
    r"\bglpat-[A-Za-z0-9_-]{20,}",
    r"\bnpm_[A-Za-z0-9]{36}",
    r"\bpypi-[A-Za-z0-9_-]{50,}",
    # JSON Web Tokens (header and payload are base64url JSON objects: "eyJ").
    r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
)
# Parts of a match kept around the redaction: a URL's scheme and user, a DSN's host, the
# label before a bearer credential or an AWS secret access key (alone it is any 40 base64
# characters). Hidden with its value, a label was written twice by a model that spelled
# the line out (``Bearer [REDACTED]`` put back as ``Bearer Bearer …``).
_BEARER = r"(?P<bearer_head>(?i:\bbearer)\s+)[A-Za-z0-9._~+/-]{16,}=*"
_AWS_SECRET = r"(?P<aws_head>(?i:aws_?secret_?access_?key)[\"']?\s*[:=]\s*[\"']?)[A-Za-z0-9/+=]{40}"
_PASSWORD_IN_URL = r"(?P<url_head>\b[A-Za-z][A-Za-z0-9+.-]{0,30}://[^\s/@:]*:)[^\s/@]+(?P<url_at>@)"
# Sentry DSNs carry their key as the URL's user: https://<32 hex>@o1.ingest.sentry.io/2
_SENTRY_DSN = r"(?P<dsn_head>\bhttps?://)[0-9a-f]{32}(?P<dsn_at>@[A-Za-z0-9.-]*sentry)"

_TOKEN_RE: Any = None

# Widths, in characters, of a private key's full base64 lines: PEM (RFC 7468) and
# OpenSSH's own format.
KEY_BODY_LINE_WIDTHS = frozenset({64, 70})
# Consecutive full lines that make a key's body (one line alone may be any base64 data).
KEY_BODY_MIN_LINES = 2
# Characters of base64 on the line before a private key's END line taken for its last.
KEY_END_MIN_CHARS = 16
_BASE64_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_UPPER_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_LOWER_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz")
_DIGIT_CHARS = frozenset("0123456789")
_KEY_LINE_RE: Any = None


def _key_line_re() -> Any:
    global _KEY_LINE_RE
    if _KEY_LINE_RE is None:
        _KEY_LINE_RE = re2.compile(r"(?m)[A-Za-z0-9+/]{64}(?:[A-Za-z0-9+/]{6})?\$?\r?$")
    return _KEY_LINE_RE


def _content(line: str) -> str:
    """``line`` without a ``\r`` and a ``$`` that ``cat -A`` puts at its end."""
    line = line.removesuffix("\r")
    marked = line.endswith("$") and line[-2:-1].strip("=" + _BASE64_CHARS) == ""
    return line[:-1] if marked else line


def _base64_tail(line: str) -> tuple[int, str]:
    """Where the base64 run that ends ``line`` starts (its ``=`` padding included), and
    the run; a diff's ``+`` before a full line is left to the prefix."""
    head = line.rstrip("=")
    head = head.rstrip(_BASE64_CHARS)
    run = line[len(head) :]
    if run.startswith("+") and len(run) - 1 in KEY_BODY_LINE_WIDTHS:
        return len(head) + 1, run[1:]
    return len(head), run


def _bare(prefix: str) -> str:
    """A line's prefix without its digits and spaces, ``-`` read as ``:``: ``    12\t``
    and ``     9\t``, ``key:12:`` and ``key-9-`` (grep's context lines) alike."""
    return "".join(c for c in prefix if not c.isdigit() and c != " ").replace("-", ":")


def _key_end(line: str, body_line: str, body_start: int) -> tuple[int, str] | None:
    """The base64 run of the line after a key's body lines when it is the body's last
    line (its prefix shaped as theirs, ``=`` padding only at its end), else None."""
    start, run = _base64_tail(line)
    prefix = _bare(body_line[:body_start])
    if run.startswith("+") and prefix.endswith("+"):
        start, run = start + 1, run[1:]
    data = run.rstrip("=")
    if not data or "=" in data or _bare(line[:start]) != prefix:
        return None
    return start, run


def _random_looking(run: str) -> bool:
    """Whether a run of base64 mixes upper and lower case letters and digits, as a key's
    lines do (not hex digests, not a banner of slashes)."""
    chars = set(run)
    return bool(chars & _UPPER_CHARS and chars & _LOWER_CHARS and chars & _DIGIT_CHARS)


def redact_key_bodies(text: str) -> str:
    """Replace the base64 lines of a private key's body shown without its ``BEGIN``
    line: a read_file page from line 5, ``sed -n '3,9p'``, ``tail -n +2``, ``grep -n``
    or ``cat -A`` of a key file showed them whole (the key's pattern needs the header).

    A body is :data:`KEY_BODY_MIN_LINES` or more consecutive lines ending in a base64
    run of one of :data:`KEY_BODY_LINE_WIDTHS` that mixes cases and digits (SHA-256
    digests are 64 hexadecimal characters), and the shorter line that ends it; or one
    such line before the key's padded last line; and the line before a private key's
    ``END`` line. A body right under
    a certificate's or a public key's ``BEGIN`` line is no secret: left. Each run is
    replaced, what comes before it on its line (a line number, ``file:12:``) and after
    it (``cat -A``'s ``$``) kept.

    Args:
        text: Any text.

    Returns:
        The text with such runs replaced (the same object when there is none).
    """
    if not text or (_key_line_re().search(text) is None and "PRIVATE KEY-----" not in text):
        return text
    lines = text.split("\n")
    contents = [_content(line) for line in lines]
    tails = [_base64_tail(content) for content in contents]

    def full(i: int, width: int) -> bool:
        run = tails[i][1]
        return len(run) == width and "=" not in run and _random_looking(run)

    hidden: set[int] = set()
    i = 0
    while i < len(lines):
        width = len(tails[i][1])
        if width not in KEY_BODY_LINE_WIDTHS or not full(i, width):
            i += 1
            continue
        end = i
        while end + 1 < len(lines) and full(end + 1, width):
            end += 1
        public = i > 0 and "-----BEGIN" in lines[i - 1] and "PRIVATE" not in lines[i - 1]
        last = None
        if end + 1 < len(lines):
            last = _key_end(contents[end + 1], contents[end], tails[end][0])
            if last is not None and len(last[1]) >= width:
                last = None
        closing = last is not None and last[1].endswith("=")
        if not public and (end - i + 1 >= KEY_BODY_MIN_LINES or closing):
            hidden.update(range(i, end + 1))
            if last is not None:
                tails[end + 1] = last
                hidden.add(end + 1)
        i = end + 1
    # The line before a private key's END line is its last (``tail -n 2`` of a key).
    for n in range(1, len(lines)):
        if "-----END" in lines[n] and "PRIVATE KEY" in lines[n]:
            run = tails[n - 1][1]
            if len(run.rstrip("=")) >= KEY_END_MIN_CHARS and _random_looking(run):
                hidden.add(n - 1)
    if not hidden:
        return text
    out = []
    for n, line in enumerate(lines):
        if n in hidden:
            start, run = tails[n]
            line = line[:start] + REDACTED + line[start + len(run) :]
        out.append(line)
    return "\n".join(out)


# "-----BEGIN " in base64 at each of the three places a byte can take in a 3-byte group,
# with how many characters before it that group starts (those depend on the bytes before).
_ENCODED_BEGIN = (("LS0tLS1CRUdJTi", 0), ("0tLS0tQkVHSU4g", 2), ("tLS0tLUJFR0lOI", 3))
# Characters decoded from a group holding an encoded "-----BEGIN " to read the header
# ("-----BEGIN " + a 40-character label + " PRIVATE KEY": 63 bytes, 2 before it, 88 chars).
ENCODED_HEADER_PROBE_CHARS = 96
# Widths, in characters, of the lines tools wrap base64 at (``base64`` and MIME at 76,
# ``openssl base64`` and PEM at 64): only such a line goes on with the next one's data.
ENCODED_WRAP_WIDTHS = frozenset({64, 76})
_ENCODED_KEY_HEADER_RE = re.compile(rb"-----BEGIN[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----")
_BASE64_RUN_RE = re.compile(r"[A-Za-z0-9+/]+={0,2}")


def _holds_encoded_private_key(data: str) -> bool:
    """Whether base64 ``data`` (a run, or a wrapped block joined) encodes a private key's
    ``BEGIN`` line somewhere in it."""
    for signature, before in _ENCODED_BEGIN:
        at = data.find(signature)
        while at != -1:
            start = at - before
            probe = data[max(start, 0) : start + ENCODED_HEADER_PROBE_CHARS].rstrip("=")
            probe = probe[: len(probe) - len(probe) % 4]
            if start >= 0 and probe:
                try:
                    decoded = base64.b64decode(probe, validate=True)
                except (binascii.Error, ValueError):
                    decoded = b""
                if _ENCODED_KEY_HEADER_RE.search(decoded):
                    return True
            at = data.find(signature, at + 1)
    return False


def _encoded_blocks(lines: list[str]) -> list[list[tuple[int, int, int]]]:
    """The runs of base64 in ``lines`` as blocks of ``(line, start, end)`` segments: a run
    inside a line is a block of one; a run of a wrapping width ending its line goes on
    with the run that makes the next line (after a prefix shaped as its own: none, a
    line number, ``f:3:``) while those are as long, up to a shorter or padded one
    (``base64 key.pem``)."""
    blocks: list[list[tuple[int, int, int]]] = []
    n = 0
    while n < len(lines):
        content = _content(lines[n])
        runs = list(_BASE64_RUN_RE.finditer(content))
        blocks.extend([(n, inside.start(), inside.end())] for inside in runs[:-1])
        if not runs:
            n += 1
            continue
        last = runs[-1]
        block = [(n, last.start(), last.end())]
        width = last.end() - last.start()
        prefix = _bare(content[: last.start()])
        wraps = last.end() == len(content) and width in ENCODED_WRAP_WIDTHS
        while wraps and not content.endswith("=") and n + 1 < len(lines):
            content = _content(lines[n + 1])
            start, tail = _base64_tail(content)
            if not tail or len(tail) > width or _bare(content[:start]).strip() not in ("", prefix):
                break
            n += 1
            block.append((n, start, len(content)))
            if len(tail) < width:
                break
        blocks.append(block)
        n += 1
    return blocks


def redact_encoded_keys(text: str) -> str:
    """Replace the base64 of a private key encoded once more: a kubeconfig's
    ``client-key-data``, a Kubernetes secret's ``tls.key``, ``base64 key.pem`` (wrapped
    lines), a service account's JSON stored as a secret. The PEM pattern sees none of
    them, and ``cat ~/.kube/config`` sent a cluster's key to the model.

    A run of base64 (or a block of wrapped lines) is replaced when it encodes a private
    key's ``BEGIN`` line at any offset (found by its three encodings, then decoded):
    certificates, public keys and other data are shown. Each line's run is replaced on its
    own line, what is around it kept.

    Args:
        text: Any text.

    Returns:
        The text with such runs replaced (the same object when there is none).
    """
    if not text or not any(signature in text for signature, _ in _ENCODED_BEGIN):
        return text
    lines = text.split("\n")
    hidden: dict[int, list[tuple[int, int]]] = {}
    for block in _encoded_blocks(lines):
        data = "".join(_content(lines[n])[start:end] for n, start, end in block)
        if _holds_encoded_private_key(data):
            for n, start, end in block:
                hidden.setdefault(n, []).append((start, end))
    if not hidden:
        return text
    for n, spans in hidden.items():
        line = lines[n]
        for start, end in sorted(spans, reverse=True):
            line = line[:start] + REDACTED + line[end:]
        lines[n] = line
    return "\n".join(lines)


# Words of a setting's name (split at ``_ - .`` and case changes) that mark its value as a
# credential: the environment's name parts but the plurals, ``PRIVATE`` (``tokens: 12``,
# ``private: true`` are settings about them), ``SIGNATURE`` (a digest anyone may see) and
# ``PAT`` (in code, a pattern's).
ASSIGNED_SECRET_WORDS = SECRET_NAME_PARTS - {"KEYS", "TOKENS", "PRIVATE", "SIGNATURE", "PAT"}
# Words that mark a credential only beside another word (``DB_PASS``, ``API_KEY``): alone,
# ``pass:`` is prose or a flag and ``key:`` any mapping's key.
ASSIGNED_QUALIFIED_WORDS = frozenset({"PASS", "KEY"})
# A name ending in one of these words is a setting about a credential, not one
# (``auth_method``, ``token_url``, ``secret_name``, ``private_key_file``).
ASSIGNED_NOT_SECRET_LAST_WORDS = frozenset(
    {
        "TYPE", "MODE", "METHOD", "PROVIDER", "URL", "URI", "ENDPOINT", "HOST", "DOMAIN",
        "FILE", "PATH", "DIR", "NAME", "ID", "ENABLED", "REQUIRED", "LENGTH", "SIZE",
        "TIMEOUT", "EXPIRY", "EXPIRES", "TTL", "HEADER", "PREFIX", "FORMAT", "VERSION",
        "ALGORITHM", "COUNT", "LIMIT", "FIELD", "PARAM", "ENV", "VAR", "LOCATION", "REF",
    }
)  # fmt: skip
# Words before ``KEY`` that make it a database's or a data structure's key, not a secret.
ASSIGNED_NOT_SECRET_KEY_KINDS = frozenset(
    {
        "PRIMARY", "FOREIGN", "SORT", "PARTITION", "HASH", "RANGE", "CACHE", "PUBLIC",
        "ROUTING", "IDEMPOTENCY", "LOOKUP", "UNIQUE", "COMPOSITE", "SHORTCUT", "HOT",
    }
)  # fmt: skip
_ASSIGNMENT_RE: Any = None
_NAME_WORD_RE = re.compile(r"[A-Z]?[a-z]+[0-9]*|[A-Z]+[0-9]*(?![a-z])|[0-9]+")
# What may follow a value written without quotes: the line's end, a comment, a URL query's
# next parameter or the quote closing a shell word. Anything else (``?? x``, ``, y``,
# ``&& z``) makes it an expression of code, and a credential in code is quoted.
_UNQUOTED_END_RE = re.compile(r"(?:[ \t]*(?:#.*)?)?(?:\r?\n|$)|[&\"']")
_IDENTIFIER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DOTTED_RE = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*(?:\.[A-Za-z_$][A-Za-z0-9_$]*)+")
_FILE_NAME_RE = re.compile(r".*\.[A-Za-z][A-Za-z0-9]{0,4}")


def _assignment_re() -> Any:
    global _ASSIGNMENT_RE
    if _ASSIGNMENT_RE is None:
        options = re2.Options()
        options.log_errors = False
        value = r"[^\s\"'`,;:=&(){}\[\]<>\\]{8,}={0,2}"
        _ASSIGNMENT_RE = re2.compile(
            r"(?:^|[^A-Za-z0-9_.$-])(?:(?P<name>[A-Za-z_][A-Za-z0-9_.-]{0,63})"
            rf"[\"']?[ \t]*[:=][ \t]*(?P<quote>[\"']?)(?P<value>{value})"
            rf"|(?i:password|passwd)[ \t]+(?P<spaced>{value}))",
            options,
        )
    return _ASSIGNMENT_RE


def is_secret_setting_name(name: str) -> bool:
    """Whether a setting's name (in a file, a header, code) marks its value a credential.

    Args:
        name: ``DB_PASSWORD``, ``_authToken``, ``clientSecret``, ``X-Api-Key``…

    Returns:
        True when a word of it (split at ``_``, ``-``, ``.`` and case changes) is one of
        :data:`ASSIGNED_SECRET_WORDS` (:data:`ASSIGNED_QUALIFIED_WORDS` only beside
        another word) or it holds ``PASSWORD`` or ``PASSWD`` (``PGPASSWORD``), unless its
        last word makes it a setting about one
        (:data:`ASSIGNED_NOT_SECRET_LAST_WORDS`) or a ``KEY`` is a database's
        (:data:`ASSIGNED_NOT_SECRET_KEY_KINDS`).
    """
    words = [w.upper() for w in _NAME_WORD_RE.findall(name)]
    if not words or words[-1] in ASSIGNED_NOT_SECRET_LAST_WORDS:
        return False
    if words[-1] == "KEY" and len(words) > 1 and words[-2] in ASSIGNED_NOT_SECRET_KEY_KINDS:
        return False
    marking = set(words) & ASSIGNED_SECRET_WORDS
    if len(words) == 1:
        marking -= ASSIGNED_QUALIFIED_WORDS
    joined = "".join(words)
    return bool(marking) or "PASSWORD" in joined or "PASSWD" in joined


def looks_like_assigned_secret(value: str) -> bool:
    """Whether a secret-named setting's value is a credential rather than a reference.

    Args:
        value: The value as written (without its quotes).

    Returns:
        True for a value :func:`looks_like_secret_value` takes that holds a digit or a
        symbol other than ``_ - . /``, and is no dotted reference (``settings.DB_PASS``),
        identifier (``api_key_2``), path, file name, URL, template (``${X}``, ``{{ x }}``,
        ``%(x)s``) or environment variable (``$X``).
    """
    if (
        not looks_like_secret_value(value)
        or value[0] in "$~.%"
        or "://" in value
        or ("/" in value and _FILE_NAME_RE.fullmatch(value))
        or (_FILE_NAME_RE.fullmatch(value) and not any(c.isdigit() for c in value[-5:]))
        or _DOTTED_RE.fullmatch(value)
        or ("_" in value and _IDENTIFIER_RE.fullmatch(value))
    ):
        return False
    return any(c.isdigit() or not (c.isalpha() or c in "_-./") for c in value)


def redact_secret_assignments(text: str) -> str:
    """Replace the values of secret-named settings: ``DB_PASS=…`` in a ``.env``,
    ``password: …`` in YAML, ``password = …`` in INI, ``_authToken=…`` in ``.npmrc``,
    Docker's ``"auth": "…"``, ``.netrc``'s ``password …``, ``clientSecret: "…"`` in code,
    ``X-Api-Key: …`` in a header. Such values have no format of their own, and a file
    read or printed sent them to the model whole.

    A value is replaced when its name is a credential's (:func:`is_secret_setting_name`)
    and the value looks like one (:func:`looks_like_assigned_secret`); a value without
    quotes counts only where it ends its line (a comment aside), a URL query's parameter
    or a shell word: followed by more (``get_pass()``, ``x ?? y``) it is code. A value
    set apart from its name by spaces alone counts only after ``password`` (``.netrc``).
    The name, quotes and the rest of the line stay.

    Args:
        text: Any text.

    Returns:
        The text with such values replaced (the same object when there is none).
    """
    if not text:
        return text
    spans: list[tuple[int, int]] = []
    for match in _assignment_re().finditer(text):
        # RE2's match takes group numbers for positions: name 1, quote 2, value 3, and
        # a value set apart by spaces alone (``.netrc``'s ``password …``) 4.
        if match.group(4) is not None:
            start, end = match.start(4), match.end(4)
            if looks_like_assigned_secret(match.group(4)):
                spans.append((start, end))
            continue
        name, quote, value = match.group(1), match.group(2), match.group(3)
        start, end = match.start(3), match.end(3)
        if quote and text[end : end + 1] != quote:
            continue
        if not quote and not _UNQUOTED_END_RE.match(text, end):
            continue
        if is_secret_setting_name(name) and looks_like_assigned_secret(value):
            spans.append((start, end))
    if not spans:
        return text
    out = []
    last = 0
    for start, end in spans:
        out.append(text[last:start] + REDACTED)
        last = end
    out.append(text[last:])
    return "".join(out)


def _token_re() -> Any:
    global _TOKEN_RE
    if _TOKEN_RE is None:
        options = re2.Options()
        options.log_errors = False
        pattern = "|".join(
            [f"(?:{p})" for p in _SECRET_FORMATS]
            + [_BEARER, _AWS_SECRET, _PASSWORD_IN_URL, _SENTRY_DSN]
        )
        _TOKEN_RE = re2.compile(pattern, options)
    return _TOKEN_RE


def _replace(match: Any) -> str:
    if match.group("url_head") is not None:
        return f"{match.group('url_head')}{REDACTED}{match.group('url_at')}"
    if match.group("dsn_head") is not None:
        return f"{match.group('dsn_head')}{REDACTED}{match.group('dsn_at')}"
    for label in ("bearer_head", "aws_head"):
        if match.group(label) is not None:
            return f"{match.group(label)}{REDACTED}"
    return REDACTED


def redact_token_formats(text: str) -> str:
    """Replace every substring with a known credential format by ``[REDACTED]``.

    Args:
        text: Any text.

    Returns:
        The text with tokens, private keys and URL passwords replaced (a URL
        keeps its scheme, user and host).
    """
    if not text:
        return text
    return str(_token_re().sub(_replace, text))


def is_secret_env_name(name: str) -> bool:
    """Whether an environment variable's name marks it as a credential.

    Args:
        name: The variable name (compared case-insensitively).

    Returns:
        True when a ``_``-separated part of the name is one of
        :data:`SECRET_NAME_PARTS` (``DEPLOY_KEY``, ``DB_PASS``, ``AUTH_BEARER``,
        ``SENTRY_DSN``, ``SLACK_WEBHOOK_URL``…) or the name contains one of
        :data:`SECRET_NAME_SUBSTRINGS` (``PGPASSWORD``, ``MYAPITOKEN``).
    """
    upper = name.upper()
    if upper in NOT_SECRET_NAMES:
        return False
    parts = set(upper.split("_"))
    return bool(parts & SECRET_NAME_PARTS) or any(s in upper for s in SECRET_NAME_SUBSTRINGS)


def entropy_bits_per_char(value: str) -> float:
    """Shannon entropy of ``value``'s characters, in bits per character."""
    if not value:
        return 0.0
    counts = Counter(value)
    total = len(value)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


def _character_classes(value: str) -> int:
    return sum(
        (
            any(c.isalpha() for c in value),
            any(c.isdigit() for c in value),
            any(not c.isalnum() for c in value),
        )
    )


def looks_like_secret_value(value: str) -> bool:
    """Whether a secret-named variable's value is worth redacting wherever it appears.

    Args:
        value: The variable's value.

    Returns:
        True for values of at least :data:`SECRET_VALUE_MIN_CHARS` characters, with
        at least :data:`SECRET_VALUE_MIN_ENTROPY_BITS` bits per character, that mix
        letters, digits or symbols (or are at least
        :data:`SECRET_WORDLIKE_MIN_CHARS` long), and are not absolute paths: a
        setting such as ``AUTH_MODE=disabled`` is not replaced everywhere.
    """
    value = value.strip()
    return (
        # An absolute path (SSH_AUTH_SOCK, GOOGLE_APPLICATION_CREDENTIALS) names where
        # a credential is, it is not one; replacing it would garble ordinary output.
        not value.startswith("/")
        and len(value) >= SECRET_VALUE_MIN_CHARS
        and entropy_bits_per_char(value) >= SECRET_VALUE_MIN_ENTROPY_BITS
        and (_character_classes(value) >= 2 or len(value) >= SECRET_WORDLIKE_MIN_CHARS)
    )


def secret_env_values(env: Mapping[str, str]) -> list[str]:
    """Values of ``env``'s secret-named variables that look like credentials.

    Args:
        env: An environment, usually the agent's own.

    Returns:
        The values (stripped), longest first.
    """
    values = {
        value.strip()
        for name, value in env.items()
        if is_secret_env_name(name) and looks_like_secret_value(value)
    }
    return sorted(values, key=len, reverse=True)


class Redactor:
    """Replaces credentials in text: known values, then known token formats.

    Args:
        secret_values: Exact strings to replace wherever they appear; values
            shorter than :data:`SECRET_VALUE_MIN_CHARS` are replaced only when
            they are the settings' own secrets (passed in ``exact_values``).
        exact_values: Strings replaced whatever their length (the settings' secrets,
            ``Settings.secret_values``, which leaves out a local endpoint's short
            placeholder key; an MCP config's secret-named values).
    """

    def __init__(self, secret_values: Iterable[str] = (), exact_values: Iterable[str] = ()):
        values = {v for v in exact_values if v}
        values |= {v for v in secret_values if len(v) >= SECRET_VALUE_MIN_CHARS}
        # Longest first, so a value containing another is replaced whole.
        self._values = sorted(values, key=len, reverse=True)

    def redact(self, text: str) -> str:
        """The text with every known secret value and token format replaced.

        Args:
            text: Any text.

        Returns:
            The redacted text (the same object when nothing matched).
        """
        for value in self._values:
            if value in text:
                text = text.replace(value, REDACTED)
        text = redact_secret_assignments(redact_token_formats(text))
        return redact_key_bodies(redact_encoded_keys(text))

    def redact_content(self, content: Any) -> Any:
        """Redact a message content: a string or a list of content blocks.

        Args:
            content: ``str``, or a list of strings and ``{"type": "text", …}`` blocks.

        Returns:
            The same shape with text redacted; other blocks unchanged.
        """
        if isinstance(content, str):
            return self.redact(content)
        if isinstance(content, list):
            out: list[Any] = []
            for block in content:
                if isinstance(block, str):
                    out.append(self.redact(block))
                elif isinstance(block, dict) and isinstance(block.get("text"), str):
                    out.append({**block, "text": self.redact(block["text"])})
                else:
                    out.append(block)
            return out
        return content


def redact_value(redactor: Redactor, value: Any) -> Any:
    """``value`` with every string in it redacted (dicts, lists and tuples walked).

    For tool-call arguments shown outside the session (event stream, terminal): the
    same shape, each credential replaced, keys kept.

    Args:
        redactor: The redactor to apply.
        value: A JSON-like value.

    Returns:
        A redacted copy (non-string leaves unchanged).
    """
    if isinstance(value, str):
        return redactor.redact(value)
    if isinstance(value, Mapping):
        return {key: redact_value(redactor, item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(redactor, item) for item in value]
    return value


# Redactors of values only known at run time (what MCP configs expanded), applied to
# every log record on top of the token formats (see agentgraph/session/startup.py).
_LOG_REDACTORS: list[Redactor] = []


def redact_in_logs(redactor: Redactor) -> None:
    """Apply ``redactor`` to every log record from now on (until :func:`stop_redacting_in_logs`).

    Args:
        redactor: Knows values that libraries may log (a URL with a token in it).
    """
    _LOG_REDACTORS.append(redactor)


def stop_redacting_in_logs(redactor: Redactor) -> None:
    """Undo :func:`redact_in_logs` for ``redactor`` (nothing when it was not added)."""
    if redactor in _LOG_REDACTORS:
        _LOG_REDACTORS.remove(redactor)


def redact_log_text(text: str) -> str:
    """A log record's text with the registered values and known token formats replaced.

    Args:
        text: The formatted log message.

    Returns:
        The redacted text.
    """
    for redactor in list(_LOG_REDACTORS):
        text = redactor.redact(text)
    return redact_token_formats(text)


def build_redactor(settings_secrets: Iterable[str], env: Mapping[str, str] | None) -> Redactor:
    """The redactor for an agent: the settings' secrets plus its environment's.

    Args:
        settings_secrets: ``Settings.secret_values()`` (API key, database URL…).
        env: The agent's own environment (None: only the settings' secrets).

    Returns:
        A :class:`Redactor`.
    """
    return Redactor(secret_env_values(env or {}), exact_values=settings_secrets)
