"""The typed protocol: every event the agent emits is modelled, the doc is generated."""

from __future__ import annotations

import ast
import importlib.util
import typing
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from agentgraph.capabilities.diffs import FileDiff, diff_event
from agentgraph.config import Settings
from agentgraph.protocol.docs import rewrite
from agentgraph.protocol.events import (
    EVENT_MODELS,
    INTERNAL_NAMES,
    Approval,
    Diff,
    TextDelta,
    TurnEnd,
    UnknownEvent,
    dump_event,
    event_to_show,
    to_event,
)
from agentgraph.protocol.ops import OP_MODELS, AnswerApprovals, Op, SubmitTurn, parse_op
from agentgraph.runtime.token_stream import PROGRESS_EVENT, TOKEN_EVENT
from agentgraph.security.approvals import APPROVAL_TYPE, approval_request
from agentgraph.session.agent import TurnResult

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "agentgraph"
# Dict literals with a "type" key that are not UI events: message content blocks, tool
# schemas, MCP server configs, transcript entries and LangChain's own tool-call dicts.
NOT_EVENTS = frozenset(
    {"image_url", "text", "function", "object", "http", "summary", "tool_use", "tool_call"}
)
# Events whose "type" is a named constant rather than a literal.
CONSTANT_TYPES = {APPROVAL_TYPE, INTERNAL_NAMES.get(TOKEN_EVENT, TOKEN_EVENT), PROGRESS_EVENT}


def _literal_types() -> set[str]:
    """Every string a dict literal in the package gives its "type" key."""
    found: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        if path.parent.name == "protocol":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Dict):
                continue
            for key, value in zip(node.keys, node.values, strict=True):
                if (
                    isinstance(key, ast.Constant)
                    and key.value == "type"
                    and isinstance(value, ast.Constant)
                    and isinstance(value.value, str)
                ):
                    found.add(value.value)
    return found


def test_every_event_type_the_agent_emits_is_modelled() -> None:
    modelled = {str(m.model_fields["type"].default) for m in EVENT_MODELS}
    emitted = {INTERNAL_NAMES.get(t, t) for t in _literal_types() - NOT_EVENTS}
    emitted |= CONSTANT_TYPES
    # "tool_call" is both a LangChain dict and an event: it must be modelled too.
    assert "tool_call" in modelled
    assert emitted - modelled == set()
    # The scan sees the emitters (it would pass vacuously if it found nothing).
    assert {"notice", "masking", "subagent_done", "diff", "text_delta"} <= emitted


def test_events_made_by_the_real_emitters_validate(
    tmp_path: Path, make_settings: Callable[..., Settings]
) -> None:
    change = FileDiff("a.py", "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y\n", 1, 1)
    diff = to_event(diff_event(change, "call_1"))
    assert isinstance(diff, Diff) and diff.added == 1 and diff.tool_call_id == "call_1"
    (tmp_path / "a.py").write_text("x = 1\n", encoding="utf-8")
    call = {"name": "edit_file", "args": {"path": "a.py", "old_string": "1", "new_string": "2"}}
    settings = make_settings(AGENTGRAPH_EDITS="ask")
    question = approval_request(call | {"id": "c1"}, settings, str(tmp_path))  # type: ignore[arg-type]
    assert question is not None
    approval = to_event({**question, "id": "intr-1"})
    assert isinstance(approval, Approval) and approval.path == "a.py"
    assert approval.diff is not None and "+x = 2" in approval.diff


def test_internal_names_and_the_turn_end_become_typed_events() -> None:
    assert isinstance(to_event({"type": "token", "text": "hi"}), TextDelta)
    result = TurnResult("t1", "done", 10, 2, 0, 9, stop_reason="max_loops")
    end = to_event({"type": "turn_end", "result": result})
    assert isinstance(end, TurnEnd) and end.answer == "done" and end.stop_reason == "max_loops"


def test_extra_fields_are_kept_and_unknown_types_pass_through() -> None:
    dumped = dump_event(to_event({"type": "notice", "text": "x", "new_field": 3}))
    assert dumped == {"type": "notice", "text": "x", "new_field": 3}
    unknown = to_event({"type": "brand_new", "a": 1})
    assert isinstance(unknown, UnknownEvent)
    assert dump_event(unknown) == {"type": "brand_new", "a": 1}


def test_a_known_event_of_the_wrong_shape_is_refused() -> None:
    with pytest.raises(ValidationError):
        to_event({"type": "diff", "path": "a.py"})


def test_operations_are_validated() -> None:
    assert parse_op({"op": "submit_turn", "text": "hi"}) == SubmitTurn(text="hi")
    op = parse_op({"op": "answer_approvals", "thread_id": "t", "answers": {"i": True}})
    assert isinstance(op, AnswerApprovals)
    for bad in ({"op": "submit_turn", "text": ""}, {"op": "nope"}, {"op": "cancel"}):
        with pytest.raises(ValidationError):
            parse_op(bad)
    with pytest.raises(ValidationError):
        parse_op({"op": "submit_turn", "text": "x", "thread_id": "t", "extra": 1})


def test_the_events_doc_is_what_the_models_generate() -> None:
    spec = importlib.util.spec_from_file_location(
        "gen_events_md", ROOT / "docs" / "gen_events_md.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    doc = module.DOC.read_text(encoding="utf-8")
    assert doc == rewrite(doc), "run: python docs/gen_events_md.py"


def test_every_operation_is_in_the_docs_table() -> None:
    union = typing.get_args(typing.get_args(Op)[0])
    assert set(OP_MODELS) == set(union) and len(OP_MODELS) == len(union)


def test_a_front_end_drops_a_malformed_event_instead_of_failing() -> None:
    assert event_to_show({"type": "tool_call", "id": 1}) is None
    shown = event_to_show({"type": "token", "text": "hi"})
    assert shown is not None and shown.type == "text_delta"


def test_an_approval_offering_a_rule_or_a_plan_is_typed() -> None:
    offered = {"tool": "run_bash", "pattern": "ls"}
    event = to_event(
        {"type": "approval", "id": "i", "tool": "run_bash", "command": "ls", "rule": offered}
    )
    assert isinstance(event, Approval) and event.rule is not None
    assert (event.rule.tool, event.rule.pattern) == ("run_bash", "ls")
    plan = to_event(
        {"type": "approval", "id": "j", "tool": "present_plan", "mode": "plan", "plan": "1. do"}
    )
    assert isinstance(plan, Approval) and (plan.mode, plan.plan) == ("plan", "1. do")
