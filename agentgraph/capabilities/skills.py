"""Skills: task playbooks in ``skills/<id>/SKILL.md``, disclosed progressively.

A skill is a folder holding ``SKILL.md`` (YAML front matter with ``name``,
``description`` and optional ``allowed_tools``, then a Markdown body) and any
helper files (scripts, references). The system prompt lists only each skill's
name and description; the body enters the context when the model calls
``load_skill(name)`` or the user mentions ``@skill-name``. Loading a skill sets
``active_skill``, makes its folder readable by ``read_file`` (``skill_dirs``)
and, when the skill declares ``allowed_tools``, replaces ``allowed_tools`` with
that list (the persistent tools stay available; tools denied to a subagent stay
denied).

Sources, later ones overriding earlier ones by id: the repository's ``skills/``
folder (absent in an installed wheel), ``AGENTGRAPH_HOME/skills`` and the
workspace's ``.agentgraph/skills``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.types import Command

from agentgraph.runtime.runctx import AgentToolRuntime, context_of

SKILL_FILE_NAME = "SKILL.md"
WORKSPACE_SKILLS_DIR = Path(".agentgraph") / "skills"
HOME_SKILLS_DIR_NAME = "skills"
# A SKILL.md larger than this is refused: a skill is a playbook, not a corpus.
SKILL_FILE_MAX_BYTES = 256 * 1024
SKILL_DESCRIPTION_MAX_CHARS = 300
SKILLS_LISTED_MAX = 50
SKILL_ID_MAX_CHARS = 64
# Tools that stay callable whatever a skill's allowed_tools say.
PERSISTENT_TOOLS = ("load_skill", "todo_write", "todo_read")
LOAD_SKILL_TOOL = "load_skill"
SKILL_MESSAGE_KIND = "skill"
AGENTGRAPH_KEY = "agentgraph"


class SkillError(ValueError):
    """A SKILL.md that cannot be used (bad front matter, missing fields)."""


@dataclass(frozen=True)
class Skill:
    """One discovered skill.

    Attributes:
        id: The folder name; what ``load_skill`` and ``@mentions`` use.
        name: The front matter ``name``.
        description: The front matter ``description`` (one line in the prompt).
        allowed_tools: Tools the skill declares, or None to leave tools unchanged.
        directory: The real path of the skill folder.
        body: The Markdown after the front matter.
        source: Which source it came from (``repo``, ``home``, ``workspace``).
    """

    id: str
    name: str
    description: str
    allowed_tools: tuple[str, ...] | None
    directory: Path
    body: str
    source: str


@dataclass
class SkillCatalog:
    """The skills visible from one workspace, and why others were skipped."""

    skills: dict[str, Skill] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def find(self, name: str) -> Skill | None:
        """The skill whose id or name is ``name`` (case-insensitive), if any."""
        wanted = name.strip().lstrip("@").lower()
        if wanted in self.skills:
            return self.skills[wanted]
        for skill in self.skills.values():
            if skill.id.lower() == wanted or skill.name.lower() == wanted:
                return skill
        return None


@cache
def _repo_skills_candidate() -> Path:
    """Where a source checkout keeps its skills, resolved once."""
    # Every system prompt asks, and resolving costs a system call per path component;
    # the package's own location does not move while the process runs.
    return Path(__file__).resolve().parents[2] / "skills"


def repo_skills_dir() -> Path | None:
    """``skills/`` next to the ``agentgraph`` package (a source checkout), if present."""
    candidate = _repo_skills_candidate()
    return candidate if candidate.is_dir() else None


def skill_sources(home: Path, workspace: Path | str | None) -> list[tuple[str, Path]]:
    """Folders searched for skills, lowest priority first.

    Args:
        home: ``AGENTGRAPH_HOME``.
        workspace: The session workspace, if any.

    Returns:
        ``(label, folder)`` pairs; folders may not exist.
    """
    sources: list[tuple[str, Path]] = []
    repo = repo_skills_dir()
    if repo is not None:
        sources.append(("repo", repo))
    sources.append(("home", Path(home) / HOME_SKILLS_DIR_NAME))
    if workspace:
        sources.append(("workspace", Path(workspace) / WORKSPACE_SKILLS_DIR))
    return sources


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """Split ``---`` YAML front matter from a Markdown body.

    Args:
        text: The whole SKILL.md.

    Returns:
        The front matter mapping and the body.

    Raises:
        SkillError: No front matter, or it is not a YAML mapping.
    """
    stripped = text.lstrip("\ufeff")
    lines = stripped.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillError("no YAML front matter (the file must start with a '---' line)")
    for end in range(1, len(lines)):
        if lines[end].strip() == "---":
            break
    else:
        raise SkillError("front matter is not closed by a '---' line")
    try:
        meta = yaml.safe_load("".join(lines[1:end])) or {}
    except yaml.YAMLError as exc:
        raise SkillError(f"front matter is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(meta, dict):
        raise SkillError("front matter must be a YAML mapping")
    return meta, "".join(lines[end + 1 :]).strip() + "\n"


def _tool_list(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        items = [part.strip() for part in value.replace(",", " ").split()]
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        items = [v.strip() for v in value]
    else:
        raise SkillError("allowed_tools must be a list of tool names")
    return tuple(dict.fromkeys(i for i in items if i))


def parse_skill(skill_file: Path, source: str = "repo") -> Skill:
    """Read one ``SKILL.md``.

    Args:
        skill_file: Path of the SKILL.md.
        source: Label of the source folder.

    Returns:
        The skill.

    Raises:
        SkillError: The file is unreadable, too large or malformed.
    """
    directory = skill_file.parent
    try:
        size = skill_file.stat().st_size
        if size > SKILL_FILE_MAX_BYTES:
            raise SkillError(f"{size} bytes; the limit is {SKILL_FILE_MAX_BYTES}")
        text = skill_file.read_text(encoding="utf-8")
    except OSError as exc:
        raise SkillError(f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise SkillError("not UTF-8 text") from None
    meta, body = split_front_matter(text)
    name = meta.get("name")
    description = meta.get("description")
    if not isinstance(name, str) or not name.strip():
        raise SkillError("front matter needs a 'name'")
    if not isinstance(description, str) or not description.strip():
        raise SkillError("front matter needs a 'description'")
    description = " ".join(description.split())
    if len(description) > SKILL_DESCRIPTION_MAX_CHARS:
        description = description[: SKILL_DESCRIPTION_MAX_CHARS - 1] + "…"
    allowed = _tool_list(meta.get("allowed_tools", meta.get("allowed-tools")))
    return Skill(
        id=directory.name.lower(),
        name=name.strip(),
        description=description,
        allowed_tools=allowed,
        directory=Path(os.path.realpath(directory)),
        body=body,
        source=source,
    )


_PARSE_CACHE: dict[tuple[str, int, int], Skill] = {}
_PARSE_CACHE_LOCK = threading.Lock()


def _parse_cached(skill_file: Path, source: str) -> Skill:
    # The catalog is rebuilt for every system prompt; re-parse only changed files.
    st = skill_file.stat()
    key = (str(skill_file), st.st_mtime_ns, st.st_size)
    with _PARSE_CACHE_LOCK:
        hit = _PARSE_CACHE.get(key)
    if hit is not None and hit.source == source:
        return hit
    skill = parse_skill(skill_file, source)
    with _PARSE_CACHE_LOCK:
        _PARSE_CACHE[key] = skill
    return skill


def discover_skills(sources: Iterable[tuple[str, Path]]) -> SkillCatalog:
    """Find the skills in ``sources`` (later sources override earlier ones by id).

    Args:
        sources: ``(label, folder)`` pairs, see :func:`skill_sources`.

    Returns:
        The catalog; malformed skills are skipped and described in ``problems``.
    """
    catalog = SkillCatalog()
    for label, folder in sources:
        try:
            entries = sorted(folder.iterdir()) if folder.is_dir() else []
        except OSError as exc:
            catalog.problems.append(f"{folder}: {exc.strerror or exc}")
            continue
        for entry in entries:
            skill_file = entry / SKILL_FILE_NAME
            if not skill_file.is_file() or len(entry.name) > SKILL_ID_MAX_CHARS:
                continue
            try:
                skill = _parse_cached(skill_file, label)
            except (SkillError, OSError) as exc:
                catalog.problems.append(f"{skill_file}: {exc}")
                continue
            catalog.skills[skill.id] = skill
    return catalog


def catalog_for(home: Path, workspace: Path | str | None) -> SkillCatalog:
    """The skills visible from ``workspace`` (repo, home and workspace sources)."""
    return discover_skills(skill_sources(home, workspace))


def skills_prompt_section(catalog: SkillCatalog, active: str | None = None) -> str:
    """The system-prompt listing: names and descriptions only (progressive disclosure)."""
    if not catalog.skills:
        return ""
    lines = [
        "Skills (playbooks for specific tasks; call load_skill(name) before starting such a "
        "task — the user may also load one with @name):"
    ]
    for skill in list(catalog.skills.values())[:SKILLS_LISTED_MAX]:
        lines.append(f"- {skill.id}: {skill.description}")
    hidden = len(catalog.skills) - SKILLS_LISTED_MAX
    if hidden > 0:
        lines.append(f"- … and {hidden} more (load_skill accepts any skill id)")
    if active and active in catalog.skills:
        skill = catalog.skills[active]
        lines.append(
            f"Active skill: {skill.id} — its files are in {skill.directory} (read_file accepts "
            "absolute paths there)."
        )
    return "\n".join(lines)


def skill_text(skill: Skill) -> str:
    """What the model receives when a skill is loaded: the body and where its files are."""
    return (
        f"Skill '{skill.id}' loaded. Its files are in {skill.directory} — read them with "
        f"read_file using absolute paths and run its scripts from there.\n\n{skill.body}"
    )


def activation_update(
    skill: Skill, state: Mapping[str, Any], tool_names: Sequence[str]
) -> dict[str, Any]:
    """State update that activates ``skill``.

    ``allowed_tools`` becomes the skill's declared list (known tools only), which may
    narrow or extend the current list; tools in ``denied_tools`` stay out, so a skill
    cannot give a subagent a tool its caller excluded.

    Args:
        skill: The skill to activate.
        state: The current graph state.
        tool_names: Names of every tool the agent has.

    Returns:
        A partial update for ``active_skill``, ``skill_dirs`` and, when the skill
        declares tools, ``allowed_tools`` and ``persistent_tools``.
    """
    update: dict[str, Any] = {
        "active_skill": skill.id,
        "skill_dirs": [str(skill.directory)],
    }
    if skill.allowed_tools is not None:
        denied = set(state.get("denied_tools") or [])
        known = set(tool_names)
        persistent = [t for t in PERSISTENT_TOOLS if t in known and t not in denied]
        update["allowed_tools"] = [
            t
            for t in dict.fromkeys([*skill.allowed_tools, *persistent])
            if t in known and t not in denied
        ]
        update["persistent_tools"] = persistent
    return update


def skill_message(skill: Skill) -> HumanMessage:
    """The message an ``@skill`` mention adds before the user's request."""
    return HumanMessage(
        content=skill_text(skill),
        additional_kwargs={AGENTGRAPH_KEY: {"kind": SKILL_MESSAGE_KIND, "skill": skill.id}},
    )


