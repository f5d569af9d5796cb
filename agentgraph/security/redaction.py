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
import functools
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
    # SendGrid API keys and Telegram bots' tokens.
    r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b",
    r"\b[0-9]{8,10}:AA[A-Za-z0-9_-]{30,40}\b",
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
# ``openssl base64`` and PEM at 64): such a line goes on with a shorter next one.
ENCODED_WRAP_WIDTHS = frozenset({64, 76})
# Characters of base64 a line ending in it holds at least to go on with the next line's
# data when that is as long (``base64 -w 48``, ``-w 100``).
ENCODED_WRAP_MIN_CHARS = 40
_ENCODED_KEY_HEADER_RE = re.compile(rb"-----BEGIN[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----")
# Runs too short to hold the encoded ``-----BEGIN `` (14 characters) are not looked at.
_BASE64_RUN_RE = re.compile(r"[A-Za-z0-9+/]{14,}={0,2}")


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


def _encoded_blocks(contents: list[str]) -> list[list[tuple[int, int, int]]]:
    """The runs of base64 in ``contents`` (lines without a ``\r``, ``cat -A``'s ``$`` or
    trailing spaces) as blocks of ``(line, start, end)`` segments: a run inside a line is
    a block of one; a run of at least :data:`ENCODED_WRAP_MIN_CHARS` ending its line goes
    on with the runs that make the next lines (after a prefix shaped as its own: none, a
    line number, ``f:3:``, a diff's ``+``) while those are as long, up to a shorter or
    padded one (``base64 key.pem``, ``base64 -w 80``). A shorter line right after the
    first ends the block only after a wrapping width (:data:`ENCODED_WRAP_WIDTHS`): a
    config's one long line and the next line's data are not one run."""
    blocks: list[list[tuple[int, int, int]]] = []
    n = 0
    while n < len(contents):
        content = contents[n]
        runs = list(_BASE64_RUN_RE.finditer(content))
        blocks.extend([(n, inside.start(), inside.end())] for inside in runs[:-1])
        if not runs:
            n += 1
            continue
        last = runs[-1]
        diff = last.start() == 0 and content.startswith("+")
        block = [(n, last.start() + diff, last.end())]
        width = last.end() - last.start() - diff
        prefix = _bare(content[: last.start() + diff])
        full = 1
        wraps = last.end() == len(content) and width >= ENCODED_WRAP_MIN_CHARS
        while wraps and not content.endswith("=") and n + 1 < len(contents):
            content = contents[n + 1]
            start, tail = _base64_tail(content)
            if diff and tail.startswith("+"):
                start, tail = start + 1, tail[1:]
            if not tail or len(tail) > width or _bare(content[:start]).strip() not in ("", prefix):
                break
            if len(tail) < width and full < 2 and width not in ENCODED_WRAP_WIDTHS:
                break
            n += 1
            block.append((n, start, len(content)))
            if len(tail) < width:
                break
            full += 1
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
    contents = [_content(line).rstrip(" \t") for line in lines]
    hidden: dict[int, list[tuple[int, int]]] = {}
    for block in _encoded_blocks(contents):
        data = "".join(contents[n][start:end] for n, start, end in block)
        if _holds_encoded_private_key(data):
            for n, start, end in block:
                hidden.setdefault(n, []).append((start, end))
    if not hidden:
        return text
    for n, spans in hidden.items():
        line = lines[n]
        pieces = []
        last = 0
        for start, end in sorted(spans):
            pieces += [line[last:start], REDACTED]
            last = end
        lines[n] = "".join([*pieces, line[last:]])
    return "\n".join(lines)


