"""Tool calls written as text (local models) become real calls; other text stays text."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from agentgraph.runtime.text_tool_calls import extract_text_tool_calls

TOOLS = {"read_file", "run_bash", "edit_file"}


def names_args(text: str) -> list[tuple[str, dict[str, object]]]:
    return [(c["name"], c["args"]) for c in extract_text_tool_calls(text, TOOLS).calls]


def test_bare_json_name_arguments() -> None:
    text = '{"name": "read_file", "arguments": {"path": "a.py"}}'
    assert names_args(text) == [("read_file", {"path": "a.py"})]


def test_several_bare_objects_on_lines() -> None:
    text = (
        '{"name": "read_file", "arguments": {"path": "a.py"}}\n'
        '{"name": "run_bash", "arguments": {"command": "pytest -q"}}'
    )
    assert names_args(text) == [
        ("read_file", {"path": "a.py"}),
        ("run_bash", {"command": "pytest -q"}),
    ]


def test_several_objects_on_lines_in_one_fence_or_one_tag() -> None:
    """Calls of several files written one a line in one fence or one pair of tags."""
    lines = "\n".join(
        json.dumps({"name": "read_file", "arguments": {"path": f"{n}.py"}}) for n in "abc"
    )
    expected = [("read_file", {"path": f"{n}.py"}) for n in "abc"]
    fenced = extract_text_tool_calls(f"Reading them:\n```json\n{lines}\n```\nthen more.", TOOLS)
    assert [(c["name"], c["args"]) for c in fenced.calls] == expected
    assert fenced.text == "Reading them:\n\nthen more."
    tagged = extract_text_tool_calls(f"<tool_call>\n{lines}\n</tool_call>", TOOLS)
    assert [(c["name"], c["args"]) for c in tagged.calls] == expected
    assert tagged.text == ""
    # One line that is not a call leaves the whole block, and the reply, as text.
    data = f'```json\n{lines}\n{{"timeout": 30}}\n```'
    assert extract_text_tool_calls(data, TOOLS).calls == []


def test_fenced_json_with_prose_around() -> None:
    text = (
        "I'll read the file first.\n```json\n"
        '{"name": "read_file", "parameters": {"path": "src/x.py"}}\n```\n'
    )
    found = extract_text_tool_calls(text, TOOLS)
    assert [(c["name"], c["args"]) for c in found.calls] == [("read_file", {"path": "src/x.py"})]
    assert found.text == "I'll read the file first."


def test_hermes_tags_and_openai_function_shape_with_string_arguments() -> None:
    args = json.dumps({"command": "ls"})
    text = (
        "<tool_call>\n"
        + json.dumps({"type": "function", "function": {"name": "run_bash", "arguments": args}})
        + "\n</tool_call>"
    )
    assert names_args(text) == [("run_bash", {"command": "ls"})]


def test_qwen_tools_tags_as_its_chat_template_lists_tools() -> None:
    """Qwen2.5 models, shown their tools inside <tools>…</tools>, write calls in them too."""
    text = '<tools>\n{"name": "edit_file", "arguments": {"path": "notes.txt"}}\n</tools>'
    assert names_args(text) == [("edit_file", {"path": "notes.txt"})]
    # A schema listing in those tags names no call: it stays text.
    listing = '<tools>\n{"type": "function", "function": {"name": "x", "parameters": {}}}\n</tools>'
    assert extract_text_tool_calls(listing, TOOLS).calls == []


def test_qwen_function_elements_inside_its_tools_tags() -> None:
    """Seen from Qwen2.5-Coder 1.5B through llama.cpp: calls as self-closing elements."""
    text = (
        "<tools>\n"
        '<function name="read_file" arguments=\'{"path": "src/calc.py"}\' />\n'
        '<function name="run_bash" arguments="{&quot;command&quot;: &quot;pytest -q&quot;}"/>\n'
        "</tools>"
    )
    found = extract_text_tool_calls(text, TOOLS)
    assert [(c["name"], c["args"]) for c in found.calls] == [
        ("read_file", {"path": "src/calc.py"}),
        ("run_bash", {"command": "pytest -q"}),
    ]
    assert found.text == ""


def test_function_elements_with_a_json_body_and_prose_around() -> None:
    text = 'Let me look.\n<function=read_file>{"path": "a.py"}</function>'
    found = extract_text_tool_calls(text, TOOLS)
    assert [(c["name"], c["args"]) for c in found.calls] == [("read_file", {"path": "a.py"})]
    assert found.text == "Let me look."
    body = '<function name="edit_file">{"path": "a", "old_string": "it\'s"}</function>'
    assert names_args(body) == [("edit_file", {"path": "a", "old_string": "it's"})]


def test_function_elements_quoted_in_prose_stay_text() -> None:
    """An element in backticks, in a code block, followed by prose, or a quoted tool
    definition is an example; a broken element leaves the whole reply alone."""
    for text in (
        'Llama writes a call like `<function=run_bash>{"command": "rm -rf build"}</function>`.',
        '```xml\n<function=run_bash>{"command": "ls"}</function>\n```',
        '<function=read_file>{"path": "a.py"}</function> is how a call looks.',
        '<function name="read_file" parameters=\'{"type": "object"}\' />',
        '<function=read_file>{"path": "a.py"}</function>\n'
        '<function=edit_file>{"path": x}</function>',
    ):
        found = extract_text_tool_calls(text, TOOLS)
        assert found.calls == [] and found.text == text


def test_a_repeated_tool_definition_is_not_run_as_a_call() -> None:
    """A model that echoes a tool's schema would otherwise call the tool with the schema
    as its arguments (a tool with no required argument would run)."""
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    for definition in (
        {"type": "function", "function": {"name": "list_dir", "parameters": schema}},
        {"name": "list_dir", "parameters": schema},
    ):
        text = f"<tools>\n{json.dumps(definition)}\n</tools>"
        found = extract_text_tool_calls(text, {*TOOLS, "list_dir"})
        assert found.calls == [] and found.text == text


def test_a_reply_cut_before_its_closing_tag_leaves_no_tag_behind() -> None:
    for text in (
        '<tools>\n<function name="read_file" arguments=\'{"path": "a.py"}\' />',
        '<tool_call>\n<function=read_file>{"path": "a.py"}</function>',
    ):
        found = extract_text_tool_calls(text, TOOLS)
        assert [(c["name"], c["args"]) for c in found.calls] == [("read_file", {"path": "a.py"})]
        assert found.text == ""


def test_function_elements_that_are_not_calls_stay_text() -> None:
    for text in (
        "<function name=\"read_file\" arguments='{not json' />",  # unreadable arguments
        '<function=read_file>["a.py"]</function>',  # arguments that are not an object
        "<tools>\n<function name=\"read_file\" arguments='{}' />\nand some prose\n</tools>",
        "Use <b>bold</b> and <function> in prose.",
    ):
        found = extract_text_tool_calls(text, TOOLS)
        assert found.calls == [] and found.text == text
    undeclared = extract_text_tool_calls("<function=rm_rf>{}</function>", TOOLS)
    assert undeclared.calls == [] and undeclared.rejected == ["rm_rf"]


def test_array_and_tool_calls_wrapper() -> None:
    one = {"name": "read_file", "arguments": {"path": "a"}}
    two = {"function": {"name": "edit_file", "arguments": {"path": "a", "old": "x"}}}
    assert len(names_args(json.dumps([one, two]))) == 2
    assert len(names_args(json.dumps({"tool_calls": [one, two]}))) == 2


def test_ids_are_unique_and_calls_are_typed() -> None:
    text = json.dumps([{"name": "read_file", "arguments": {"path": str(i)}} for i in range(5)])
    calls = extract_text_tool_calls(text, TOOLS).calls
    assert len({c["id"] for c in calls}) == 5
    assert all(c["type"] == "tool_call" for c in calls)


def test_undeclared_tool_is_rejected_and_text_kept() -> None:
    text = '{"name": "delete_everything", "arguments": {}}'
    found = extract_text_tool_calls(text, TOOLS)
    assert found.calls == []
    assert found.rejected == ["delete_everything"]
    assert found.text == text


def test_prose_with_inline_json_stays_text() -> None:
    text = 'Set it like {"name": "read_file", "arguments": {"path": "a"}} in your config.'
    assert extract_text_tool_calls(text, TOOLS).calls == []


def test_json_data_that_is_not_a_call_stays_text() -> None:
    for text in (
        '{"name": "read_file", "version": 3}',  # extra keys: data
        '{"path": "a.py"}',
        "[1, 2, 3]",
        '```json\n{"name": "read_file", "arguments": [1]}\n```',
        "```json\nnot json at all\n```",
        "<tool_call>{broken</tool_call>",
    ):
        assert extract_text_tool_calls(text, TOOLS).calls == [], text


def test_no_declared_tools_means_no_calls() -> None:
    assert extract_text_tool_calls('{"name": "read_file", "arguments": {}}', set()).calls == []


def test_deep_nesting_and_huge_text_are_left_alone() -> None:
    deep = '{"name": "read_file", "arguments": {"a": ' + "[" * 5000 + "]" * 5000 + "}}"
    assert extract_text_tool_calls(deep, TOOLS).calls == []
    huge = '{"name": "read_file", "arguments": {"path": "' + "x" * 300_000 + '"}}'
    assert extract_text_tool_calls(huge, TOOLS).calls == []


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_arbitrary_text_never_raises_and_only_declared_tools_come_out(text: str) -> None:
    found = extract_text_tool_calls(text, TOOLS)
    assert all(c["name"] in TOOLS for c in found.calls)
    assert all(isinstance(c["args"], dict) for c in found.calls)
    if not found.calls:
        assert found.text == text


FRAGMENTS = [
    "<tools>",
    "</tools>",
    "<TOOL_CALL>",
    "</tool_call>",
    "<function=read_file>",
    "<function=rm>",
    '<function name="read_file">',
    "<function name='edit_file' arguments='",
    '<function name="run_bash" args="',
    "</function>",
    "' />",
    '"/>',
    '{"path": "a.py"}',
    '{"name": "read_file", "arguments": {"path": "a"}}',
    "&quot;",
    "```json\n",
    "```",
    "[",
    "]",
    "{",
    "}",
    '"',
    " ",
    "\n",
    "prose",
]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=30))
def test_call_syntax_fragments_in_any_order_never_raise(fragments: list[str]) -> None:
    """Pieces of every syntax in any order (unclosed, nested, interleaved): calls of
    declared tools with object arguments come out, or the text stays as it was."""
    text = "".join(fragments)
    found = extract_text_tool_calls(text, TOOLS)
    assert all(c["name"] in TOOLS and isinstance(c["args"], dict) for c in found.calls)
    if not found.calls:
        assert found.text == text
    else:
        assert len(found.text) < len(text)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(sorted(TOOLS)),
            st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=20), max_size=3),
        ),
        min_size=1,
        max_size=4,
    ),
    st.sampled_from(["bare", "fenced", "tagged", "element", "element_body", "element_tagged"]),
)
def test_every_written_call_round_trips(
    calls: list[tuple[str, dict[str, str]]], syntax: str
) -> None:
    objs = [json.dumps({"name": n, "arguments": a}) for n, a in calls]
    if syntax == "bare":
        text = "\n".join(objs)
    elif syntax == "fenced":
        text = "\n".join(f"```json\n{o}\n```" for o in objs)
    elif syntax == "tagged":
        text = "\n".join(f"<tool_call>\n{o}\n</tool_call>" for o in objs)
    else:
        # A writer escapes what would end the element early; JSON reads it back the same.
        safe = [
            json.dumps(a).replace("<", "\\u003c").replace("'", "\\u0027").replace("&", "\\u0026")
            for _n, a in calls
        ]
        if syntax == "element_body":
            text = "\n".join(
                f"<function={n}>{a}</function>" for (n, _), a in zip(calls, safe, strict=True)
            )
        else:
            elements = "\n".join(
                f"<function name=\"{n}\" arguments='{a}' />"
                for (n, _), a in zip(calls, safe, strict=True)
            )
            text = f"<tools>\n{elements}\n</tools>" if syntax == "element_tagged" else elements
    # A call written again runs once.
    distinct = [c for i, c in enumerate(calls) if c not in calls[:i]]
    assert names_args(text) == distinct


def test_a_fenced_call_whose_arguments_hold_a_fence_is_read_whole() -> None:
    # An edit of a Markdown file: the new text holds ``` itself.
    call = {"name": "edit_file", "arguments": {"path": "README.md", "new": "```bash\nls\n```"}}
    text = f"```json\n{json.dumps(call)}\n```"
    assert names_args(text) == [("edit_file", call["arguments"])]
    assert names_args('```json\n{"name": "edit_file", "arguments": {"```": ""}}\n```') == [
        ("edit_file", {"```": ""})
    ]


def test_broken_starts_and_broken_elements_before_a_call_leave_the_reply_alone() -> None:
    """Each failed decode costs the text before it: past MAX_FAILED_DECODES the reply is
    no call (and is not decoded further). A broken element before a good one is no prose
    to keep: the reply stays text, as with a broken one after it."""
    hostile = '<tool_call>{"' * 5_000
    assert extract_text_tool_calls(hostile, TOOLS).calls == []
    few = '<function=read_file>{"path": </function>\n' * 3
    call = '<function=read_file>{"path": "a.py"}</function>'
    found = extract_text_tool_calls(f"Trying.\n{call}", TOOLS)
    assert [(c["name"], c["args"]) for c in found.calls] == [("read_file", {"path": "a.py"})]
    assert extract_text_tool_calls(few + call, TOOLS).calls == []  # broken siblings: text


def test_a_call_whose_arguments_string_is_cut_stays_text() -> None:
    """Nothing completes a half-written call: neither the JSON nor its arguments string."""
    cut = json.dumps({"name": "run_bash", "arguments": '{"command": "echo HALF > half.txt'})
    for text in (cut, f"```json\n{cut}\n```", f"<tool_call>\n{cut}\n</tool_call>"):
        assert extract_text_tool_calls(text, TOOLS).calls == [], text
    whole = json.dumps({"name": "run_bash", "arguments": '{"command": "ls"}'})
    assert names_args(whole) == [("run_bash", {"command": "ls"})]
    cut_object = '```json\n{"name": "run_bash", "arguments": {"command": "echo HALF"\n```'
    assert extract_text_tool_calls(cut_object, TOOLS).calls == []


def test_a_call_written_again_in_the_same_reply_runs_once() -> None:
    """A small model wrote its five reads, then each again under a heading of its own."""
    fence = "```json\n{}\n```".format
    reads = [json.dumps({"name": "read_file", "arguments": {"path": f"{n}.py"}}) for n in "ab"]
    text = (
        "I'll read them:\n"
        + "\n".join(fence(r) for r in reads)
        + "\n### a.py\n"
        + fence(reads[0])
        + "\n### b.py\n"
        + fence(reads[1])
        + "\n"
        + fence(json.dumps({"name": "read_file", "arguments": {"path": "a.py", "offset": 9}}))
    )
    assert names_args(text) == [
        ("read_file", {"path": "a.py"}),
        ("read_file", {"path": "b.py"}),
        ("read_file", {"path": "a.py", "offset": 9}),
    ]


def test_a_result_made_up_beside_the_calls_stays_text_and_the_calls_run() -> None:
    """Qwen2.5-Coder 1.5B wrote the same read three times, each fenced, then fenced what
    it expected back; the made-up block had kept every call from running, and the model
    answered with its own guess."""
    read = {"name": "read_file", "arguments": {"path": "service.py", "offset": 0, "limit": 2000}}
    call = f"```json\n{json.dumps(read, indent=2)}\n```"
    text = (
        f"I will use read_file.\n{call}\nThen I read the output.\n{call}\n"
        f"Then I search it.\n{call}\nAnd return:\n"
        '```json\n{\n  "name": "retry_limit",\n  "value": "3"\n}\n```'
    )
    found = extract_text_tool_calls(text, TOOLS)
    assert names_args(text) == [("read_file", {"path": "service.py", "offset": 0, "limit": 2000})]
    assert found.rejected == []
    assert '"retry_limit"' in found.text and '"read_file"' not in found.text
    # Data alone is no call; a broken call beside a good one still leaves the reply text.
    data = '```json\n{"name": "retry_limit", "value": "3"}\n```'
    assert extract_text_tool_calls(data, TOOLS).calls == []
    cut = '```json\n{"name": "run_bash", "arguments": "{\\"command\\": \\"echo HA"}\n```'
    assert extract_text_tool_calls(f"{call}\n{cut}", TOOLS).calls == []


def test_a_fenced_output_made_up_after_a_fenced_call_stays_text_and_the_call_runs() -> None:
    """The same model fenced its grep call, then, in a plain fence, the line it expected
    grep to print, and answered from it; the plain fence had kept the call from running.
    Text fenced before the calls still leaves the reply alone."""
    grep = '{"name": "run_bash", "arguments": {"command": "grep -n RETRY_LIMIT service.py"}}'
    made_up = "```\n/tmp/pws/service.py:59:        RETRY_LIMIT = 30\n```"
    text = f"I'll use grep:\n\n```json\n{grep}\n```\n\nThe output:\n\n{made_up}\n\nSo it is 30."
    found = extract_text_tool_calls(text, TOOLS)
    assert names_args(text) == [("run_bash", {"command": "grep -n RETRY_LIMIT service.py"})]
    assert "RETRY_LIMIT = 30" in found.text and '"run_bash"' not in found.text
    assert extract_text_tool_calls(f"{made_up}\n```json\n{grep}\n```", TOOLS).calls == []