# The skill catalog seen from a workspace.
CatalogProvider = Callable[[str], SkillCatalog]


def make_load_skill_tool(catalog: CatalogProvider, tool_names: Sequence[str]) -> BaseTool:
    """Build the ``load_skill`` tool.

    Args:
        catalog: Returns the skill catalog seen from a workspace (the run's).
        tool_names: Every tool name the agent has (to validate ``allowed_tools``).

    Returns:
        The tool.
    """

    @tool(LOAD_SKILL_TOOL, parse_docstring=True)
    def load_skill(name: str, runtime: AgentToolRuntime) -> Command[Any] | str:
        """Load a skill's instructions.

        Args:
            name: A skill id listed under Skills.
        """
        state: Mapping[str, Any] = runtime.state if isinstance(runtime.state, Mapping) else {}
        found = catalog(context_of(runtime).workspace_path)
        skill = found.find(name)
        if skill is None:
            known = ", ".join(sorted(found.skills)) or "none"
            return f"Error: no skill named {name!r} (available: {known})"
        update = activation_update(skill, state, tool_names)
        message = ToolMessage(
            content=skill_text(skill), tool_call_id=runtime.tool_call_id, name=LOAD_SKILL_TOOL
        )
        return Command(update={**update, "messages": [message]})

    return load_skill