# Words of a setting's name (split at ``_ - .`` and case changes) that mark its value as a
# credential: the environment's name parts but the plurals, ``PRIVATE`` (``tokens: 12``,
# ``private: true`` are settings about them), ``SIGNATURE`` (a digest anyone may see) and
# ``PAT`` (in code, a pattern's).
ASSIGNED_SECRET_WORDS = SECRET_NAME_PARTS - {"KEYS", "TOKENS", "PRIVATE", "SIGNATURE", "PAT"}
# Words that mark a credential only beside another word (``DB_PASS``, ``API_KEY``): alone,
# ``pass:`` is prose or a flag and ``key:`` any mapping's key.
ASSIGNED_QUALIFIED_WORDS = frozenset({"PASS", "KEY"})
# Credentials' names written as one word (``authtoken:`` in ngrok's config, MinIO's
# ``secretkey``, ``PGPASSWORD``), looked for inside a name's words.
ASSIGNED_SECRET_COMPOUNDS = (
    "PASSWORD", "PASSWD", "APIKEY", "APITOKEN", "AUTHTOKEN", "ACCESSTOKEN", "ACCESSKEY",
    "SECRETKEY", "CLIENTSECRET", "IDENTITYTOKEN", "REFRESHTOKEN", "PRIVATEKEY", "DBPASS",
)  # fmt: skip
# A name ending in one of these words is a setting about a credential, not one
# (``auth_method``, ``token_url``, ``secret_name``, ``private_key_file``,
# ``PASSWORD_HASHER``).
ASSIGNED_NOT_SECRET_LAST_WORDS = frozenset(
    {
        "TYPE", "MODE", "METHOD", "PROVIDER", "URL", "URI", "ENDPOINT", "HOST", "DOMAIN",
        "FILE", "PATH", "DIR", "NAME", "ID", "ENABLED", "REQUIRED", "LENGTH", "SIZE",
        "TIMEOUT", "EXPIRY", "EXPIRES", "TTL", "HEADER", "PREFIX", "FORMAT", "VERSION",
        "ALGORITHM", "COUNT", "LIMIT", "FIELD", "PARAM", "ENV", "VAR", "LOCATION", "REF",
        "HASHER", "POLICY", "SERVER", "SCHEME", "PATTERN", "STRATEGY", "BACKEND", "CLASS",
        "RESET", "HINT", "HELP", "MESSAGE", "ERROR", "LABEL", "TEXT", "PROMPT", "KIND",
        "PLACEHOLDER", "TEMPLATE", "STYLE", "SOURCE", "STORE", "MANAGER", "RULES",
    }
)  # fmt: skip
# Words before ``KEY`` that make it a database's, a store's or a data structure's key,
# and words before ``TOKEN`` that make it a page's or a request's: not secrets
# (``STORAGE_KEY = 'todos-2.0'``, ``nextPageToken``).
ASSIGNED_NOT_SECRET_KINDS = frozenset(
    {
        "PRIMARY", "FOREIGN", "SORT", "PARTITION", "HASH", "RANGE", "CACHE", "PUBLIC",
        "ROUTING", "IDEMPOTENCY", "LOOKUP", "UNIQUE", "COMPOSITE", "SHORTCUT", "HOT",
        "STORAGE", "QUERY", "LOCK", "FLAG", "OBJECT", "S3", "I18N", "REDIS", "METADATA",
        "DIGEST", "CONFIG", "STATE", "EVENT", "ROW", "TABLE", "COLUMN", "INDEX", "ITEM",
        "MESSAGE", "TRANSLATION", "DICT", "MAP", "RESULT", "GROUP", "BUCKET", "SETTING",
        "SETTINGS", "LOCAL", "PREF", "PAGE", "NEXT", "CONTINUATION", "SYNC", "RESUME",
        "CANCELLATION", "CURSOR", "PAGINATION", "DEDUP", "SEARCH", "SLOT",
    }
)  # fmt: skip
# Characters after a value without quotes scanned for the line's end or a comment.
ASSIGNED_TRAILING_SPACE_MAX_CHARS = 64
# Longest value, in characters, taken for a setting's (a longer run is no setting's).
ASSIGNED_VALUE_MAX_CHARS = 1000
# Characters of a setting's line before its name looked at (a quote opened before it,
# ``.netrc``'s ``machine``).
ASSIGNED_LOOKBACK_CHARS = 256
# A value's parts (split at ``- _ . / : +``) up to this long, all lower case, make a
# slug (``todos-vuejs-2.0``, ``lock-job-42``), not a credential.
ASSIGNED_SLUG_PART_MAX_CHARS = 7
# An identifier's part this long mixing letters and digits is a token's random body
# (``shpat_1a2b3c4d5e6f7a8b``, ``dop_v1_…``), not a word.
ASSIGNED_RANDOM_PART_MIN_CHARS = 12
# Words of one or two letters camel-case names hold (``moveToEnd``, ``userId``); any
# other short lower-case piece reads as random characters.
SHORT_WORDS = frozenset(
    {
        "a", "to", "of", "in", "by", "on", "at", "is", "id", "or", "as", "up", "if", "no",
        "do", "go", "me", "my", "we", "be", "it", "an", "ok", "io", "ui", "db", "os",
    }
)  # fmt: skip
_ASSIGNMENT_RE: Any = None
# Pieces one of which every credential's name holds (any case): the words above and
# their compounds all hold one.
_NAME_HINTS = (
    "key", "token", "secret", "pass", "pwd", "auth", "bearer", "cred", "dsn", "webhook",
    "cookie",
)  # fmt: skip
_NAME_WORD_RE = re.compile(r"[A-Z]?[a-z]+[0-9]*|[A-Z]+[0-9]*(?![a-z])|[0-9]+")
_HUMP_RE = re.compile(r"[A-Z][a-z]+|[A-Z]+(?![a-z])|[a-z]+|[0-9]+")
_DOTTED_RE = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*(?:\.[A-Za-z_$][A-Za-z0-9_$]*)+")
_FILE_NAME_RE = re.compile(r".*\.[A-Za-z][A-Za-z0-9]{0,4}")
# A value after its name: in double quotes, in single quotes, or bare (group 1, 2, 3).
_VALUE_RE = re.compile(
    rb'(?:[bfruBFRU]{1,2}(?=["\']))?'
    rb'(?:"([^"\s\\]{8,%d})"|\'([^\'\s\\]{8,%d})\'|([^\s"\'`,;(){}\[\]<>]{8,%d}))'
    % ((ASSIGNED_VALUE_MAX_CHARS,) * 3)
)
# A value without quotes of a setting that starts its line (``.env``, YAML, INI): any
# characters but parentheses (a call's, in code) up to its end (``DB_PASSWORD=a,b{c}``).
_LINE_VALUE_RE = re.compile(rb"[^\s\"'`()]{8,%d}" % ASSIGNED_VALUE_MAX_CHARS)
# An XML element's text (``<password>…</password>``, Maven's settings).
_XML_VALUE_RE = re.compile(rb"([^<\s]{8,%d})</" % ASSIGNED_VALUE_MAX_CHARS)
# What may come before a setting that starts its line.
_LINE_LEADS = (b"", b"export", b"-", b"set", b"setx")
# A call or an index (``get_pass()``, ``tokenizer.encode(``, ``keys[0]``): code.
_CALL_RE = re.compile(r"[A-Za-z_$][A-Za-z0-9_$.]*[(\[]")
# ``grep -n``'s line number after a file name (``secrets.env:12:``), read as a value.
_LINE_NUMBER_RE = re.compile(rb"[0-9]+[:-]")
_NEXT_SETTING_RE = re.compile(rb"[ \t]*[A-Za-z_][A-Za-z0-9_ ]*=")
_SLUG_SPLIT_RE = re.compile(r"[-_./:+]+")
_IDENTIFIER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A constant's name (``_IMDSV2_SESSION_TOKEN_TTL_SECONDS``): words, however long.
_CONSTANT_RE = re.compile(r"_*[A-Z][A-Z0-9]*(?:_+[A-Z0-9]+)+")


def _assignment_re() -> Any:
    global _ASSIGNMENT_RE
    if _ASSIGNMENT_RE is None:
        options = re2.Options()
        options.log_errors = False
        # A setting's name and what sets it apart from its value, the value read after
        # it (:data:`_VALUE_RE`): a match holds no value, so names inside a value
        # refused (``https://x/?api_key=…``) are found as any other. Only names holding
        # a credential's word are candidates: every other ``a=b`` would cost a check.
        name = (
            rf"(?:[A-Za-z_][A-Za-z0-9_.-]{{0,40}})?(?i:{'|'.join(_NAME_HINTS)})"
            r"[A-Za-z0-9_.-]{0,40}"
        )
        _ASSIGNMENT_RE = re2.compile(
            # ``name=``, ``name: ``, ``"name": ``, ``'name' => `` (PHP), ``name := ``
            # (Go), ``define('NAME', `` (PHP); ``.netrc``'s ``password ``; ``<name>``.
            rf"(?:^|[^A-Za-z0-9_.])(?:(?P<name>{name})"
            r"(?:[\"'][ \t]*,|[\"']?[ \t]*(?:=>|:=|[:=]))[ \t]*"
            rf"|(?P<spaced>(?i:password|passwd))[ \t]+|<(?P<xml>{name})>)",
            options,
        )
    return _ASSIGNMENT_RE


@functools.lru_cache(maxsize=4096)
def is_secret_setting_name(name: str) -> bool:
    """Whether a setting's name (in a file, a header, code) marks its value a credential.

    Args:
        name: ``DB_PASSWORD``, ``_authToken``, ``clientSecret``, ``X-Api-Key``…

    Returns:
        True when a word of it (split at ``_``, ``-``, ``.`` and case changes) is one of
        :data:`ASSIGNED_SECRET_WORDS` (:data:`ASSIGNED_QUALIFIED_WORDS` only beside
        another word) or it holds one of :data:`ASSIGNED_SECRET_COMPOUNDS`
        (``PGPASSWORD``, ``authtoken``), unless its last word makes it a setting about
        one (:data:`ASSIGNED_NOT_SECRET_LAST_WORDS`) or the word before a last ``KEY`` or
        ``TOKEN`` makes it a store's or a page's (:data:`ASSIGNED_NOT_SECRET_KINDS`).
    """
    words = [w.upper() for w in _NAME_WORD_RE.findall(name)]
    if not words or words[-1] in ASSIGNED_NOT_SECRET_LAST_WORDS:
        return False
    kind = words[-2] if len(words) > 1 else ""
    if words[-1] in ("KEY", "TOKEN") and kind in ASSIGNED_NOT_SECRET_KINDS:
        return False
    marking = set(words) & ASSIGNED_SECRET_WORDS
    if len(words) == 1:
        marking -= ASSIGNED_QUALIFIED_WORDS
    joined = "".join(words)
    return bool(marking) or any(part in joined for part in ASSIGNED_SECRET_COMPOUNDS)


def _word_like(value: str) -> bool:
    """Whether ``value`` reads as words rather than random characters: a constant's or
    an identifier's name (``API_KEY_ENV``, ``api_key_2``, ``id_GostR3410_2001``) but one
    with a long part of letters and digits (``shpat_1a2b3c4d5e6f7a8b``), a lower-case
    slug of short parts (``todos-vuejs-2.0``), or camel-case words
    (``V1SecretVolumeSource``, ``OAuth2PasswordBearer``, ``moveToBeginningOfParagraph``)."""
    if _CONSTANT_RE.fullmatch(value):
        return True
    parts = [p for p in _SLUG_SPLIT_RE.split(value) if p]
    if not parts:
        return True
    if "_" in value and _IDENTIFIER_RE.fullmatch(value):
        return not any(_random_part(part) for part in parts)
    slug = len(parts) > 1 and value.islower()
    if slug and max(map(len, parts)) <= ASSIGNED_SLUG_PART_MAX_CHARS:
        return any(p.isalpha() for p in parts)
    if not all(part.isalnum() for part in parts):
        return False
    for part in parts:
        for hump in _HUMP_RE.findall(part):
            if hump.isdigit() and len(hump) > 2:
                return False
            short = len(hump) < 3 and not hump.isupper()
            if hump.isalpha() and short and hump.lower() not in SHORT_WORDS:
                return False
            if hump.isupper() and len(hump) > 5:
                return False
    return True


def _random_part(part: str) -> bool:
    """Whether an identifier's part is a token's random body: long, letters and digits."""
    return (
        len(part) >= ASSIGNED_RANDOM_PART_MIN_CHARS
        and any(c.isdigit() for c in part)
        and any(c.isalpha() for c in part)
    )


@functools.lru_cache(maxsize=4096)
def looks_like_assigned_secret(value: str) -> bool:
    """Whether a secret-named setting's value is a credential rather than a reference.

    Args:
        value: The value as written (without its quotes).

    Returns:
        True for a value :func:`looks_like_secret_value` takes that holds a digit or a
        symbol other than ``_ - . /``, and is no reference (``settings.DB_PASS``,
        ``process.env.API_KEY!``), call (``get_pass()``), identifier or slug that reads as
        words (``api_key_2``, ``V1SecretVolumeSource``, ``lock-job-42``), path, file
        name, URL, template (``${X}``, ``{{ x }}``, ``%(x)s``) or environment variable
        (``$X``).
    """
    bare = value.strip("!;,?")
    if (
        not bare
        or not looks_like_secret_value(bare)
        or ("{" in value and "}" in value)
        or bare[0] in "$~.%<:{[("
        or '"' in value
        or "'" in value
        or "://" in value
        or "${" in value
        or "{{" in value
        or "%(" in value
        or ("/" in value and _FILE_NAME_RE.fullmatch(value))
        or (_FILE_NAME_RE.fullmatch(value) and not any(c.isdigit() for c in value[-5:]))
        or _DOTTED_RE.fullmatch(bare.replace("?.", "."))
        or _CALL_RE.match(bare)
        or _word_like(bare)
    ):
        return False
    return any(c.isdigit() or not (c.isalpha() or c in "_-./") for c in value)


def _line_before(data: bytes, at: int) -> bytes:
    """What comes before ``at`` on its line, at most :data:`ASSIGNED_LOOKBACK_CHARS` of
    it (a line of a megabyte looked back over for every setting on it took minutes)."""
    start = max(0, at - ASSIGNED_LOOKBACK_CHARS)
    newline = data.rfind(b"\n", start, at)
    return data[newline + 1 if newline >= 0 else start : at]


def _ends_setting(data: bytes, end: int) -> bool:
    """Whether a value without quotes ending at ``end`` ends its setting: the line's end
    or a comment follows it (after at most :data:`ASSIGNED_TRAILING_SPACE_MAX_CHARS` of
    spaces)."""
    stop = min(len(data), end + ASSIGNED_TRAILING_SPACE_MAX_CHARS)
    pos = end
    while pos < stop and data[pos : pos + 1] in (b" ", b"\t"):
        pos += 1
    if pos == len(data) or data[pos : pos + 1] in (b"\r", b"\n"):
        return True
    return pos > end and data[pos : pos + 1] == b"#"


def _bare_value_end(data: bytes, name_start: int, start: int, end: int) -> int | None:
    """Where a value without quotes that starts at ``start`` (its run ending at ``end``)
    ends as a credential, or None when it is code: it ends its line; a URL query's
    parameter ends at ``&``; a command's flag (``--password=…``) at its word's end; a
    connection string's (``Password=…;``) at ``;``; a shell
    word's or a header's opened before its name (``-e 'X-Api-Key: …'``) at its quote."""
    before = data[name_start - 1 : name_start]
    if before == b"-":  # a command's flag: ``--password=…`` ends at its word's end
        return end
    if before in (b"?", b"&"):
        amp = data.find(b"&", start, end)
        return amp if amp >= 0 else end
    if data[end : end + 1] == b";" and (before == b";" or _NEXT_SETTING_RE.match(data, end + 1)):
        return end
    line = _line_before(data, name_start)
    for quote in (b"'", b'"'):
        close = data.find(quote, start, end + 1)
        if line.count(quote) % 2 == 1 and close >= 0:
            return close
    return end if _ends_setting(data, end) else None


def redact_secret_assignments(text: str) -> str:
    """Replace the values of secret-named settings: ``DB_PASS=…`` in a ``.env``,
    ``password: …`` in YAML, ``password = …`` in INI, ``_authToken=…`` in ``.npmrc``,
    Docker's ``"auth": "…"``, ``.netrc``'s ``password …``, ``clientSecret: "…"`` in code,
    ``X-Api-Key: …`` in a header, ``?api_key=…`` in a URL. Such values have no format of
    their own, and a file read or printed sent them to the model whole.

    A value is replaced when its name is a credential's (:func:`is_secret_setting_name`)
    and the value looks like one (:func:`looks_like_assigned_secret`). A quoted value is
    what the quotes hold (without spaces); one without quotes counts only where it ends
    its line (a comment aside), a URL query's parameter, a connection string's part or a
    quoted shell word: followed by more (``x ?? y``, ``a, b``) it is code, and a
    credential in code is quoted. A value set apart from its name by spaces alone counts
    only after ``password`` at a line's start or after ``machine``/``login`` on it
    (``.netrc``). The name, quotes and the rest of the line stay. Names are found first
    and each value read after its own, so a name inside another's value
    (``https://x/?api_key=…``) is found as any other.

    Args:
        text: Any text.

    Returns:
        The text with such values replaced (the same object when there is none).
    """
    if not text:
        return text
    # Searched as UTF-8: for a ``str``, RE2 counts its characters from its start again
    # at every match after the first (a megabyte of settings took minutes).
    data = text.encode("utf-8", "surrogatepass")
    spans: list[tuple[int, int]] = []
    for match in _assignment_re().finditer(data):
        if spans and match.start() < spans[-1][1]:
            continue  # inside a value already hidden
        span = _secret_span(data, match)
        if span is not None:
            spans.append(span)
    if not spans:
        return text
    out = []
    last = 0
    for start, end in spans:
        # Whole characters only: a text's unpaired surrogates are no UTF-8 RE2 reads.
        while start > last and data[start] & 0xC0 == 0x80:
            start -= 1
        while end < len(data) and data[end] & 0xC0 == 0x80:
            end += 1
        out += [data[last:start], REDACTED.encode()]
        last = max(last, end)
    out.append(data[last:])
    return b"".join(out).decode("utf-8", "surrogatepass")


def _secret_span(data: bytes, match: Any) -> tuple[int, int] | None:
    """The span in ``data`` of the value after ``match`` (a name and its separator) when
    it is a credential, else None."""
    # RE2's match takes group numbers for positions: the name 1, ``password`` 2, an XML
    # element's name 3.
    name = match.group(1) if match.group(1) is not None else match.group(3)
    # An attribute's name is its last part: ``key_node.tag`` sets a tag, ``cfg.api_key``
    # a key.
    if name is not None and not is_secret_setting_name(
        name.rsplit(b".", 1)[-1].decode("utf-8", "replace")
    ):
        return None
    # A quoted name before a comma is a constant PHP defines (``define('DB_PASSWORD',``);
    # any other is an argument list's (``headers.add('set-cookie', 'a=b')``).
    define = match.group(1) is not None and b"," in data[match.end(1) : match.end()]
    if define and not name.replace(b"_", b"").isupper():
        return None
    if match.group(3) is not None:
        element = _XML_VALUE_RE.match(data, match.end())
        if element is None:
            return None
        start, end = element.span(1)
        value = data[start:end].decode("utf-8", "replace")
        return (start, end) if looks_like_assigned_secret(value) else None
    found = _VALUE_RE.match(data, match.end())
    if match.group(1) is not None and not define and (found is None or found.group(3)):
        lead = _line_before(data, match.start(1)).strip(b" \t")
        whole = _LINE_VALUE_RE.match(data, match.end()) if lead in _LINE_LEADS else None
        # A line ending in ``,`` or ``;`` is code's (``keyMap: c.#keyMap,``).
        code = whole is not None and data[whole.end() - 1 : whole.end()] in (b",", b";")
        if whole is not None and not code and _ends_setting(data, whole.end()):
            if _LINE_NUMBER_RE.match(data, whole.start()):
                return None
            value = data[whole.start() : whole.end()].decode("utf-8", "replace")
            return whole.span() if looks_like_assigned_secret(value) else None
    if found is None:
        return None
    group = next(g for g in (1, 2, 3) if found.group(g) is not None)
    start, end = found.span(group)
    if define and group == 3:
        return None
    if name is None:
        if group != 3:
            return None
        line = _line_before(data, match.start(2)).lower().strip(b" \t")
        if line and b"machine " not in line and b"login " not in line:
            return None
    elif group == 3:
        if _LINE_NUMBER_RE.match(data, start) or end - start == ASSIGNED_VALUE_MAX_CHARS:
            return None
        bare_end = _bare_value_end(data, match.start(1), start, end)
        if bare_end is None or bare_end - start < SECRET_VALUE_MIN_CHARS:
            return None
        end = bare_end
    value = data[start:end].decode("utf-8", "replace")
    return (start, end) if looks_like_assigned_secret(value) else None


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
