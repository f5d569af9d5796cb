"""Compaction: replace old history with a handoff summary, losslessly.

The state keeps the full transcript. A compaction appends, after the old messages,
an internal ``compact_boundary`` record, the summary, fresh copies of the most
important files, and the kept recent messages (moved after the boundary with
``RemoveMessage`` + re-add). The prompt view starts at the last boundary, so the
model sees ``system, summary, files, kept`` while exports still hold everything.
"""

from __future__ import annotations

import json
import math
import os
import posixpath
import re
import stat
import time
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import re2
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import BaseTool

from agentgraph.capabilities.tools.base import ToolError
from agentgraph.capabilities.tools.bash import bash_status
from agentgraph.capabilities.tools.files import (
    edit_report_line,
    excerpt_of_read,
    fit_read_page,
    page_of_read,
    read_span,
)
from agentgraph.capabilities.tools.spec import tool_spec
from agentgraph.capabilities.tools.workspace import (
    REGULAR_OPEN_FLAGS,
    LinkCensus,
    resolve_in_workspace,
    text_lines,
)
from agentgraph.capabilities.tools.workspace_scan import ScanChanges, scanned_changes
from agentgraph.context.artifacts import with_originals
from agentgraph.context.carry_over import (
    CARRY_OVER_HEADING,
    dropped_details,
    identifiers,
    with_dropped_details,
    without_oldest_details,
)
from agentgraph.context.ledger import (
    LEDGER_KIND,
    Ledger,
    LedgerMemo,
    collect_ledger,
    ledger_message,
    ledger_path,
    read_calls,
    render_ledger,
    without_listed_files,
)
from agentgraph.context.masking_text import (
    MASKED_KEY,
    SUMMARIZED_COPY_KEY,
    mask_output,
    mask_outputs_before,
    maskable,
    note_words,
    restates,
)
from agentgraph.context.next_work import named_paths, remaining_work
from agentgraph.context.shell_reads import in_place_edits, sed_replacement
from agentgraph.context.shell_writes import removed_files, written_files
from agentgraph.context.shown_files import page_of_shown_files
from agentgraph.context.tokens import ESTIMATE_SCALE_MAX, TokenCounter, anchored_prompt_tokens
from agentgraph.context.truncation import TokenCodec, shrink_tool_messages, truncate_text
from agentgraph.context.windows import (
    PROMPT_COUNT_MARGIN_FRACTION,
    Budget,
    configured_output_limit,
    output_limit_for,
    output_room,
)
from agentgraph.providers.retry import RetryPolicy, call_with_retries
from agentgraph.runtime.cancel import INTERRUPTED_KIND
from agentgraph.runtime.deps import CompactionOutcome
from agentgraph.runtime.history import (
    AGENTGRAPH_KEY,
    INTERNAL_KINDS,
    agentgraph_kind,
    extends,
    group_messages,
)
from agentgraph.runtime.history.calls import hit_output_limit

KEEP_RECENT_BUDGET_FRACTION = 0.20
FALLBACK_KEEP_BUDGET_FRACTION = 0.30
FILES_BUDGET_FRACTION = 0.15
SUMMARY_MAX_BUDGET_FRACTION = 0.15
# Headroom: after any compaction the prompt is at most this share of the usable budget,
# whatever the window, so the next compaction is far away (a prompt left at 75% of the
# trigger compacts again a few steps later). The room under it, after the system prompt
# and tool schemas, is shared: the summary, the re-read files and the kept messages each
# get at most their share of it (and at most their fraction of the budget above).
TARGET_AFTER_BUDGET_FRACTION = 0.50
SUMMARY_ROOM_SHARE = 0.35
FILES_ROOM_SHARE = 0.30
# The kept messages' share is the smallest: what they showed is in the summary and the
# ledger, and every token kept is sent again with each request until the next
# compaction. At 0.35 of the room, a task reading one small file a call through an 8k
# window sent 455k prompt tokens in 15 compactions and, over 3 turns and a restart,
# 304k; at 0.20 (with the spill and stack changes below) 442k in 14 and 276k, every
# code recalled. At 0.10 the same tasks at 16k sent 791k where they sent 831k, and 526k
# in 3 compactions where they sent 533k in 4, every code recalled; 0.05 measured the
# same (a kept group is a whole call and its results).
KEEP_ROOM_SHARE = 0.10
# The summary keeps at least this many tokens, even when the system prompt and tools
# leave no room: without it the compaction would forget everything.
SUMMARY_MIN_TOKENS = 256
# Summaries stack: the summaries of earlier compactions are carried over verbatim (byte
# for byte, so a provider's prefix cache still serves them, and no detail is rewritten
# by a second lossy pass) while they take at most this share of the summary's room (all
# of it: a summarizer that drops details drops them again at every rewrite);
# past it they are summarized again together with the new part.
SUMMARY_STACK_SHARE = 1.0
# A stack past its share is still carried, up to this share of the summary's room,
# when rewriting it beside the new part would take a second summarizer call that the
# part alone does not: at an 8k window, batches of eight parallel reads took 17
# summarizer calls for 13 compactions, 13 for 13 carried. Carrying it at this share
# always (not only then) cost the 300-file task at 16k a compaction and 2% more
# prompt tokens.
SUMMARY_STACK_DEFER_SHARE = 2.0
# A summary longer than all the room it can take (see the hard target below) is asked
# for again, in its share, at most this many times (each is one more summarizer call);
# it is never cut blind to fit.
SUMMARY_SHORTEN_ATTEMPTS = 1
# A summary that names none of some files read in the part it summarizes is asked, at
# most this many times, for what those files held (each is one more summarizer call,
# given only those readings): a file a summary skips is a file the agent reads again,
# or whose facts it no longer has. A summarizer that leaves out half of every list
# halves the files left each time: four attempts cover the 15 files a compaction at a
# 64k window summarizes (two left 4 of 30 codes to be read again there).
SUMMARY_SUPPLEMENT_ATTEMPTS = 4
# A text names a file by its name without the extension too (``part_017`` in a code
# line ``CODE part_017: ORBIT-4402``), as a word of its own: a summary that kept the codes
# of some files and the names of others said nothing of any of them by name alone, so
# the supplement asked about every file of the part again. Shorter names are too common
# a word to count.
FILE_STEM_MIN_CHARS = 3
# A summary over its share takes the room of the re-read files and of long kept outputs,
# and then the room up to this share of the usable budget (the next compaction comes
# sooner: a long task's facts may need it, and a summarizer asked to shorten them drops
# some); only one longer than all of that is asked for again, and if still too long cut,
# with a note saying so (and the record's ``summary_cut``). At 65% the summary of 300
# small files read through an 8k window (a code and a file name each) was cut from the
# 290th file on, and a model that re-reads what it no longer sees was stopped as a
# spiral; at 72% both finish with every code, and no cell of the 16k benchmark changes.
SUMMARY_HARD_TARGET_BUDGET_FRACTION = 0.72
# Results the model has not seen yet, kept in view after the compaction they triggered,
# share the room up to this share of the usable budget (a larger share only made each
# prompt of a task reading eight files a reply larger).
UNSEEN_KEPT_BUDGET_FRACTION = 0.65
# The progress ledger's share of the usable budget: past it, its longest folders of
# files read are folded to a count (see agentgraph/context/ledger.py).
LEDGER_MAX_BUDGET_FRACTION = 0.10
# A file re-read after a compaction takes at most 1/N of the room for re-read files
# (and at least REINJECT_MIN_TOKENS): past it, a file the model wrote whole is not shown
# and any other is the page of its leading lines that fits.
REINJECT_SHARES = 5
REINJECT_MIN_TOKENS = 200
REINJECT_MAX_LINES = 1000
# The files changed last, newest first, re-read from disk after a compaction: the
# lines around each one's last edit, or the whole file when it was written whole. A
# file waiting for its next edit is among them (on a task marking each file started,
# then done once the next is started, the waiting one is the third changed last: 8 of
# 100 files were read twice at 16k when only files changed twice were re-read), and a
# few lines of each cost a model that changes each file once and leaves it little
# (whole files cost it a tenth of its prompt tokens).
REINJECT_RECENT_FILES = 3
# Lines shown above and below an edit's new text: enough to place a next edit's
# ``old_string`` without reading the file again.
REINJECT_EXCERPT_CONTEXT_LINES = 3
# What one summarizer call holds is its window less the room its reply needs (the
# summary's share of the budget, with this much headroom for a summary that runs over
# before it is asked for a shorter one) and less the count margin the reply's room is
# sized with (``output_room``). A flat 80% of the usable budget held less than a
# compaction at 90% summarizes: at a 16k window the results were cut by a few lines
# each, at 128k with a 50k reserve by 8% each.
SUMMARY_REPLY_HEADROOM = 1.25
# A summarizer reply that stops at its output limit has lost its end: in a handoff
# summary, the newest work and the data written last. Where that limit is below the
# room a compaction plans for the reply (AGENTGRAPH_MAX_OUTPUT_TOKENS, a summary model's
# own cap, the room a full call leaves in the window), the summarizer is told this share
# of it (its count of its own words is rough); a reply cut anyway, at a cap nothing
# states, is asked for once more with this share of where it stopped; a part whose reply
# is cut again is summarized in halves (each leaves its reply more room), and a single
# entry cut again is kept with a note saying so. Used as if whole, the cut replies of a
# summarizer that writes more than its share left a 16k session 59 of 100 codes (100/100
# told the limit).
SUMMARY_OUTPUT_LIMIT_ASK_SHARE = 0.75
# How many times a compaction halves a part whose summary is cut even when told its
# limit (a rewrite of a long stack at a small window needs more room than its call
# leaves: 296 of 300 codes at 8k without halving). Each half is told the limit the
# provider stopped at, so a summarizer that always runs to its limit (a local model in a
# repetition loop) costs at most two calls and two for each halving.
SUMMARY_CUT_SPLITS_MAX = 2
# The count margin of a summarizer call (see PROMPT_COUNT_MARGIN_FRACTION) when the
# summarizer is the main model, its tokenizer is known and the provider's reported
# counts agree with ours: the call has no tool schemas (whose rendering by the provider
# is what an exact count can miss) and two messages. The estimate's 10% made a part
# that filled one call spill into a second on most compactions of a long task (41
# summarizer calls for 24 compactions on 300 files at a 16k window; 31 with this).
# A provider that counts the main prompt more than we do adds what it counts over to
# this margin, up to the estimate's: a switch to 10% at 2.1% over took a second call
# for each of the first four compactions of 20 KB reads at an 8k window, where the
# provider counted 2.4-2.8% more (15 compactions in 18-19 summarizer calls; 15 in 15).
SUMMARY_EXACT_COUNT_MARGIN_FRACTION = 0.02
# Tool results reach the summarizer whole: a result is the only copy of what it showed
# that the summary can keep, and a cut keeps its head and tail, so a fact in the middle
# of a page would be gone from every later prompt (a fixed 2,000-token cap lost 24 of
# 30 codes at a 64k window, whose pages hold a 20 KB file). Only results the model has
# restated in its own words (the ones masking hides) are cut, largest first and evenly,
# down to this many tokens each (head and tail: a file's first lines survive), to keep
# the part in one call: what the model took from them is in its notes, which are sent
# whole. A part that still does not fit is summarized in pieces, each one more paid
# call (see NEXT_PIECE_PROMPT); the full outputs stay in the transcript (read_history /
# search_history).
SUMMARY_TOOL_RESULT_MIN_TOKENS = 48
# Room left in the summarizer's input for the instructions and message framing.
SUMMARY_FRAMING_TOKENS = 600
# What joining the entries of a summarizer call costs each of them, at most (the blank
# line between two; a merge at the seam can take one more).
SUMMARY_ENTRY_JOIN_TOKENS = 2
SUMMARY_ENTRY_FRAMING_TOKENS = 10
# A part that takes one summarizer call and a little more leaves its newest groups the
# model has seen (calls and their results, up to this share of the usable budget) in view
# whole for the next compaction to summarize, rather than ask a second call for them: on
# 300 small files at a 16k window three compactions each asked a second call for one
# read. Kept whole, they bring the next compaction that much sooner. At 10% an 8k
# window's budget left 768 tokens, less than one read of a 3 KB file with its call (at
# 12.5%, 55 compactions of 300 such files took 58 calls, not 78); at 20% a reply of
# eight reads at 32k waited whole, and the task took 3 compactions instead of 2. They
# wait only while that costs the prompts less than the call it saves at its fullest
# (their tokens times the model calls of the part, as many as the next cycle will
# make): at 32k three reads waited through 35 calls, 1.558M prompt tokens for 100 small
# files where a second call a compaction sends 1.479M; reads of one size never wait.
SUMMARY_SPILL_KEPT_BUDGET_FRACTION = 0.125
# The most of one summarizer call a cut output's saved whole copy may take in its
# place (cut head and tail past it): a 1 MiB log would otherwise take calls of its own.
# Half a call at 8k cut eight small files printed by one command as the history had
# (64/100 codes kept, 100 with a whole call).
ORIGINAL_MAX_CALL_FRACTION = 1.0
# A part larger than this many calls hold (an imported history far beyond the window)
# has all its results cut evenly to fit them.
SUMMARY_MAX_PIECES = 20
# The least a result the model has not seen yet keeps when a compaction keeps it in
# view cut (below this it is only summarized: a few lines say too little to act on).
UNSEEN_OUTPUT_MIN_TOKENS = 100
# When the room under the hard target cannot give them that (at an 8k window the system
# prompt and a long summary filled it: five parallel reads were summarized unseen, and
# a local summarizer made up their values), they share the room under the compaction
# point less this share of it: the next call, the one that shows them to the model,
# must not be compacted first (a provider counting a little more than we do would put
# a prompt filled to the point over it, and they would be summarized unseen again).
UNSEEN_COMPACT_POINT_MARGIN_FRACTION = 0.05
# Kept tool outputs are cut to this when the prompt after a compaction is still over
# its target (after the re-read files are dropped); a file read to a page of its
# leading lines with where to read on. Cut head and tail, the newest read lost its
# middle from every later prompt and summary (the copy is what later compactions
# summarize): 4 of 100 codes on a log's middle line at an 8k window.
KEEP_LESS_TOOL_OUTPUT_MAX_TOKENS = 500
# Readings a summary leaves out (it names none of their files, even asked about them
# again) stay in view in the room the compaction leaves under its target, up to this
# share of the usable budget (each further token kept brings the next compaction
# sooner): the newest first, each cut to the same size but not below
# LEFT_OUT_READING_MIN_TOKENS (an excerpt of a file's leading lines that names the span
# read and where all of it is). A summarizer that wrote only the task left one code of
# 30 files of 20 KB answerable at a 16k window; with them, four.
LEFT_OUT_BUDGET_FRACTION = 0.20
LEFT_OUT_READING_MIN_TOKENS = 500
# Also marks the copies of results the model had not seen when they were summarized: the
# masking unit shows each whole once, until the model has answered it, and then as its
# placeholder (the summary beside it holds it; kept whole through the cycle, one read a
# compaction at a 16k window took 25 compactions of 300 files instead of 21).
UNSEEN_COPY_KEY = "agentgraph_unseen_copy"

# A file read may show at least this many tokens (about 300 lines of code: most source
# files in one read), more than other tool outputs get at a small window: each further
# page of a file costs one more model call that resends the whole prompt. At a 16k
# window pages of a tenth of the budget (1,480 tokens) took 71 calls and 536k prompt
# tokens to find a code on the middle line of 30 files of 20 KB, where reading them
# whole took the peers 46 calls and 242k. Larger pages cost summaries: every token read
# passes through the prompt (4,000 took 10 compactions where 3,000 took 7 and 1,480
# took 4 when the code was on each file's first line).
READ_PAGE_MIN_TOKENS = 3_000


def read_page_max_tokens(budget: Budget, output_cap: int, scale: float = 1.0) -> int:
    """The most one ``read_file`` page may hold: :data:`READ_PAGE_MIN_TOKENS`, bounded by
    the room a compaction leaves under the compaction point, and never below the cap of
    other tool outputs.

    The bound keeps a page read right after a compaction whole in view until the model
    has seen it (a larger one would pass the compaction point on arrival and be cut to
    share the room with the summary).

    Args:
        budget: The main model's budget (the provider's tokens).
        output_cap: The cap of any other tool output, in our tokens.
        scale: How many of the provider's tokens one of ours is (an estimating counter's
            ratio, :func:`carried_scale`): the room is converted to our tokens.

    Returns:
        Our tokens.
    """
    room = budget.compact_at - int(budget.usable * TARGET_AFTER_BUDGET_FRACTION)
    return max(output_cap, min(READ_PAGE_MIN_TOKENS, int(room / max(scale, 1.0))))


def shown_files_max_tokens(budget: Budget, page: int, files: int, scale: float = 1.0) -> int:
    """The most one command's output that shows ``files`` files may hold: a ``page``
    (:func:`read_page_max_tokens`) for each, as that many read_file calls of one reply
    get, up to the share of the budget a compaction keeps for results the model has not
    seen (:data:`UNSEEN_KEPT_BUDGET_FRACTION`), and never less than one page.

    Cut to one page, ``cat`` of eight small files hid the middle ones from the model
    before it saw them, and a model that re-reads what it cannot see read them again
    (39 of 100 files at a 16k window) where eight read_file calls kept each whole.

    Args:
        budget: The main model's budget (the provider's tokens).
        page: One read page, in our tokens.
        files: How many files the command shows.
        scale: How many of the provider's tokens one of ours is (see
            :func:`read_page_max_tokens`).

    Returns:
        Our tokens.
    """
    share = int(budget.usable * UNSEEN_KEPT_BUDGET_FRACTION / max(scale, 1.0))
    return max(page, min(page * max(files, 1), share))


SUMMARY_PREFIX = (
    "Another language model started to solve this problem and produced a summary of its "
    "thinking process. You also have access to the state of the tools that were used by "
    "that language model. Use this to build on the work that has already been done and "
    "avoid duplicating work. Here is the summary produced by the other language model; "
    "use the information in this summary to assist with your own analysis. The messages it "
    "summarizes are kept: search_history(query) finds any detail of them and "
    "read_history(ref) shows one in full.\n\n"
)

HANDOFF_PROMPT = """\
You are performing a CONTEXT CHECKPOINT COMPACTION. Write a handoff summary for another \
LLM that will resume the task from it, with no other memory of the conversation.

Include, under these headings:
1. Task and progress: what the user asked, what has been done, key decisions and why.
2. Constraints and user preferences: everything the user asked for or ruled out.
3. Remaining work: clear next steps, open questions, the current todo list.
4. Critical data and references: exact file paths, names, identifiers, numbers, commands, \
error messages, and any fact the user stated that may be needed again (quote them exactly).

agentgraph adds an exact ledger of the files read and changed, commands run and the todo \
list after your summary: do not copy it; say what was learned, naming the file each fact \
comes from.

Be concise but lose nothing that is needed to continue. Write only the summary."""

# A part larger than one call is summarized in pieces: the first gets the handoff
# summary, each later one only what to add about its own messages (appended, not a
# rewrite of the summary so far, which a summarizer that drops details would thin at
# every piece).
NEXT_PIECE_PROMPT = (
    "This conversation is long, so it is summarized in pieces, and the part before the "
    "messages below is summarized already. Write only what to add to that summary about "
    "these messages: what was done and found (facts, file paths, identifiers, numbers, "
    "exactly) and what remains. Write nothing else."
)
NEXT_PIECE_HEADING = "Continued (the later messages of the summarized part):"
USER_ENTRY_LABEL = "[user]\n"
EARLIER_REQUEST_LABEL = "[user, earlier: the request the messages below work on]\n"
# A later piece's copy of that request takes at most this share of the piece.
PIECE_REQUEST_MAX_FRACTION = 0.25

SUPPLEMENT_PROMPT = (
    "A handoff summary of this conversation was written, but it says nothing of what "
    "these files held, which were read in it: {paths}. Their readings follow. Write only "
    "what to add to the summary about them: for each file, what it contained that the "
    "task needs (facts, identifiers, numbers, exactly). Write nothing else."
)
SUPPLEMENT_HEADING = "Also read (from the readings the summary above left out):"
# A summary that names a constant a reading defines but not its value keeps the name of
# a fact and loses the fact: a local 1.5B summarizer wrote "the constants LIMIT_A and
# LIMIT_B" for two modules it had read, and the model answered their values wrong.
VALUES_PROMPT = (
    "A handoff summary of this conversation was written, but it names these constants "
    "without their values: {names}. The readings that define them follow. Write only what "
    "to add to the summary: each constant with its value, exactly, and its file. Write "
    "nothing else."
)
# A constant as a reading shows it (read_file's line number and a tab first): an upper-case
# name set to a number or a short quoted string.
CONSTANT_RE = re2.compile(
    r"(?m)^(?:\d+\t)?[ \t]*([A-Z][A-Z0-9_]{2,})[ \t]*(?::[^=\n]{1,40})?=[ \t]*"
    r"(-?\d[\d_.]*|\"[^\"\n]{1,80}\"|'[^'\n]{1,80}')[ \t]*(?:#[^\n]*)?$"
)
WORD_RE = re2.compile(r"[A-Za-z0-9_]+")

SHORTEN_PROMPT = (
    "The handoff summary below is {tokens:,} tokens, more than its room. Rewrite it in at "
    "most {limit:,} tokens: keep every heading, every fact, file path, identifier, number "
    "and the remaining work; drop repetition, prose and lists of files read or commands run "
    "(agentgraph keeps those exactly in a progress ledger). Write only the summary."
)

OUTPUT_LIMIT_PROMPT = "Your reply stops at its output limit: write at most {limit:,} tokens."
SUMMARY_OUTPUT_CUT_NOTE = (
    "\n[agentgraph: the summarizer's reply stopped at its output limit here, also when "
    "told the limit; search_history finds what it left out]"
)

SUMMARY_CUT_NOTE = (
    "\n[agentgraph cut this summary to fit the context window: it stayed too long after "
    "being asked for a shorter one; search_history finds what it left out]"
)

STACKED_SUMMARY_PREFIX = (
    "Summary of the work since the summary above (search_history(query) finds any detail "
    "of it, read_history(ref) shows one message in full):\n\n"
)

FALLBACK_NOTE = (
    "[Compaction failed ({reason}); older messages were dropped from your view without a "
    "summary. They are kept in the session transcript: search_history(query) finds them. "
    "Re-read files you need.]"
)

# How the summarizer sees a request whose turn the user cancelled (Ctrl-C): as
# cancelled, not as remaining work.
CANCELLED_REQUEST_LABEL = "[user — cancelled by the user before any answer; not to be done]"
INTERRUPTED_REQUEST_LABEL = "[user — the user cancelled this turn while it was being answered]"

# Messages a compaction places after its summaries that are rebuilt at every compaction
# (files re-read from disk, the progress ledger): never summarized, never kept raw.
CONTEXT_KINDS = ("reinjected_file", LEDGER_KIND)
# Everything a compaction writes at the head of the view.
COMPACTION_KINDS = ("summary", *CONTEXT_KINDS)

# Text agentgraph writes around summaries, never the summarizer: not a detail a rewrite
# of them can drop.
SUMMARY_BOILERPLATE = (
    SUMMARY_PREFIX,
    STACKED_SUMMARY_PREFIX,
    NEXT_PIECE_HEADING,
    SUPPLEMENT_HEADING,
    CARRY_OVER_HEADING,
    SUMMARY_CUT_NOTE.strip(),
)

REINJECTED_FILE_TEMPLATE = (
    "[File re-read from disk after compaction: {path} — lines 1-{shown} of {total}]\n{body}"
)
REINJECTED_EXCERPT_TEMPLATE = (
    "[Lines around the last edit of {path}, re-read from disk after compaction — lines "
    "{first}-{last} of {total}; read_file shows the rest]\n{body}"
)


@dataclass(frozen=True)
class ChangedFile:
    """A file the conversation wrote or edited.

    Attributes:
        path: Its path as the model wrote it.
        last_index: Index of the last message with a call reading or changing it.
        last_edit: The new text of its last change when that was an edit ("" for an
            edit that only deleted); None when it was written whole.
        edit_line: The line edit_file's report put that new text at, if it said.
        appended: The last change appended ``last_edit`` to the file (it is its last
            place there, not its first).
        span: The lines its last change (a command's, the workspace scan saw) changed,
            first and last, when known.
        written: Its last change wrote it whole with the text in the model's own call
            (write_file, a here-document).
    """

    path: str
    last_index: int
    last_edit: str | None
    edit_line: int | None = None
    appended: bool = False
    span: tuple[int, int] | None = None
    written: bool = False


def marker(kind: str, **extra: Any) -> dict[str, Any]:
    """``additional_kwargs`` carrying an agentgraph kind."""
    return {AGENTGRAPH_KEY: {"kind": kind, **extra}}


# Marker field of a summary: the provider/estimate ratio the compaction saw, so the
# prompt after it (whose replies' usage was dropped) is not measured unscaled.
PROVIDER_SCALE_KEY = "provider_scale"


def carried_scale(view: Sequence[BaseMessage]) -> float:
    """The provider/estimate ratio recorded on the summary heading ``view`` (else 1.0).

    Summaries lead the view after a compaction (re-read files follow them), so only
    its head is read. A value out of range (an imported session) counts as none.
    """
    scale = 1.0
    for msg in view:
        kind = agentgraph_kind(msg)
        if kind == "summary":
            value = (msg.additional_kwargs.get(AGENTGRAPH_KEY) or {}).get(PROVIDER_SCALE_KEY)
            scale = 1.0
            if isinstance(value, int | float) and 1.0 <= value <= ESTIMATE_SCALE_MAX:
                scale = float(value)
        elif kind not in CONTEXT_KINDS:
            break
    return scale


def _scaled(tokens: int, scale: float) -> int:
    return math.ceil(tokens * scale) if scale != 1.0 else tokens


def _scale_field(scale: float) -> dict[str, float]:
    return {PROVIDER_SCALE_KEY: round(scale, 4)} if scale != 1.0 else {}


def _last_boundary(messages: Sequence[BaseMessage], stop: int = 0) -> int:
    """Index of the last compaction boundary at or after ``stop``, else -1."""
    key = AGENTGRAPH_KEY
    for i in range(len(messages) - 1, stop - 1, -1):
        # Inline first test: every model call scans the view since the boundary, a
        # thousand messages or more with a large window, and almost none is marked.
        marked = messages[i].additional_kwargs.get(key) is not None
        if marked and agentgraph_kind(messages[i]) == "compact_boundary":
            return i
    return -1


def since_last_boundary(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The messages after the last compaction boundary (all when there is none).

    System messages before the boundary are kept: the live prompt replaces them anyway.
    """
    return list(messages[_last_boundary(messages) + 1 :])


def only_unseen_results_since_boundary(messages: Sequence[BaseMessage]) -> bool:
    """Whether a compaction now could summarize nothing the model has answered.

    True when the history ends with results of its newest call the model has not yet
    answered, and everything else since the last compaction boundary is context (system
    and user messages) or copies a summarizer already had (:data:`SUMMARIZED_COPY_KEY`):
    the only new work a summary would hold is those results, unseen.

    Args:
        messages: The full history.

    Returns:
        Whether only unanswered results of the newest call are new since the boundary.
    """
    groups = group_messages(since_last_boundary(messages))
    if not groups:
        return False
    call, *results = groups[-1]
    if not (isinstance(call, AIMessage) and call.tool_calls and results):
        return False
    return all(
        isinstance(m, SystemMessage | HumanMessage) or m.additional_kwargs.get(SUMMARIZED_COPY_KEY)
        for group in groups[:-1]
        for m in group
    )


class BoundaryTracker:
    """:func:`since_last_boundary` for a history that grows between calls.

    Remembers the last view and where it started. When the next history holds the same
    message objects there (and the boundary before them, if any), only the messages
    after them are scanned for a newer boundary; the objects are compared by identity,
    which costs a fraction of the scan's per-message test (56 against 98 µs for 2,000
    messages). Anything else is scanned whole. The memory is replaced whole, never
    mutated (subagents call from other threads; their calls interleaving with the
    main thread's cost a full scan each, never a wrong view).
    """

    def __init__(self) -> None:
        self._last: tuple[int, tuple[BaseMessage, ...]] | None = None

    def since_last_boundary(self, history: Sequence[BaseMessage]) -> list[BaseMessage]:
        """The messages of ``history`` after its last compaction boundary.

        Args:
            history: The whole history.

        Returns:
            The same list :func:`since_last_boundary` returns.
        """
        last = self._last
        start = -1
        if last is not None:
            begin, view = last
            end = begin + len(view)
            boundary_before = begin == 0 or _last_boundary(history[begin - 1 : begin]) == 0
            if boundary_before and extends(history, view, begin):
                # No boundary among the remembered messages (they followed the last
                # one): only the new ones can hold a newer boundary.
                newer = _last_boundary(history, end)
                start = newer + 1 if newer >= 0 else begin
        if start < 0:
            start = _last_boundary(history) + 1
        result = list(history[start:])
        self._last = (start, tuple(result))
        return result


@dataclass
class _ChangeLog:
    """What :func:`changed_files` knows of each file as it goes through a history."""

    last: dict[str, int] = field(default_factory=dict)
    edits: dict[str, str | None] = field(default_factory=dict)
    edit_calls: dict[str, str] = field(default_factory=dict)  # the id of an edit call
    appended: set[str] = field(default_factory=set)  # whose last change appended lines
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)  # a scan's span
    written: set[str] = field(default_factory=set)  # written whole from a call's text

    def change(
        self,
        path: str,
        at: int,
        text: str | None,
        *,
        call_id: str | None = None,
        appended: bool = False,
        span: tuple[int, int] | None = None,
        written: bool = False,
    ) -> None:
        """``path`` changed at message ``at``: its new text (None: written whole), the
        edit call that said where, whether it was appended, the lines a scan saw change,
        whether the call held the whole text it wrote."""
        self.edits[path] = text
        self.last[path] = at
        if call_id is None:
            self.edit_calls.pop(path, None)
        else:
            self.edit_calls[path] = call_id
        if appended:
            self.appended.add(path)
        else:
            self.appended.discard(path)
        if span is None:
            self.spans.pop(path, None)
        else:
            self.spans[path] = span
        if written:
            self.written.add(path)
        else:
            self.written.discard(path)

    def touch(self, path: str, at: int) -> None:
        """``path`` was read at message ``at``."""
        self.appended.discard(path)
        self.last[path] = at

    def drop(self, path: str) -> None:
        """``path`` is gone: nothing to show again."""
        for known in (self.edits, self.edit_calls, self.last, self.spans):
            known.pop(path, None)
        self.written.discard(path)

    def stale(self, path: str) -> None:
        """``path`` changed where nothing says how: what was known of its last change no
        longer places anything, so it would be shown whole."""
        if path in self.edits:
            self.change(path, self.last[path], None)


def changed_files(
    messages: Sequence[BaseMessage], workspace: str | None = None
) -> list[ChangedFile]:
    """Files the conversation wrote or edited, the one touched last (read or changed)
    first, each named as the ledger names it (normalized; relative to ``workspace``,
    its absolute path, when under it): ``./a.py``, ``/ws/a.py`` and a workspace scan's
    ``a.py`` are one file."""
    key = ledger_path(workspace)
    log = _ChangeLog()
    # A command changed files only if it ran and exited 0 (a refused or failed one did not).
    exited_0 = {
        m.tool_call_id: m.text
        for m in messages
        if isinstance(m, ToolMessage)
        and (status := bash_status(m.text)) is not None
        and status.exit_code == 0
    }
    scanned = {
        m.tool_call_id: changes
        for m in messages
        if isinstance(m, ToolMessage) and (changes := scanned_changes(m)) is not None
    }
    for i, msg in enumerate(messages):
        if not isinstance(msg, AIMessage):
            continue
        told: set[str] = set()  # the files the step's command lines say they changed
        scans: list[ScanChanges] = []
        for call in msg.tool_calls:
            spec = tool_spec(call["name"])
            args = call.get("args") or {}
            call_id = str(call.get("id"))
            command = args.get("command") if spec.ledger == "command" else None
            if isinstance(command, str) and call_id in exited_0:
                # ``sed -i 's/a/b/' F``: F was edited, around the text it wrote when the
                # replacement is literal (as an edit_file call's new text); else it is
                # re-read as a file written whole is.
                in_place = [key(p) for p in in_place_edits(command)]
                written = sed_replacement(command) if in_place else None
                for edited in in_place:
                    log.change(edited, i, written)
                    told.add(edited)
                # ``cat > F <<'EOF'`` wrote F whole: re-read as write_file's file is;
                # ``>>`` appended its lines: re-read around them.
                for write in written_files(command, exited_0[call_id]):
                    name = key(write.path)
                    log.change(
                        name,
                        i,
                        write.text if write.append else None,
                        appended=write.append,
                        written=not write.append and write.text is not None,
                    )
                    told.add(name)
                # ``rm F``: gone, nothing to show again.
                for removed in removed_files(command).paths:
                    log.drop(key(removed))
            if (scan := scanned.get(call_id)) is not None:
                scans.append(scan)
            path: Any = args.get(spec.path_arg) if spec.path_arg is not None else None
            if spec.files_role is None or not isinstance(path, str) or not path:
                continue
            if spec.files_role == "writes" and spec.ledger == "edit":
                new = args.get("new_string")
                log.change(key(path), i, new if isinstance(new, str) else "", call_id=call_id)
            elif spec.files_role == "writes":
                log.change(key(path), i, None, written=True)
            else:
                log.touch(key(path), i)
        for scan in scans:
            # What the workspace showed the step's commands change (a script, ``perl
            # -pi``, ``mv``): shown again by the lines it changed when the scan spans
            # them, else whole, unless a command line told more (a sed replacement,
            # appended lines) or the step changed more files than are shown again (a
            # build's outputs: listed in the ledger, and what was known of how an
            # earlier change placed any of them no longer holds).
            for gone in scan.deleted:
                log.drop(gone)
            changed = [n for n in (*scan.modified, *scan.created) if n not in told]
            spanned = {p: (first, end) for p, first, end in scan.spans}
            few = len(scan.modified) + len(scan.created) + scan.more <= REINJECT_RECENT_FILES
            for name in changed:
                if few:
                    log.change(name, i, None, span=spanned.get(name))
                else:
                    log.stale(name)
    wanted = set(log.edit_calls.values())
    lines = {
        m.tool_call_id: edit_report_line(m.text)
        for m in messages
        if isinstance(m, ToolMessage) and m.tool_call_id in wanted
    }
    files = [
        ChangedFile(
            path,
            log.last[path],
            new,
            lines.get(log.edit_calls.get(path, "")),
            path in log.appended,
            log.spans.get(path),
            path in log.written,
        )
        for path, new in log.edits.items()
    ]
    return sorted(files, key=lambda f: -f.last_index)


def _fresh_lines(workspace: Path, rel: str) -> list[str] | None:
    """A workspace file's lines as they are on disk; None when unreadable, binary or
    outside the workspace."""
    try:
        # As the tools resolved it when the model wrote it (its spelling of the path).
        path = resolve_in_workspace(workspace, rel)
        # Not blocking on a FIFO a command left at the path; a regular file only.
        with os.fdopen(os.open(path, REGULAR_OPEN_FLAGS), "rb") as fh:
            status = os.fstat(fh.fileno())
            if not stat.S_ISREG(status.st_mode):
                return None
            # Opened as read_file opens it: a hard link out of the workspace is refused.
            LinkCensus(workspace.resolve()).require_inside(status, rel)
            head = fh.read(8192)
            if b"\x00" in head:
                return None
            fh.seek(0)
            raw = fh.read()
    except (OSError, ToolError):
        return None
    return text_lines(raw)  # numbered as read_file numbers them


def _numbered(lines: Sequence[str], first: int) -> str:
    """``lines`` numbered as read_file numbers them (the number, a tab), the first as
    line ``first``: no ``cat -n`` padding, which costs two tokens a line more."""
    return "\n".join(f"{first + n}\t{line}" for n, line in enumerate(lines))


def _fitted(
    lines: Sequence[str], first: int, total: int, max_tokens: int, counter: TokenCounter
) -> tuple[str, int]:
    """``lines`` (numbered from ``first``, of a file of ``total`` lines) within
    ``max_tokens``, and the last line shown.

    Past it, the page of their leading lines that fits, with read_file's note of where to
    read on: a head-and-tail cut left its header naming lines it no longer showed, and a
    model that rewrites a file whole from what it sees would write the cut into it. Only
    a first line too long for the room alone is cut as any output is.
    """
    body = _numbered(lines, first)
    last = first + len(lines) - 1
    if counter.fits(body, max_tokens):
        return body, last
    page = fit_read_page(body, max_tokens, counter, span=(last, total))
    covered = read_span(page) if page is not None else None
    if page is None or covered is None:
        return truncate_text(body, max_tokens, count=counter.count_text).text, last
    return page, covered[0]


def _read_fresh(workspace: Path, rel: str, max_tokens: int, counter: TokenCounter) -> str | None:
    """Read up to REINJECT_MAX_LINES of a workspace file; None when unreadable or outside."""
    lines = _fresh_lines(workspace, rel)
    if lines is None:
        return None
    header = REINJECTED_FILE_TEMPLATE.format(path=rel, shown=len(lines), total=len(lines), body="")
    room = max(max_tokens - counter.count_text(header), 1)
    body, last = _fitted(lines[:REINJECT_MAX_LINES], 1, len(lines), room, counter)
    return REINJECTED_FILE_TEMPLATE.format(path=rel, shown=last, total=len(lines), body=body)


def _read_whole(workspace: Path, rel: str, max_tokens: int, counter: TokenCounter) -> str | None:
    """A workspace file whole, numbered as read_file numbers lines, when it fits in
    ``max_tokens``; None when it does not, or is unreadable or outside."""
    lines = _fresh_lines(workspace, rel)
    if lines is None or len(lines) > REINJECT_MAX_LINES:
        return None
    text = REINJECTED_FILE_TEMPLATE.format(
        path=rel, shown=len(lines), total=len(lines), body=_numbered(lines, 1)
    )
    return text if counter.fits(text, max_tokens) else None


def _reinjected(path: str, text: str) -> HumanMessage:
    """The message showing the file ``path`` again after a compaction."""
    return HumanMessage(
        content=text,
        id=f"reinject-{uuid.uuid4().hex}",
        additional_kwargs=marker("reinjected_file", path=path),
    )


def _read_around_edit(
    workspace: Path, edit: ChangedFile, max_tokens: int, counter: TokenCounter
) -> str | None:
    """The lines of the workspace file ``edit`` names around its last edit's new text,
    ``REINJECT_EXCERPT_CONTEXT_LINES`` either side: where the edit's report put it when
    the file holds it there, else the first place it is. None when the edit only deleted
    (no text to place), the file is unreadable or outside the workspace, or it no longer
    holds that text."""
    new = (edit.last_edit or "").strip("\n")
    lines = _fresh_lines(workspace, edit.path) if new.strip() else None
    if lines is None:
        return None
    text = "\n".join(lines)
    at = -1
    if edit.edit_line is not None and 1 <= edit.edit_line <= len(lines):
        # The same text may be earlier in the file too (a common line): the report's
        # line is the place this edit changed.
        line_start = sum(len(line) + 1 for line in lines[: edit.edit_line - 1])
        found = text.find(new, line_start)
        if 0 <= found <= line_start + len(lines[edit.edit_line - 1]):
            at = found
    if at < 0:
        at = text.rfind(new) if edit.appended else text.find(new)
    if at < 0:
        return None  # changed since: the ledger says it was edited, read_file shows how
    start = text.count("\n", 0, at)
    end = start + new.count("\n")
    first = max(start - REINJECT_EXCERPT_CONTEXT_LINES, 0)
    last = min(end + REINJECT_EXCERPT_CONTEXT_LINES, len(lines) - 1)
    return _excerpt(edit.path, lines, first, last, max_tokens, counter)


def _excerpt(
    path: str,
    lines: Sequence[str],
    first: int,
    last: int,
    max_tokens: int,
    counter: TokenCounter,
) -> str:
    """Lines ``first``-``last`` (0-based, inclusive) of the file ``path`` re-read, headed
    by the span shown (:func:`_fitted` keeps their leading lines past ``max_tokens``)."""
    header = REINJECTED_EXCERPT_TEMPLATE.format(
        path=path, first=first + 1, last=last + 1, total=len(lines), body=""
    )
    room = max(max_tokens - counter.count_text(header), 1)
    body, shown = _fitted(lines[first : last + 1], first + 1, len(lines), room, counter)
    return REINJECTED_EXCERPT_TEMPLATE.format(
        path=path, first=first + 1, last=shown, total=len(lines), body=body
    )


def _read_changed_span(
    workspace: Path, edit: ChangedFile, max_tokens: int, counter: TokenCounter
) -> str | None:
    """The lines of the workspace file ``edit`` names that its last change spanned,
    ``REINJECT_EXCERPT_CONTEXT_LINES`` either side; None when it has no span, is
    unreadable or outside the workspace, or is now shorter than the span's start."""
    lines = _fresh_lines(workspace, edit.path) if edit.span is not None else None
    if lines is None or edit.span is None or edit.span[0] > len(lines):
        return None
    first = max(edit.span[0] - 1 - REINJECT_EXCERPT_CONTEXT_LINES, 0)
    last = min(edit.span[1] - 1 + REINJECT_EXCERPT_CONTEXT_LINES, len(lines) - 1)
    return _excerpt(edit.path, lines, first, last, max_tokens, counter)


def _changed_text(
    workdir: Path, touched: ChangedFile, room: int, counter: TokenCounter
) -> str | None:
    """What of the changed file ``touched`` is shown again in ``room`` tokens: the lines
    around its last edit, the span a command changed, its leading lines, or the whole
    file when the model wrote it whole."""
    if touched.written:
        # Its text was the model's own call: whole, or not at all (the ledger names it
        # written). The page of its leading lines shown before was no use to a model
        # rewriting it whole, which read it again all the same (24 of 100 files at 16k),
        # and every request after the compaction carried it (6% of the prompt tokens of
        # that task at 16k, 5% without the lag).
        return _read_whole(workdir, touched.path, room, counter)
    if touched.span is not None:
        # A command's change in place (``perl -pi``): the lines it changed.
        return _read_changed_span(workdir, touched, room, counter) or _read_fresh(
            workdir, touched.path, room, counter
        )
    if touched.last_edit is None:
        return _read_fresh(workdir, touched.path, room, counter)
    return _read_around_edit(workdir, touched, room, counter)


def _instructions(focus: str | None) -> str:
    """The summarizer's system prompt, with the user's focus (``/compact FOCUS``)."""
    return HANDOFF_PROMPT + (f"\n\nFocus especially on: {focus}" if focus else "")


def _reply_room(reply_tokens: int, scale: float) -> int:
    """The tokens a summarizer call leaves for its reply: the summary's share
    (``reply_tokens``, ours) in the provider's tokens, with its headroom."""
    return int(reply_tokens * scale * SUMMARY_REPLY_HEADROOM)


def _with_output_limit(prompt: list[BaseMessage], limit: int) -> list[BaseMessage]:
    """``prompt`` with its request telling the reply's limit of ``limit`` tokens."""
    *head, request = prompt
    return [
        *head,
        HumanMessage(content=f"{request.text}\n\n{OUTPUT_LIMIT_PROMPT.format(limit=limit)}"),
    ]


def _written_summary(msg: BaseMessage) -> bool:
    """A summary a summarizer wrote (not a failed compaction's note)."""
    return agentgraph_kind(msg) == "summary" and not (
        msg.additional_kwargs.get(AGENTGRAPH_KEY) or {}
    ).get("fallback")


def _names_file(text: str, path: str) -> bool:
    """Whether ``text`` names ``path``: as written, by its file name, or by its file name
    without the extension as a word of its own (:func:`_names_stem`)."""
    return path in text or posixpath.basename(path) in text or _names_stem(text, path)


def own_identifiers(readings: Mapping[str, str]) -> dict[str, set[str]]:
    """Per path, the identifiers (:func:`~agentgraph.context.carry_over.identifiers`)
    its readings hold that no other path's readings in ``readings`` (path -> their text)
    hold, less the words of the path itself: what a summary that kept anything of the
    file would name (a code, a constant, a name with digits or capitals)."""
    return reading_identifiers([((path,), text) for path, text in readings.items()])[0]


def reading_identifiers(
    readings: Sequence[tuple[Sequence[str], str]],
) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """``(own, shared)`` identifiers per path, from readings given as (the paths each
    is a reading of, its text).

    A word belongs to a path when only readings of that path hold it. ``own``: those
    words of the readings of that path alone (:func:`own_identifiers`). ``shared``
    (only paths that have some): those of the readings it shares with other files (one
    ``cat A B`` printed both), whose lines the output does not tell apart, so a summary
    says of the file only on a line naming it with one of them (:func:`says_of`). The
    names of a reading's files are left out of its words.
    """
    found = [identifiers(text) for _, text in readings]
    holders: dict[str, set[int]] = {}
    for i, words in enumerate(found):
        for word in words:
            holders.setdefault(word, set()).add(i)
    of_path: dict[str, set[int]] = {}
    for i, (paths, _) in enumerate(readings):
        for path in paths:
            of_path.setdefault(path, set()).add(i)
    own: dict[str, set[str]] = {}
    shared: dict[str, set[str]] = {}
    for path, mine in of_path.items():
        alone: set[str] = set()
        with_others: set[str] = set()
        for i in mine:
            paths = readings[i][0]
            words = {w for w in found[i] if holders[w] <= mine and not any(w in p for p in paths)}
            (alone if len(paths) == 1 else with_others).update(words)
        own[path] = alone
        if with_others:
            shared[path] = with_others
    return own, shared


def _names_stem(text: str, path: str) -> bool:
    """Whether ``text`` holds the file name of ``path`` without its extension as a word
    of its own (``part_017`` in ``CODE part_017: ORBIT-4402``)."""
    stem, extension = posixpath.splitext(posixpath.basename(path))
    if not extension or len(stem) < FILE_STEM_MIN_CHARS:
        return False
    # ``\w`` is what str.isalnum() accepts and the underscore.
    return re.search(rf"(?<!\w){re.escape(stem)}(?!\w)", text) is not None


def says_of(
    text_ids: Collection[str],
    text: str,
    path: str,
    own: Collection[str],
    shared: Collection[str] = (),
) -> bool:
    """Whether a text (its :func:`~agentgraph.context.carry_over.identifiers`
    ``text_ids``) says anything of the file ``path``: it names it and, where its readings
    hold identifiers of their own (``own``, :func:`reading_identifiers`), one of them;
    where they hold none but share a reading with other files (``shared``), a line of it
    names the file with one of those."""
    if not _names_file(text, path):
        return False
    if own or not shared:
        return not own or any(word in text_ids for word in own)
    return any(
        _names_file(line, path) and not identifiers(line).isdisjoint(shared)
        for line in text.splitlines()
    )


def unvalued_constants(summary: str, readings: Sequence[str]) -> list[list[tuple[str, str]]]:
    """For each of ``readings``, the constants it defines (:data:`CONSTANT_RE`) that
    ``summary`` names without their value, as ``(name, value)``; a quoted value counts
    without its quotes."""
    # re2 builds its results with the argument's own type: a message's ``.text`` is a
    # str subclass it cannot build.
    words = set(WORD_RE.findall(str(summary)))
    return [
        [
            (name, value)
            for name, value in CONSTANT_RE.findall(str(reading))
            if name in words and value.strip("\"'") not in summary
        ]
        for reading in readings
    ]


def _is_request(msg: BaseMessage) -> bool:
    """A request the user typed (not a summary, re-read file or other marked message)."""
    return isinstance(msg, HumanMessage) and agentgraph_kind(msg) is None


def _answered(messages: Sequence[BaseMessage]) -> bool:
    """Whether the history ends with a finished reply: no request or tool call pending.

    The last message the model sees is an assistant message without tool calls (a
    final answer, or one the user interrupted).
    """
    for msg in reversed(messages):
        if agentgraph_kind(msg) in INTERNAL_KINDS:
            continue
        return isinstance(msg, AIMessage) and not msg.tool_calls
    return False


def _nothing_new(older: Sequence[BaseMessage], cancelled: Mapping[int, str]) -> bool:
    """Whether ``older`` holds nothing new to summarize.

    Only earlier summaries, re-read files and requests cancelled before any answer:
    summarizing those alone would only rewrite the summary (an empty ``older`` too).
    """
    return all(
        agentgraph_kind(m) in COMPACTION_KINDS or cancelled.get(id(m)) == CANCELLED_REQUEST_LABEL
        for m in older
    )


def _in_history_order(
    history: Sequence[BaseMessage], groups: Sequence[Sequence[BaseMessage]]
) -> list[BaseMessage]:
    """The messages of ``groups`` in the order their first messages (by id) hold in
    ``history`` (groups not found there last, in the given order)."""
    position = {m.id: i for i, m in enumerate(history) if m.id}
    ordered = sorted(groups, key=lambda g: position.get(g[0].id or "", len(history)))
    return [m for g in ordered for m in g]


def _summarized_copy(
    message: BaseMessage, *, masked: bool = False, unseen: bool = False
) -> BaseMessage:
    """A copy of ``message`` marked as one a compaction's summarizer had whole
    (:data:`SUMMARIZED_COPY_KEY`); ``masked`` also marks it a stand-in for the original
    (:data:`MASKED_KEY`), as a kept excerpt is; ``unseen`` marks a result the model had
    not seen (:data:`UNSEEN_COPY_KEY`)."""
    kwargs = {**message.additional_kwargs, SUMMARIZED_COPY_KEY: True}
    if masked:
        kwargs[MASKED_KEY] = True
    if unseen and isinstance(message, ToolMessage):
        kwargs[UNSEEN_COPY_KEY] = True
    return message.model_copy(update={"additional_kwargs": kwargs})


def _whole_readings(
    messages: Sequence[BaseMessage], call_ids: Collection[str]
) -> dict[str, ToolMessage]:
    """The first whole result of each of ``call_ids`` in ``messages``: a later one may be
    a masked stand-in or an excerpt a compaction kept."""
    whole: dict[str, ToolMessage] = {}
    for m in messages:
        if (
            isinstance(m, ToolMessage)
            and m.tool_call_id in call_ids
            and not m.additional_kwargs.get(MASKED_KEY)
        ):
            whole.setdefault(m.tool_call_id, m)
    return whole


def fit_cap(sizes: Sequence[int], room: int) -> int:
    """The largest cap ``c`` with ``sum(min(s, c) for s in sizes) <= room`` (water-filling).

    Small items stay whole; the largest are cut to the same size. 0 when even
    nothing fits.
    """
    if room <= 0 or not sizes:
        return 0 if sizes else room
    ordered = sorted(sizes)
    used = 0
    for i, size in enumerate(ordered):
        rest = len(ordered) - i
        if used + size * rest > room:
            return (room - used) // rest
        used += size
    return ordered[-1]


def render_transcript(
    messages: Sequence[BaseMessage],
    count: Callable[[str], int],
    *,
    tool_result_caps: Mapping[int, int] | None = None,
    cancelled: Mapping[int, str] | None = None,
    codec: TokenCodec | None = None,
) -> list[str]:
    """One text entry per message, for the summarizer.

    ``tool_result_caps`` maps the ``id()`` of a tool result to the tokens it is cut to
    (the others are whole); ``cancelled`` maps the ``id()`` of a request whose turn
    the user cancelled to the label it gets instead of ``[user]``; ``codec`` is the
    tokenizer ``count`` counts with, if exact (results are then cut at token offsets).
    """
    labels = cancelled or {}
    caps = tool_result_caps or {}
    out: list[str] = []
    for msg in messages:
        kind = agentgraph_kind(msg)
        text: str = msg.text
        if isinstance(msg, ToolMessage):
            cap = caps.get(id(msg))
            if cap is not None:
                text = truncate_text(text, cap, count=count, codec=codec).text
            out.append(f"[tool result {msg.name or ''}]\n{text}")
        elif isinstance(msg, AIMessage):
            calls = "".join(
                f"\n[tool call] {c['name']}({json.dumps(c['args'], ensure_ascii=False)[:2000]})"
                for c in msg.tool_calls
            )
            if text.strip() or calls:  # an empty reply says nothing, and may take a call
                out.append(f"[assistant]\n{text}{calls}")
        elif kind == "summary":
            out.append(f"[summary of earlier work]\n{text}")
        elif kind in CONTEXT_KINDS:
            continue  # re-read and recomputed after this compaction anyway
        elif isinstance(msg, HumanMessage):
            label = labels.get(id(msg))
            out.append(f"{label}\n{text}" if label else f"{USER_ENTRY_LABEL}{text}")
    return out


@dataclass(frozen=True)
class _Plan:
    """A compaction's plan (:meth:`Compactor._plan`): the history since the last
    boundary and how it splits, measured, and the room each part of the result gets
    (the budget's figures in our tokens, divided by ``scale``)."""

    recent: list[BaseMessage]
    fixed: int
    before: int
    shown_before: int
    scale: float
    margin: float
    usable: int
    target: int
    room: int
    keep_tokens: int
    files_tokens: int
    summary_max: int
    older: list[BaseMessage]
    kept: list[BaseMessage]
    summary_input: list[BaseMessage]
    cancelled: dict[int, str]
    carried_heads: list[BaseMessage]
    split: Callable[
        ..., tuple[list[BaseMessage], list[BaseMessage], list[BaseMessage], dict[int, str]]
    ]


class Compactor:
    """LLM handoff-summary compaction with a safe fallback.

    Args:
        summarizer: Chat model that writes summaries (tagged ``nostream``).
        counter: Token counter of the main model.
        budget: The main model's budget.
        summarizer_budget: The budget of a summary model with a window of its own;
            None when the summarizer shares the main model's (and follows it when an
            endpoint names a smaller window).
        retry: Retry policy for the summary call.
        sleep: Backoff sleep.
        keep_recent_messages: At most this many messages kept (``MAX_MESSAGE_HISTORY``).
        redact: Replaces secrets in the progress ledger (the agent's redactor).
    """

    def __init__(
        self,
        summarizer: BaseChatModel,
        counter: TokenCounter,
        budget: Budget,
        *,
        summarizer_budget: Budget | None = None,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        keep_recent_messages: int | None = None,
        redact: Callable[[str], str] | None = None,
    ) -> None:
        self.summarizer = summarizer.with_config(tags=["nostream"])
        self.redact = redact
        self.ledger_memo = LedgerMemo()
        self.counter = counter
        self.budget = budget
        self.summarizer_budget = summarizer_budget
        self.retry = retry or RetryPolicy(max_retries=2)
        self.sleep = sleep
        self.keep_recent_messages = keep_recent_messages
        # Why the last call returned None ("nothing to compact: …" in the REPL).
        self.last_skipped: str | None = None

    # -- summary --------------------------------------------------------------------

    @property
    def summary_budget(self) -> Budget:
        """The summarizer's budget: its own, else the main model's."""
        return self.summarizer_budget or self.budget

    def _count_margin(self, ratio: float) -> float:
        """The share of a summarizer prompt's count left aside for the provider's count.

        When the summarizer is the main model and its prompts are counted exactly:
        :data:`SUMMARY_EXACT_COUNT_MARGIN_FRACTION` plus the share by which the
        provider's own count of the main prompt exceeds ours (``ratio`` to ours; 1.0
        before it reported one), at most the estimate's
        :data:`PROMPT_COUNT_MARGIN_FRACTION`; else that estimate's margin. A summary
        model of its own may not share the main model's tokenizer, and an endpoint may
        serve another model under a name whose tokenizer we know.
        """
        if self.summarizer_budget is None and self.counter.source != "estimate":
            over = max(ratio - 1.0, 0.0)
            return min(SUMMARY_EXACT_COUNT_MARGIN_FRACTION + over, PROMPT_COUNT_MARGIN_FRACTION)
        return PROMPT_COUNT_MARGIN_FRACTION

    def _piece_budget(
        self, reply_tokens: int, scale: float, margin: float = PROMPT_COUNT_MARGIN_FRACTION
    ) -> int:
        """Tokens (ours) one summarizer call may carry, instructions included.

        The summarizer's window less the room its reply needs (``reply_tokens``, the
        summary's share, with :data:`SUMMARY_REPLY_HEADROOM`) and less the count
        margin that room is sized with (:func:`output_room`).

        Args:
            reply_tokens: The summary's share, in our tokens.
            scale: How much more the provider counts than we do (1.0 when exact).
            margin: The count margin (:meth:`_count_margin`).
        """
        window = self.summary_budget.window
        reply = _reply_room(reply_tokens, scale)
        room = (window - reply) / (scale * (1 + margin))
        return max(int(room), SUMMARY_FRAMING_TOKENS * 2)

    def _summarize(
        self,
        older: Sequence[BaseMessage],
        focus: str | None,
        cancelled: Mapping[int, str] | None = None,
        *,
        reply_tokens: int,
        scale: float = 1.0,
        margin: float = PROMPT_COUNT_MARGIN_FRACTION,
    ) -> str:
        instructions = _instructions(focus)
        pieces = self._pieces(
            older, instructions, cancelled, reply_tokens=reply_tokens, scale=scale, margin=margin
        )
        parts: list[str] = []
        queue = list(pieces)
        n = splits = 0  # n: the piece asked for (0: the handoff summary; then additions)
        cap: int | None = None  # where the provider stopped a reply of this compaction
        while queue:
            piece = queue.pop(0)
            if not piece:
                n += 1
                continue
            body = "\n\n".join(piece)
            ask = f"{NEXT_PIECE_PROMPT}\n\n" if n else ""
            prompt: list[BaseMessage] = [
                SystemMessage(content=instructions),
                HumanMessage(content=f"{ask}<conversation>\n{body}\n</conversation>"),
            ]
            text, cut, stopped = self._ask_whole(
                prompt, margin, room=_reply_room(reply_tokens, scale), cap=cap
            )
            if stopped is not None:
                cap = stopped if cap is None else min(cap, stopped)
            if cut and len(piece) > 1 and splits < SUMMARY_CUT_SPLITS_MAX:
                # Cut even when told its limit: the summary needs more room than the
                # call leaves (a rewrite of a long stack). Half the input each leaves
                # the reply more.
                half = len(piece) // 2
                queue[:0] = [piece[:half], piece[half:]]
                splits += 1
                continue
            if not text:
                raise ValueError("the summarizer returned an empty summary")
            text += SUMMARY_OUTPUT_CUT_NOTE if cut else ""
            parts.append(f"{NEXT_PIECE_HEADING}\n{text}" if n else text)
            n += 1
        if not parts:
            raise ValueError("nothing to summarize")
        return "\n\n".join(parts)

    def _pieces(
        self,
        older: Sequence[BaseMessage],
        instructions: str,
        cancelled: Mapping[int, str] | None = None,
        *,
        reply_tokens: int,
        scale: float = 1.0,
        margin: float = PROMPT_COUNT_MARGIN_FRACTION,
        reserve: int = 0,
    ) -> list[list[str]]:
        """``older`` rendered as transcript entries, packed into summarizer calls.

        Args:
            older: The messages to summarize.
            instructions: The calls' system prompt (counted with their wrapper).
            cancelled: Labels of requests the user cancelled, by ``id()``.
            reply_tokens: The summary's share, in our tokens.
            scale: How much more the provider counts than we do.
            margin: The count margin (:meth:`_count_margin`).
            reserve: Tokens (ours) each call leaves unused: what packing ``older``
                with that much more would take.

        Returns:
            The entries of each call, in order.
        """
        count = self.counter.count_text
        # The call's own words, counted: a flat reserve of SUMMARY_FRAMING_TOKENS was
        # twice what they take, and a part a few hundred tokens over what was left took
        # a second call (31 summarizer calls for 24 compactions of 300 small files at a
        # 16k window; 27 when counted).
        framing = self.counter.count_messages(
            [
                SystemMessage(content=instructions),
                HumanMessage(content=f"{NEXT_PIECE_PROMPT}\n\n<conversation>\n\n</conversation>"),
            ]
        )
        piece_budget = self._piece_budget(reply_tokens, scale, margin) - framing - reserve
        caps = self._tool_result_caps(older, piece_budget)
        entries = render_transcript(
            older, count, tool_result_caps=caps, cancelled=cancelled, codec=self.counter.codec
        )
        pieces: list[list[str]] = [[]]
        used = 0
        request: str | None = None  # the latest user request so far, for later pieces
        for original in entries:
            entry, size = original, count(original) + SUMMARY_ENTRY_JOIN_TOKENS
            if size > piece_budget:  # one entry larger than a whole call: head and tail
                # Cut to the room its piece has left while that is most of a call, so
                # it goes with the call that made it rather than leaving that call
                # alone in a piece (one more request, showing a call with no result).
                left = piece_budget - used
                fit = left if pieces[-1] and left * 2 >= piece_budget else piece_budget
                entry = truncate_text(
                    entry, fit - SUMMARY_ENTRY_JOIN_TOKENS, count=count, codec=self.counter.codec
                ).text
                size = count(entry) + SUMMARY_ENTRY_JOIN_TOKENS
            if pieces[-1] and used + size > piece_budget:
                pieces.append([])
                used = 0
                # A later piece starts with the request its messages work on (without it
                # a summarizer reads tool traffic with no idea what mattered), when the
                # entry still fits beside it: the entry is the content, never cut for it.
                if request is not None and count(request) + size <= piece_budget:
                    pieces[-1].append(request)
                    used = count(request) + SUMMARY_ENTRY_JOIN_TOKENS
            if original.startswith(USER_ENTRY_LABEL):
                text = original.removeprefix(USER_ENTRY_LABEL)
                request = truncate_text(
                    f"{EARLIER_REQUEST_LABEL}{text}",
                    max(int(piece_budget * PIECE_REQUEST_MAX_FRACTION), 1),
                    count=count,
                ).text
            pieces[-1].append(entry)
            used += size
        return pieces

    def _spilled_groups(
        self,
        recent: Sequence[BaseMessage],
        summary_input: Sequence[BaseMessage],
        instructions: str,
        cancelled: Mapping[int, str] | None,
        *,
        limit: int,
        reply_tokens: int,
        scale: float,
        margin: float,
    ) -> set[int]:
        """The messages (by ``id()``) to leave for the next summary, so that this one
        takes one summarizer call.

        Only when ``summary_input`` takes more than one call and the one call holds it
        without its newest groups, each a call the model has answered and its results
        (no request, no earlier summary, no results it has yet to see), together at
        most ``limit`` tokens, and while keeping them costs no more than the second
        call would: kept whole, they are sent with each model call until the next
        compaction (about as many calls as the part holds), where the second call sends
        at most one call's tokens, once. Empty otherwise.
        """
        calls = self._call_counter(
            instructions, cancelled, reply_tokens=reply_tokens, scale=scale, margin=margin
        )
        if calls(summary_input) <= 1:
            return set()
        model_calls = sum(isinstance(m, AIMessage) for m in summary_input)
        call_tokens = self._piece_budget(reply_tokens, scale, margin)
        # The newest call and its results: the model has yet to see them.
        newest = max((i for i, m in enumerate(recent) if isinstance(m, AIMessage)), default=-1)
        unanswered = {id(m) for m in recent[newest:]} if newest >= 0 else set()
        groups = group_messages(list(summary_input))
        spilled: set[int] = set()
        tokens = 0
        for n in range(len(groups) - 1, 0, -1):
            call, *results = groups[n]
            if any(id(m) in unanswered for m in groups[n]):
                # The newest call's results (the tail of the part) are summarized now
                # (they also stay in view): the groups before them may still wait.
                continue
            if not (
                isinstance(call, AIMessage)
                and call.tool_calls
                and results
                and all(isinstance(m, ToolMessage) for m in results)
                and not any(m.additional_kwargs.get(SUMMARIZED_COPY_KEY) for m in groups[n])
            ):
                break
            tokens += self.counter.count_messages(groups[n])
            if tokens > limit or tokens * model_calls > call_tokens:
                break
            spilled |= {id(m) for m in groups[n]}
            rest = [m for m in summary_input if id(m) not in spilled]
            if calls(rest) <= 1:
                return spilled
        return set()

    def _supplement(
        self,
        summary: str,
        summarized: Sequence[BaseMessage],
        focus: str | None,
        *,
        reply_tokens: int,
        scale: float = 1.0,
        history: Sequence[BaseMessage] = (),
        margin: float = PROMPT_COUNT_MARGIN_FRACTION,
        workspace: str | None = None,
        artifacts: str | None = None,
    ) -> str:
        """``summary`` with what it left out of the files read in ``summarized``.

        A file the summary says nothing of (:func:`says_of`: it does not name it, by
        path or file name, or names it with none of the identifiers only its readings
        hold) is asked about again, with only its readings, and the answer is appended:
        the progress ledger keeps that the file was read, but not what it held. When
        ``summarized`` holds earlier summaries (summarized again: their stack outgrew
        its room), the files of ``history`` they named count too, asked about with their
        readings from ``history`` (the transcript keeps every one) unless what they said
        of them was carried over (:meth:`_carry_over`, called first). Readings are the originals in
        ``history`` where it has them (a kept copy may be cut, masked or an excerpt), and
        the saved whole copy of one the history holds cut (``artifacts``).
        Each call takes the readings that fit it whole, in order. Constants the summary
        names without their values are asked about once (:meth:`_values`). Failures
        keep ``summary`` as it is.
        """
        reads = read_calls(summarized, memo=self.ledger_memo, workspace=workspace)
        # The transcript (it holds every reading of ``summarized``): the copy a
        # compaction kept may be cut, masked or an excerpt, and its original before
        # that boundary is the whole reading.
        sources: Sequence[BaseMessage] = history or summarized
        earlier = [m for m in summarized if agentgraph_kind(m) == "summary"]
        if earlier:
            fresh = {path for paths in reads.values() for path in paths}
            before: dict[str, tuple[str, ...]] = {}
            for call_id, paths in read_calls(
                history, memo=self.ledger_memo, workspace=workspace
            ).items():
                # Only the files an earlier summary named: the reading's others are
                # not this check's.
                named = tuple(
                    p
                    for p in paths
                    if p not in fresh and any(_names_file(m.text, p) for m in earlier)
                )
                if named:
                    before[call_id] = named
            reads = {**before, **reads}
        # Found once: the sources may be the whole transcript, and the loop below asks
        # up to SUMMARY_MAX_PIECES times.
        whole = _whole_readings(sources, reads.keys())
        # A reading cut for the history is asked about whole (agentgraph/context/
        # artifacts.py).
        limit = int(self._piece_budget(reply_tokens, scale, margin) * ORIGINAL_MAX_CALL_FRACTION)
        originals = self._with_originals(list(whole.values()), artifacts, limit)
        whole = {
            call_id: m
            for call_id, m in zip(whole, originals, strict=True)
            if isinstance(m, ToolMessage)
        }
        own, shared = reading_identifiers(
            [(reads[call_id], m.text) for call_id, m in whole.items()]
        )
        count = self.counter.count_text
        piece_budget = self._piece_budget(reply_tokens, scale, margin) - SUMMARY_FRAMING_TOKENS
        attempts, attempt = SUMMARY_SUPPLEMENT_ATTEMPTS, 0
        while attempt < attempts:
            attempt += 1
            words = identifiers(summary)
            missing = sorted(
                {
                    p
                    for paths in reads.values()
                    for p in paths
                    if not says_of(words, summary, p, own.get(p, ()), shared.get(p, ()))
                }
            )
            if not missing:
                break
            gap = set(missing)
            readings = [m for call_id, m in whole.items() if gap.intersection(reads[call_id])]
            ask = SUPPLEMENT_PROMPT.format(paths=", ".join(missing))
            room = piece_budget - count(ask)
            if attempt == 1:
                # Readings that take several calls get the attempts of one for each.
                calls = -(-sum(count(m.text) for m in readings) // max(room, 1))
                attempts = min(SUMMARY_SUPPLEMENT_ATTEMPTS * calls, SUMMARY_MAX_PIECES)
            added = self._ask_about(
                ask,
                readings,
                reads,
                focus,
                room=room,
                reply_tokens=reply_tokens,
                scale=scale,
                margin=margin,
            )
            if added is None:  # the summary without them is still a summary
                break
            added_words = identifiers(added)
            if not any(
                says_of(added_words, added, p, own.get(p, ()), shared.get(p, ())) for p in missing
            ):
                break  # it says nothing about them: more of it would only take room
            summary = f"{summary}\n\n{SUPPLEMENT_HEADING}\n{added}"
        return self._values(summary, whole, reads, focus, piece_budget, reply_tokens, scale, margin)

    def _values(
        self,
        summary: str,
        whole: Mapping[str, ToolMessage],
        reads: Mapping[str, tuple[str, ...]],
        focus: str | None,
        piece_budget: int,
        reply_tokens: int,
        scale: float,
        margin: float,
    ) -> str:
        """``summary`` with the values of the constants it names without them (see
        :data:`VALUES_PROMPT`), asked once with the readings that define them and
        appended when the answer holds one of those values. Failures keep ``summary``."""
        readings: list[ToolMessage] = []
        named: list[str] = []
        values: set[str] = set()
        found_in = unvalued_constants(summary, [m.text for m in whole.values()])
        for (call_id, m), found in zip(whole.items(), found_in, strict=True):
            if found:
                readings.append(m)
                named += [f"{name} ({', '.join(reads[call_id])})" for name, _ in found]
                values |= {value.strip("\"'") for _, value in found}
        if not readings:
            return summary
        ask = VALUES_PROMPT.format(names=", ".join(dict.fromkeys(named)))
        added = self._ask_about(
            ask,
            readings,
            reads,
            focus,
            room=piece_budget - self.counter.count_text(ask),
            reply_tokens=reply_tokens,
            scale=scale,
            margin=margin,
        )
        if added is None or not any(value in added for value in values):
            return summary  # it failed or gave none of them: it would only take room
        return f"{summary}\n\n{SUPPLEMENT_HEADING}\n{added}"

    def _ask_about(
        self,
        ask: str,
        readings: Sequence[ToolMessage],
        reads: Mapping[str, tuple[str, ...]],
        focus: str | None,
        *,
        room: int,
        reply_tokens: int,
        scale: float,
        margin: float,
    ) -> str | None:
        """The summarizer's answer to ``ask`` about the first ``readings`` that fit
        ``room`` (:meth:`_readings_for_one_call`), with a note where it stopped at its
        output limit; None if the call failed."""
        body = "\n".join(self._readings_for_one_call(readings, reads, room))
        prompt = [
            SystemMessage(content=_instructions(focus)),
            HumanMessage(content=f"{ask}\n\n<readings>\n{body}\n</readings>"),
        ]
        try:
            added, cut, _ = self._ask_whole(prompt, margin, room=_reply_room(reply_tokens, scale))
        except Exception:
            return None
        return added + (SUMMARY_OUTPUT_CUT_NOTE if cut else "")

    def _carry_over(
        self,
        summary: str,
        summarized: Sequence[BaseMessage],
        progress: Ledger | None,
        max_tokens: int,
    ) -> str:
        """``summary`` with what it dropped of the earlier summaries it rewrote.

        Only when ``summarized`` holds earlier summaries (their stack outgrew its room
        and they were summarized again): their items with an identifier the rewrite
        lacks are appended as written (see agentgraph/context/carry_over.py), while the
        summary stays within ``max_tokens``. Identifiers naming a file the ledger
        (``progress``, None when it could not be built: every identifier counts) keeps
        are left to it. Called before the file check of :meth:`_supplement`, so a file
        an earlier summary described is described again by its own words, not asked
        about again.
        """
        earlier = [m.text for m in summarized if _written_summary(m)]
        if not earlier:
            return summary
        details = dropped_details(
            earlier,
            summary,
            known_paths=progress.paths() if progress is not None else (),
            boilerplate=SUMMARY_BOILERPLATE,
        )
        return with_dropped_details(
            summary, details, max_tokens=max_tokens, count=self.counter.count_text
        )

    def _readings_for_one_call(
        self, readings: Sequence[ToolMessage], reads: Mapping[str, tuple[str, ...]], room: int
    ) -> list[str]:
        """The first ``readings`` that fit ``room`` whole, labelled with their paths.

        The rest wait for the next supplement call: a reading cut to share one call
        loses its middle, where a fact may be. One reading larger than the whole call
        is cut to it (head and tail).
        """
        count = self.counter.count_text
        entries: list[str] = []
        used = 0
        for m in readings:
            entry = f"[{m.name or 'read_file'} {', '.join(reads[m.tool_call_id])}]\n{m.text}\n"
            size = count(entry) + SUMMARY_ENTRY_FRAMING_TOKENS
            if entries and used + size > room:
                break
            if size > room:
                entry = truncate_text(
                    entry, max(room, 1), count=count, codec=self.counter.codec
                ).text
                size = room
            entries.append(entry)
            used += size
        return entries

    def _ask(
        self, prompt: list[BaseMessage], margin: float = PROMPT_COUNT_MARGIN_FRACTION
    ) -> AIMessage:
        """The summarizer's reply to ``prompt``, retried as the model call is.

        A summarizer with no output limit of its own (a local server) gets one: it
        would write until its context is full. The limit is no more than the room
        ``prompt`` leaves in the window (less ``margin`` of its count), which a strict
        server requires.
        """
        summarizer: Any = self.summarizer
        budget = self.summary_budget
        limit = output_limit_for(summarizer, budget)
        if limit is not None:
            prompt_tokens = self.counter.count_messages(prompt)
            limit = min(limit, output_room(budget, prompt_tokens, margin=margin))
            summarizer = summarizer.bind(max_tokens=limit)
        reply: AIMessage = call_with_retries(
            partial(summarizer.invoke, prompt), self.retry, sleep=self.sleep
        )
        return reply

    def _output_limit(self, prompt: list[BaseMessage], margin: float) -> int:
        """The most tokens the summarizer's reply to ``prompt`` can take: the room it
        leaves in the window, and the ``max_tokens`` the summarizer is set to send or
        is given (see :meth:`_ask`)."""
        budget = self.summary_budget
        room = output_room(budget, self.counter.count_messages(prompt), margin=margin)
        caps = (output_limit_for(self.summarizer, budget), configured_output_limit(self.summarizer))
        return min([room, *(cap for cap in caps if cap is not None)])

    def _ask_whole(
        self, prompt: list[BaseMessage], margin: float, *, room: int, cap: int | None = None
    ) -> tuple[str, bool, int | None]:
        """The summarizer's reply text to ``prompt``, whether it is still cut at the
        reply's output limit, and where the provider stopped a reply (None if none was
        stopped; see :data:`SUMMARY_OUTPUT_LIMIT_ASK_SHARE`).

        Args:
            prompt: The summarizer prompt; its last message is the request.
            margin: The count margin (:meth:`_count_margin`).
            room: The reply tokens the compaction planned for (:func:`_reply_room`).
            cap: Where the provider stopped an earlier reply of this compaction: the
                limit is told at once, no more than that.
        """
        limit = self._output_limit(prompt, margin)
        if cap is not None:
            limit = min(limit, cap)
        told = int(limit * SUMMARY_OUTPUT_LIMIT_ASK_SHARE)
        tell = cap is not None or limit < room
        reply = self._ask(_with_output_limit(prompt, told) if tell else prompt, margin)
        if not hit_output_limit(reply):
            return reply.text.strip(), False, None
        usage: Mapping[str, Any] = reply.usage_metadata or {}
        stopped = usage.get("output_tokens") or self.counter.count_text(reply.text) or limit
        retry = int(min(stopped, limit) * SUMMARY_OUTPUT_LIMIT_ASK_SHARE)
        if tell and retry >= told:
            return reply.text.strip(), True, stopped  # told that much already
        reply = self._ask(_with_output_limit(prompt, retry), margin)
        return reply.text.strip(), hit_output_limit(reply), stopped

    def _progress(
        self, messages: Sequence[BaseMessage], workspace: str | None = None
    ) -> Ledger | None:
        """The progress ledger of the whole history, its paths relative to ``workspace``;
        None if it cannot be built (a malformed call in an imported history), which
        never stops the compaction."""
        try:
            return collect_ledger(messages, memo=self.ledger_memo, workspace=workspace)
        except Exception:
            return None

    def _ledger(self, progress: Ledger | None, max_tokens: int) -> str:
        """``progress`` rendered in ``max_tokens``, secrets redacted; "" if it fails.

        Commands are in it as the model wrote them (a password on a command line); it
        is sent with every later prompt, so it goes through the redactor tool outputs
        go through. A ledger that cannot be built never stops the compaction.
        """
        if progress is None:
            return ""
        try:
            text = render_ledger(progress, max_tokens=max_tokens, count=self.counter.count_text)
        except Exception:  # a malformed entry: no ledger this time
            return ""
        return self.redact(text) if self.redact is not None else text

    def _shorten(
        self,
        summary: str,
        room: int,
        focus: str | None,
        margin: float = PROMPT_COUNT_MARGIN_FRACTION,
    ) -> str:
        """``summary``, asked for again in at most ``room`` tokens while it is longer.

        A summary cut to fit loses its middle, and the next summary is written from the
        cut one: the progress since the previous compaction is forgotten and redone.
        The summarizer is told the limit instead; the shortest answer is kept.
        """
        count = self.counter.count_text
        size = count(summary)
        instructions = _instructions(focus)
        for _ in range(SUMMARY_SHORTEN_ATTEMPTS):
            if size <= room:
                break
            ask = SHORTEN_PROMPT.format(tokens=size, limit=room)
            prompt = [
                SystemMessage(content=instructions),
                HumanMessage(content=f"{ask}\n\n<summary>\n{summary}\n</summary>"),
            ]
            try:
                reply = self._ask(prompt, margin)
            except Exception:  # the long summary is still a summary: keep it
                break
            if hit_output_limit(reply):  # its end is missing: the whole one is kept
                break
            shorter = reply.text.strip()
            if shorter and count(shorter) < size:
                summary, size = shorter, count(shorter)
        return summary

    def _tool_result_caps(self, older: Sequence[BaseMessage], room: int) -> dict[int, int]:
        """Cuts of ``older``'s tool results (by ``id()``) so it fits one call of ``room``.

        Only results the model restated in its next reply are cut (evenly, down to
        :data:`SUMMARY_TOOL_RESULT_MIN_TOKENS`): the others are the only copy of what
        they showed and go whole, in more calls when they must. A part beyond
        :data:`SUMMARY_MAX_PIECES` calls has every result cut evenly to fit them.
        """
        count = self.counter.count_text
        rest = render_transcript([m for m in older if not isinstance(m, ToolMessage)], count)
        results: list[tuple[ToolMessage, int, bool]] = []
        pending: list[tuple[ToolMessage, int]] = []
        for msg in older:
            if isinstance(msg, ToolMessage):
                pending.append((msg, count(msg.text)))
            elif isinstance(msg, AIMessage) and pending:
                # As masking decides what to hide: what it hides, the notes hold.
                words = note_words(msg.text)
                results += [
                    (m, n, bool(words) and maskable(m, n) and restates(words, m.text))
                    for m, n in pending
                ]
                pending = []
        results += [(m, n, False) for m, n in pending]
        # Each tool entry also carries its "[tool result NAME]" line.
        fixed = SUMMARY_ENTRY_FRAMING_TOKENS * len(results) + sum(count(e) + 2 for e in rest)
        whole = sum(n for _, n, restated in results if not restated)
        restated_sizes = [n for _, n, restated in results if restated]
        caps: dict[int, int] = {}
        if restated_sizes and fixed + whole + sum(restated_sizes) > room:
            cap = max(fit_cap(restated_sizes, room - fixed - whole), SUMMARY_TOOL_RESULT_MIN_TOKENS)
            caps = {id(m): cap for m, n, restated in results if restated and n > cap}
        sizes = [min(n, caps.get(id(m), n)) for m, n, _ in results]
        if fixed + sum(sizes) > room * SUMMARY_MAX_PIECES:
            cap = max(
                fit_cap(sizes, room * SUMMARY_MAX_PIECES - fixed), SUMMARY_TOOL_RESULT_MIN_TOKENS
            )
            caps = {id(m): cap for (m, _, _), n in zip(results, sizes, strict=True) if n > cap}
        return caps

    # -- cutting --------------------------------------------------------------------

    def _split(
        self,
        recent: Sequence[BaseMessage],
        keep_tokens: int,
        keep_messages: int | None,
        *,
        between_turns: bool = False,
    ) -> tuple[list[BaseMessage], list[BaseMessage], list[BaseMessage], dict[int, str]]:
        """Split at group boundaries into the part to summarize and the part to keep.

        Returns ``(older, kept, summary_input, cancelled)``: ``summary_input`` is
        ``older`` with the pending request in its place, so the summarizer knows what
        the work was for; ``cancelled`` maps the ``id()`` of each request whose turn
        the user cancelled to its label for the summarizer (see
        :func:`render_transcript`); one cancelled before any answer is never kept.

        Kept: the newest groups within ``keep_tokens`` (and ``keep_messages``), never
        starting in the middle of an exchange (the kept part before the pending request
        starts at a user request, so no answer is kept without its question), plus
        the pending request, always, even when the tool traffic after it is
        summarized. The latest request is pending while its turn runs (auto and guard
        compactions, in the middle of a turn); once it is answered, or between turns
        (``between_turns``: ``/compact``, ``sessions compact``) when its turn was
        cancelled, nothing is pending and only whole exchanges are kept.
        """
        groups = group_messages(list(recent))
        requests = [i for i, g in enumerate(groups) if _is_request(g[0])]
        request = requests[-1] if requests else None
        if request is not None and (
            _answered(recent) or (between_turns and request == len(groups) - 1)
        ):
            request = None  # nothing pending: keep whole exchanges only
        keep: set[int] = set() if request is None else {request}
        used = 0 if request is None else sum(self.counter.count_message(m) for m in groups[request])
        kept_count = 0 if request is None else len(groups[request])
        first = len(groups)
        for i in range(len(groups) - 1, -1, -1):
            if i == request:
                first = i
                continue
            group = groups[i]
            if agentgraph_kind(group[0]) in COMPACTION_KINDS:
                break  # a previous summary is always re-summarized, never kept raw
            size = sum(self.counter.count_message(m) for m in group)
            if used + size > keep_tokens or (
                keep_messages is not None and kept_count + len(group) > keep_messages
            ):
                break
            keep.add(i)
            first = i
            used += size
            kept_count += len(group)
        if request is None or first < request:
            # The kept run reaches before the pending request (or nothing is pending):
            # it starts at a user request, never with an answer whose question is
            # summarized.
            while first < len(groups) and not _is_request(groups[first][0]):
                keep.discard(first)
                first += 1
        cancelled: dict[int, str] = {}
        for i in requests:
            if i == request:
                continue
            nxt = groups[i + 1][0] if i + 1 < len(groups) else None
            if (nxt is None and between_turns) or (nxt is not None and _is_request(nxt)):
                # No answer: the turn was cancelled before the model said anything.
                # Summarized as cancelled, never kept as a request still to answer.
                cancelled[id(groups[i][0])] = CANCELLED_REQUEST_LABEL
                keep.discard(i)
            elif nxt is not None and agentgraph_kind(nxt) == INTERRUPTED_KIND:
                cancelled[id(groups[i][0])] = INTERRUPTED_REQUEST_LABEL
        older = [m for i, g in enumerate(groups) if i not in keep for m in g]
        kept = [m for i, g in enumerate(groups) if i in keep for m in g]
        # Kept outputs the model already answered are masked after the compaction
        # (_mask_seen_outputs): the summary distils them first, or what they held would
        # leave the prompt without reaching any summary.
        newest = max((i for i, g in enumerate(groups) if isinstance(g[0], AIMessage)), default=-1)
        summary_input = [
            m
            for i, g in enumerate(groups)
            if (
                i not in keep
                or i == request
                or (i < newest and any(isinstance(x, ToolMessage) for x in g))
            )
            # Copies an earlier summarizer had the originals of (readings kept as
            # excerpts, results the model had not seen): summarized again, they would
            # only add their file names to this part.
            and not g[0].additional_kwargs.get(SUMMARIZED_COPY_KEY)
            for m in g
        ]
        return older, kept, summary_input, cancelled

    def _files(
        self,
        messages: Sequence[BaseMessage],
        workspace: str | None,
        total: int,
        summary: str = "",
        known: Sequence[str] = (),
    ) -> list[tuple[str, HumanMessage]]:
        """The files shown again after ``summary``, in ``total`` tokens: first those its
        remaining work names (of the files changed since the last compaction and of
        ``known``, the paths the session changed or read, newest first), then the files
        changed last.

        Which file the model comes back to is task knowledge: a file written once may
        be done or waiting for its second change, and only the summary says which. A
        file it names as work left may take all the room left (a file written whole or
        only read is shown whole: its page would be read again all the same by a model
        that rewrites it whole); the others take a share each.
        """
        if not workspace or total <= 0:
            return []
        each = max(total // REINJECT_SHARES, REINJECT_MIN_TOKENS)
        out: list[tuple[str, HumanMessage]] = []
        workdir = Path(workspace)
        changed = {c.path: c for c in changed_files(messages, workspace)}
        candidates = dict.fromkeys([*changed, *known])
        named = named_paths(remaining_work(summary), candidates)
        # Files only read are in the ledger (with their ranges) and the summary, one
        # read_file away: re-reading them took the room the compaction freed (on a long
        # read-only task 12 summaries instead of 10, and 10% more prompt tokens, in
        # bench_context_v3). Of the files changed, those being worked on: the few
        # touched last, each as the lines around its last edit (what a next edit of it
        # replaces), whole when it was written whole. Older changes are done, in the
        # ledger as changed: five files re-read whole stayed in view through every
        # cycle of the editing benchmark (1.84M prompt tokens at 16k where deepagents
        # sent 1.72M), and re-reading the files changed more than once re-read
        # finished files on a task that changes each file twice, while the one
        # waiting for its second change was read again by the model.
        recent = list(changed)[:REINJECT_RECENT_FILES]
        left = total
        for path in dict.fromkeys([*named, *recent]):
            # The files changed last take a share each (at least REINJECT_MIN_TOKENS,
            # which may pass ``total`` at a small window: the loop that fits the view
            # drops the last shown); after named files, what those left.
            room = left if path in named else min(each, left) if named else each
            if room < REINJECT_MIN_TOKENS:
                continue
            touched = changed.get(path)
            if touched is None:
                text = _read_whole(workdir, path, room, self.counter)
            else:
                text = _changed_text(workdir, touched, room, self.counter)
            if text is not None:
                out.append((path, _reinjected(path, text)))
                left -= self.counter.count_text(text)
        return out

    def _mask_seen_outputs(
        self, kept: Sequence[BaseMessage], whole: Collection[int] = frozenset()
    ) -> list[BaseMessage]:
        """Kept messages with the outputs the model already answered masked (copies).

        The newest turn's outputs, which the model has not answered yet, stay whole;
        the older kept calls stay visible with one-line pointers, as the masking unit
        showed them, so the kept part costs little of the room after compaction.
        Messages in ``whole`` (by ``id()``: groups left for the next summary) stay whole.
        """
        newest = max((i for i, m in enumerate(kept) if isinstance(m, AIMessage)), default=0)
        masked = mask_outputs_before(kept, newest, self.counter.count_message)
        return [m if id(m) in whole else copy for m, copy in zip(kept, masked, strict=True)]

    def _unseen_kept(
        self,
        recent: Sequence[BaseMessage],
        kept: Sequence[BaseMessage],
        after: int,
        compact_point: int,
        limit: int,
        *,
        whole: bool = False,
        artifacts: str | None = None,
        workspace: str | None = None,
    ) -> list[BaseMessage]:
        """Copies of the newest call and its unanswered results, fitted under ``limit``.

        ``after`` is the prompt the compaction leaves without them. Empty when the
        history does not end with results the model has yet to answer, when the kept
        part already holds them, when they fit beside ``after`` under ``compact_point``
        and ``whole`` is False (they are in the summary only), or when neither the room
        under ``limit`` nor that under the compaction point (less
        :data:`UNSEEN_COMPACT_POINT_MARGIN_FRACTION`) can give each of them
        :data:`UNSEEN_OUTPUT_MIN_TOKENS` (the summary only, too). With ``whole``,
        results that fit beside ``after`` under ``compact_point`` stay whole; else
        small results stay whole and the largest are cut to the same size (a file read
        to its leading lines, with where to read on; ``cat`` of several files to each
        file's, from the copy in ``artifacts`` of an output cut before and the files in
        ``workspace``). All are copies, so the originals stay whole before the boundary.
        """
        groups = group_messages(list(recent))
        if not groups:
            return []
        call, *results = groups[-1]
        if not (isinstance(call, AIMessage) and call.tool_calls and results):
            return []
        if any(m is call or (m.id is not None and m.id == call.id) for m in kept):
            return []
        group = self.counter.count_messages([call, *results])
        if after + group <= compact_point:
            return [m.model_copy() for m in [call, *results]] if whole else []
        count = self.counter.count_text
        sizes = [count(m.text) for m in results]
        least = min(UNSEEN_OUTPUT_MIN_TOKENS, max(sizes))
        below_point = int(compact_point * (1 - UNSEEN_COMPACT_POINT_MARGIN_FRACTION))
        for room in (limit, below_point):
            cap = fit_cap(sizes, room - after - (group - sum(sizes)))
            if cap >= least:
                break
        else:
            return []
        commands = {
            str(c.get("id") or ""): (c.get("args") or {}).get("command") for c in call.tool_calls
        }

        def page(message: ToolMessage, max_tokens: int) -> str | None:
            """A file read as its leading lines; ``cat`` of several files, each file's."""
            command = commands.get(message.tool_call_id)
            if isinstance(command, str):
                shown = page_of_shown_files(
                    message,
                    command,
                    max_tokens,
                    self.counter,
                    artifacts=artifacts,
                    workspace=workspace,
                )
                if shown is not None:
                    return shown
            return page_of_read(message, max_tokens, counter=self.counter)

        fitted, _ = shrink_tool_messages(
            [call, *results], cap, count=count, codec=self.counter.codec, page=page
        )
        return [m.model_copy() for m in fitted]

    def _left_out_kept(
        self,
        named: str,
        older: Sequence[BaseMessage],
        history: Sequence[BaseMessage],
        kept: Sequence[BaseMessage],
        room: int,
        workspace: str | None = None,
    ) -> list[list[BaseMessage]]:
        """Copies of the newest read calls of ``older`` whose readings ``named`` (the
        summaries shown after the compaction) leaves out, fitted in ``room``.

        Each group is a call and its results: a reading of a file ``named`` never names
        is the original output (from ``history``: a kept copy may be masked), cut to
        the size all of them share (a file read to an excerpt of its leading lines,
        :func:`~agentgraph.capabilities.tools.files.excerpt_of_read`); the group's other
        results are masked to pointers. Groups are taken newest first while each
        reading keeps :data:`LEFT_OUT_READING_MIN_TOKENS` (or its whole size, if
        smaller). Empty when the summary names every file read, or nothing fits.
        """
        # Results an earlier compaction kept because the model had not seen them went
        # to that compaction's summary (and its check of what it left out), not to
        # this one's: checked again here against summaries whose file lists the ledger
        # took, each was kept again at every later compaction.
        skip = {m.tool_call_id for m in kept if isinstance(m, ToolMessage)}
        skip |= {
            m.tool_call_id
            for m in older
            if isinstance(m, ToolMessage) and m.additional_kwargs.get(UNSEEN_COPY_KEY)
        }
        missing = {
            call_id
            for call_id, paths in read_calls(
                older, memo=self.ledger_memo, workspace=workspace
            ).items()
            if call_id not in skip and not all(_names_file(named, path) for path in paths)
        }
        if not missing or room <= 0:
            return []
        originals = _whole_readings(history, missing)
        count = self.counter.count_text
        count_message = self.counter.count_message
        fitted_groups: list[list[BaseMessage]] = []
        sizes: list[int] = []  # of the readings taken so far, each counted once
        frame = 0
        cap = 0
        for group in reversed(group_messages(list(older))):
            call = group[0]
            if not (isinstance(call, AIMessage) and call.tool_calls):
                continue
            calls = {str(c.get("id")): dict(c) for c in call.tool_calls}
            results: list[BaseMessage] = []
            own_sizes: list[int] = []
            own_frame = count_message(call)
            for m in group[1:]:
                if isinstance(m, ToolMessage) and m.tool_call_id in originals:
                    original = originals[m.tool_call_id]
                    results.append(original)
                    own_sizes.append(count(original.text))
                    # The message around the text: what a cut leaves of it too.
                    own_frame += count_message(original.model_copy(update={"content": ""}))
                else:
                    if isinstance(m, ToolMessage):
                        m = mask_output(m, calls.get(m.tool_call_id), count_message)
                    results.append(m)
                    own_frame += count_message(m)
            if not own_sizes:
                continue
            trial = fit_cap([*sizes, *own_sizes], room - frame - own_frame)
            if trial < min(LEFT_OUT_READING_MIN_TOKENS, max([*sizes, *own_sizes])):
                break
            cap, frame, sizes = trial, frame + own_frame, [*sizes, *own_sizes]
            fitted_groups.insert(0, [call, *results])
        out: list[list[BaseMessage]] = []
        for group in fitted_groups:
            fitted, _ = shrink_tool_messages(
                group,
                cap,
                count=count,
                codec=self.counter.codec,
                page=partial(excerpt_of_read, counter=self.counter),
            )
            # Marked: a later compaction does not summarize them again, and keeps the
            # original before this boundary again (as a stand-in, never the excerpt).
            out.append([_summarized_copy(m, masked=isinstance(m, ToolMessage)) for m in fitted])
        return out

    def _with_originals(
        self, messages: Sequence[BaseMessage], artifacts: str | None, limit: int
    ) -> list[BaseMessage]:
        """``messages`` with each cut output's saved whole copy in place of the cut
        (:func:`~agentgraph.context.artifacts.with_originals`), each at most ``limit``
        tokens (ours; head and tail past it)."""
        count = self.counter.count_text

        def fitted(text: str) -> str:
            if count(text) <= limit:
                return text
            return truncate_text(text, limit, count=count, codec=self.counter.codec).text

        return with_originals(messages, artifacts, shorten=fitted)

    def _view_tokens(self, messages: Sequence[BaseMessage], fixed: int) -> int:
        return fixed + self.counter.count_messages(
            [m for m in messages if agentgraph_kind(m) not in INTERNAL_KINDS]
        )

    # -- entry point ----------------------------------------------------------------

    def part_outgrows_one_call(
        self,
        messages: Sequence[BaseMessage],
        *,
        system: Sequence[BaseMessage],
        tools: Sequence[BaseTool],
        measured: tuple[int, int],
        growth: int,
    ) -> bool:
        """Whether an automatic compaction of ``messages`` now summarizes its part in
        one summarizer call and one a model call later would not: its part ``growth``
        tokens (ours) longer then, as the newest call and its results will be.

        Args:
            messages: The full history.
            system: The live system prompt.
            tools: The tools sent with the prompt.
            measured: The prompt about to be sent (see :meth:`__call__`).
            growth: What the part gains by the next model call.
        """
        plan = self._plan(
            messages, trigger="auto", system=system, tools=tools, focus=None, measured=measured
        )
        self.last_skipped = None  # a question, not a compaction that did nothing
        if plan is None or not plan.summary_input:
            return False
        calls = self._call_counter(
            _instructions(None),
            plan.cancelled,
            reply_tokens=plan.summary_max,
            scale=plan.scale,
            margin=plan.margin,
        )
        return calls(plan.summary_input) == 1 and calls(plan.summary_input, growth) > 1

    def _plan(
        self,
        messages: Sequence[BaseMessage],
        *,
        trigger: str,
        system: Sequence[BaseMessage],
        tools: Sequence[BaseTool],
        focus: str | None,
        measured: tuple[int, int] | None,
    ) -> _Plan | None:
        """What a compaction of ``messages`` would summarize and keep, and in what room
        (see :meth:`__call__` for the arguments); None when there is nothing to
        summarize (:attr:`last_skipped` then says why)."""
        # The system messages alone: count_messages would add the reply priming, which
        # the view's count below already has.
        fixed = sum(map(self.counter.count_message, system)) + self.counter.count_tools(list(tools))
        recent = [m for m in since_last_boundary(messages) if not isinstance(m, SystemMessage)]
        before = self._view_tokens(recent, fixed)
        # Budgets are in the provider's tokens. An estimating counter that the provider
        # out-counts (a local chat template) works in its own units with the budget
        # divided by that ratio, and its figures are shown scaled by it, as the status
        # line shows them (before this compaction, and after it: the ratio is recorded
        # on the summary). An exact counter's ratio is about 1 and is not applied.
        if measured is None:
            sent = [m for m in recent if agentgraph_kind(m) not in INTERNAL_KINDS]
            shown, _ = anchored_prompt_tokens(
                sent,
                self.counter,
                fixed_tokens=fixed,
                unanchored=before,
                carried_scale=carried_scale(sent),
            )
            measured = (shown, before)
        shown_before, ours = measured
        ratio = round(shown_before / ours, 4) if ours > 0 and shown_before > 0 else 1.0
        scale = 1.0
        if self.counter.source == "estimate":
            scale = min(max(ratio, 1.0), ESTIMATE_SCALE_MAX)
        margin = self._count_margin(ratio)
        usable = int(self.budget.usable / scale)
        target = int(usable * TARGET_AFTER_BUDGET_FRACTION)
        room = max(target - fixed, 0)
        keep_tokens = min(int(usable * KEEP_RECENT_BUDGET_FRACTION), int(room * KEEP_ROOM_SHARE))
        files_tokens = min(int(usable * FILES_BUDGET_FRACTION), int(room * FILES_ROOM_SHARE))
        summary_max = max(
            min(int(usable * SUMMARY_MAX_BUDGET_FRACTION), int(room * SUMMARY_ROOM_SHARE)),
            SUMMARY_MIN_TOKENS,
        )
        split = partial(self._split, recent, between_turns=trigger == "manual")
        older, kept, summary_input, cancelled = split(keep_tokens, self.keep_recent_messages)
        if trigger not in ("auto", "distil") and _nothing_new(older, cancelled):
            # Asked for explicitly (or by the guard) while everything new fits the keep
            # budget: summarize all but the pending request (between turns, when the
            # last request is answered: everything).
            keep_tokens = 0
            older, kept, summary_input, cancelled = split(keep_tokens, self.keep_recent_messages)
        if not older or (trigger == "manual" and _nothing_new(older, cancelled)):
            self.last_skipped = "no older messages to summarize"
            return None
        carried_heads = self._carried_summaries(older, summary_max)
        if not carried_heads and trigger in ("auto", "distil"):
            carried_heads = self._deferred_stack(
                older,
                summary_input,
                _instructions(focus),
                cancelled,
                summary_max=summary_max,
                scale=scale,
                margin=margin,
            )
        if carried_heads:
            ids = {id(m) for m in carried_heads}
            summary_input = [m for m in summary_input if id(m) not in ids]
        return _Plan(
            recent=recent,
            fixed=fixed,
            before=before,
            shown_before=shown_before,
            scale=scale,
            margin=margin,
            usable=usable,
            target=target,
            room=room,
            keep_tokens=keep_tokens,
            files_tokens=files_tokens,
            summary_max=summary_max,
            older=older,
            kept=kept,
            summary_input=summary_input,
            cancelled=cancelled,
            carried_heads=carried_heads,
            split=split,
        )

    def __call__(
        self,
        messages: Sequence[BaseMessage],
        *,
        trigger: str,
        system: Sequence[BaseMessage],
        tools: Sequence[BaseTool],
        focus: str | None = None,
        workspace: str | None = None,
        measured: tuple[int, int] | None = None,
        course_change: str | None = None,
        artifacts: str | None = None,
    ) -> CompactionOutcome | None:
        """Compact ``messages`` (the full state history); None when there is nothing to do.

        None also when a manual compaction would not make the prompt smaller;
        :attr:`last_skipped` then says why.

        ``measured``: the prompt about to be sent, as ``(its tokens as the provider
        counts them, our count of it)`` (the caller has it with masking applied, which the
        reported usage describes); else both are taken from ``messages``. For an
        estimating counter their ratio divides the budget and scales the record's
        figures, as the status line scales them (see :func:`carried_scale`).

        ``course_change``: the spiral guard found the last compaction made no progress:
        this note heads the ledger, telling the model what it repeated (the ledger is
        rebuilt at every compaction, so the note does not outlive the stall).

        ``artifacts``: the session's folder of whole outputs the history holds cut; the
        summarizer reads those instead of the cuts (agentgraph/context/artifacts.py).
        """
        self.last_skipped = None
        plan = self._plan(
            messages, trigger=trigger, system=system, tools=tools, focus=focus, measured=measured
        )
        if plan is None:
            return None
        recent, fixed, before = plan.recent, plan.fixed, plan.before
        shown_before, scale, margin = plan.shown_before, plan.scale, plan.margin
        usable, target, room = plan.usable, plan.target, plan.room
        keep_tokens, files_tokens = plan.keep_tokens, plan.files_tokens
        summary_max, cancelled, split = plan.summary_max, plan.cancelled, plan.split
        older, kept, summary_input = plan.older, plan.kept, plan.summary_input
        carried_heads = plan.carried_heads
        keep_messages = self.keep_recent_messages
        # Only for the compactions a growing prompt brings: /compact and the overflow
        # guard want the prompt as small as it gets.
        spilled = (
            self._spilled_groups(
                recent,
                summary_input,
                _instructions(focus),
                cancelled,
                limit=int(usable * SUMMARY_SPILL_KEPT_BUDGET_FRACTION),
                reply_tokens=summary_max,
                scale=scale,
                margin=margin,
            )
            if trigger in ("auto", "distil")
            else set()
        )
        if spilled:
            summary_input = [m for m in summary_input if id(m) not in spilled]
            older = [m for m in older if id(m) not in spilled]
            kept_ids = spilled | {id(m) for m in kept}
            kept = [m for m in recent if id(m) in kept_ids]
        summary: str | None = None
        reason = ""
        heads_tokens = sum(map(self.counter.count_message, carried_heads))
        summary_room = summary_max - heads_tokens
        # The ledger is computed from the whole history: every compaction's summarized
        # part is still in the state, so no progress is lost with the summaries.
        progress = self._progress(messages, workspace)
        ledger = self._ledger(progress, int(usable * LEDGER_MAX_BUDGET_FRACTION))
        if course_change:
            ledger = f"{course_change}\n\n{ledger}" if ledger else course_change
        # What a cut took reaches the summary, as what masking hid does.
        original_limit = int(
            self._piece_budget(summary_max, scale, margin) * ORIGINAL_MAX_CALL_FRACTION
        )
        summary_input = self._with_originals(summary_input, artifacts, original_limit)
        try:
            summary = self._summarize(
                summary_input,
                focus,
                cancelled,
                reply_tokens=summary_max,
                scale=scale,
                margin=margin,
            )
        except Exception as exc:  # any failure → the fallback keeps the session going
            reason = f"{type(exc).__name__}: {str(exc)[:200]}"
        hard_target = int(usable * SUMMARY_HARD_TARGET_BUDGET_FRACTION)
        if summary is not None:
            # What the rewrite of earlier summaries dropped is carried first, word for
            # word, so the follow-ups below ask only about files no summary described:
            # asked again about the dropped ones, a summarizer that keeps half of each
            # list spent every follow-up on the oldest files and never reached the
            # newest. The carried details may take the room the summary has under the
            # hard target: they are what the earlier summaries already took.
            beside = heads_tokens + self.counter.count_text(ledger)
            carry_max = max(summary_max, hard_target - fixed - beside)
            summary = self._carry_over(summary, summary_input, progress, carry_max)
            summary = self._supplement(
                summary,
                summary_input,
                focus,
                reply_tokens=summary_max,
                scale=scale,
                history=messages,
                margin=margin,
                workspace=workspace,
                artifacts=artifacts,
            )
        if summary is None:
            fallback_keep = min(int(usable * FALLBACK_KEEP_BUDGET_FRACTION), max(room, keep_tokens))
            older, kept, _, _ = split(fallback_keep, keep_messages)
            carried_heads = self._carried_summaries(older, summary_max)
            spilled = set()
        kept = self._mask_seen_outputs(kept, whole=spilled)
        # A distillation summarizes what masking hid, mid-task: the files read are in
        # the summary and the ledger, and re-reading them from disk would take the room
        # the compaction freed (a summary every few calls on a long read-only task).
        files = (
            self._files(
                since_last_boundary(messages),
                workspace,
                files_tokens,
                summary or "",
                [*reversed(progress.changes), *reversed(progress.reads)]
                if progress is not None
                else (),
            )
            if summary is not None and trigger != "distil"
            else []
        )
        # What the summary names before its lists of files the ledger shows are left to
        # the ledger (they name the files as much as before) and before the loop below
        # shortens it.
        named = "\n".join([summary or "", *(m.text for m in carried_heads)])
        if summary is not None and progress is not None:
            summary = without_listed_files(summary, progress, ledger)
        summary_cut = shortened = False
        while True:
            new_tail = self._assemble(summary, reason, files, kept, carried_heads, ledger, scale)
            after = self._view_tokens(new_tail, fixed)
            if after <= target:
                break
            # Keep less rather than compact again a few steps later, and without
            # cutting the summary: first a re-read file (still on disk), then long kept
            # outputs (whole in the transcript). A summary still too long after being
            # asked for a shorter one takes their room.
            if files:
                files = files[:-1]
                continue
            # Groups left for the next summary stay whole: summarized cut, they would
            # lose what the cut took.
            shrinkable = [m for m in kept if id(m) not in spilled]
            shrunk, changed = shrink_tool_messages(
                shrinkable,
                KEEP_LESS_TOOL_OUTPUT_MAX_TOKENS,
                count=self.counter.count_text,
                codec=self.counter.codec,
                page=partial(page_of_read, counter=self.counter),
            )
            if changed:
                fitted = iter(shrunk)
                kept = [m if id(m) in spilled else next(fitted) for m in kept]
                continue
            if summary is not None and not shortened and after > hard_target:
                # The details carried over from earlier summaries give the room back
                # first: asked for again, the summary would lose half of them anyway.
                trimmed = without_oldest_details(
                    summary, after - hard_target, count=self.counter.count_text
                )
                if trimmed != summary:
                    summary = trimmed
                    continue
                # Longer than all the room it can take: asked for again, in its share.
                shortened = True
                summary = self._shorten(
                    summary, max(summary_room, SUMMARY_MIN_TOKENS), focus, margin
                )
                continue
            if summary is not None and not summary_cut and after > hard_target:
                # The last resort, when the summary stayed longer than all the room
                # under the hard target even after being asked for a shorter one: an
                # explicit cut, recorded, that says where the rest is.
                size = self.counter.count_text(summary)
                allowed = max(size - (after - hard_target), SUMMARY_MIN_TOKENS)
                if allowed < size:
                    summary = truncate_text(summary, allowed, count=self.counter.count_text).text
                    summary += SUMMARY_CUT_NOTE
                    summary_cut = True
                    continue
            # Over the target by a summary that needs the room (a long task's facts):
            # the next compaction comes sooner, but nothing is cut. Or the system
            # prompt and the latest request alone exceed the target.
            break
        # Results the model has not seen yet (the newest call's, whose arrival pushed
        # the prompt past the compaction point). Those that could never be seen whole
        # stay in view, cut to share the room under the hard target (under the
        # compaction point when that room is too small): read again, they passed the
        # point again and were summarized unseen again (a summary that dropped their
        # values had a local model read the same files compaction after compaction).
        # Those that fit beside what the compaction leaves stay whole in a session that
        # changes files: a change needs a file's exact lines, which no summary holds
        # (summarized only, a file read to be edited was read again: 9 of 100 files at
        # a 16k window, 18 at 8k). A session that only reads takes what it asked for
        # from the summary: kept, each compaction of the benchmark's reads sent a page
        # of a 20 KB file or a batch of eight reads once more (8-35% more tokens). Kept
        # and summarized, they are shown whole once: the masking unit masks them once
        # the model has answered them.
        compact_point = int(self.budget.compact_at / scale)
        unseen = self._unseen_kept(
            recent,
            kept,
            after,
            compact_point,
            int(usable * UNSEEN_KEPT_BUDGET_FRACTION),
            whole=progress is not None and bool(progress.changes),
            artifacts=artifacts,
            workspace=workspace,
        )
        if unseen:
            if summary is not None:
                unseen = [_summarized_copy(m, unseen=True) for m in unseen]
            kept = [*kept, *unseen]
            new_tail = self._assemble(summary, reason, files, kept, carried_heads, ledger, scale)
        settled = self._view_tokens(new_tail, fixed) if unseen else after
        if summary is not None and trigger != "manual":
            # Not for /compact: asked for to make the prompt smaller, it would fill
            # the room again.
            room = min(target - settled, int(usable * LEFT_OUT_BUDGET_FRACTION))
            left_out = self._left_out_kept(named, older, messages, kept, room, workspace)
            if left_out:
                kept = _in_history_order(recent, [*left_out, *group_messages(kept)])
                new_tail = self._assemble(
                    summary, reason, files, kept, carried_heads, ledger, scale
                )
                settled = self._view_tokens(new_tail, fixed)
        if trigger == "manual" and summary is not None and settled >= before:
            # Asked for on a short history: a summary (with its prefix and the re-read
            # files) that is no smaller than what it replaces only loses detail. Not
            # applied. Auto and guard compactions are applied whatever the result
            # (the window or the provider forces the cut; see the fallback rules).
            self.last_skipped = (
                "a summary would not make the prompt smaller "
                f"({_scaled(before, scale):,} → {_scaled(settled, scale):,} tokens)"
            )
            return None
        record = {
            "trigger": trigger,
            "tokens_before": shown_before,
            "tokens_after": _scaled(settled, scale),
            "files": [p for p, _ in files],
            "fallback": summary is None,
            "reason": reason,
            "summary": summary or "",
            "summary_cut": summary_cut
            or (summary is not None and SUMMARY_OUTPUT_CUT_NOTE.strip() in summary),
            "course_change": bool(course_change),
            "ledger": ledger,
            "summarized_messages": len(older),
            "carried_summaries": len(carried_heads),
            "kept_messages": len(kept),
            "timestamp": time.time(),
        }
        boundary = SystemMessage(
            content=f"[compaction boundary: {trigger}]",
            id=f"boundary-{uuid.uuid4().hex}",
            additional_kwargs=marker("compact_boundary", **record),
        )
        # add_messages replaces a re-added id in place, so moving the kept messages
        # after the boundary means removing them and adding copies with new ids. A
        # message that keeping less cut down or masked is not removed: its full original
        # stays before the boundary, so the transcript keeps every byte.
        # Kept messages come from ``recent``: their stored versions are there (ids are
        # unique in a history), so the whole transcript need not be walked.
        stored = {m.id: m for m in recent if m.id}
        moving = {m.id for m in kept if m.id and stored.get(m.id) is m}
        removals: list[BaseMessage] = [RemoveMessage(id=i) for i in moving]
        # Reported usage of a moved reply describes the old, larger prompt: drop it so
        # it cannot anchor the count after compaction.
        moved = [
            m.model_copy(
                update={"id": f"{m.id or 'm'}~{uuid.uuid4().hex[:8]}"}
                | ({"usage_metadata": None} if isinstance(m, AIMessage) else {})
            )
            for m in kept
        ]
        new_tail = [*new_tail[: len(new_tail) - len(kept)], *moved]
        updates: list[BaseMessage] = [*removals, boundary, *new_tail]
        history = [m for m in messages if m.id not in moving] + [boundary, *new_tail]
        return CompactionOutcome(
            updates=updates,
            messages=history,
            tokens_before=shown_before,
            tokens_after=_scaled(settled, scale),
            record=record,
        )

    def _assemble(
        self,
        summary: str | None,
        reason: str,
        files: Sequence[tuple[str, HumanMessage]],
        kept: Sequence[BaseMessage],
        carried: Sequence[BaseMessage],
        ledger: str,
        scale: float,
    ) -> list[BaseMessage]:
        # Carried summaries keep their exact content (new ids: the originals stay
        # before the boundary), so the prompt's prefix up to them is unchanged.
        heads: list[BaseMessage] = [
            m.model_copy(update={"id": f"summary-{uuid.uuid4().hex}"}) for m in carried
        ]
        if summary is not None:
            heads.append(
                HumanMessage(
                    content=(STACKED_SUMMARY_PREFIX if carried else SUMMARY_PREFIX) + summary,
                    id=f"summary-{uuid.uuid4().hex}",
                    additional_kwargs=marker("summary", **_scale_field(scale)),
                )
            )
        else:
            heads.append(
                HumanMessage(
                    content=FALLBACK_NOTE.format(reason=reason or "no summary"),
                    id=f"summary-{uuid.uuid4().hex}",
                    additional_kwargs=marker("summary", fallback=True, **_scale_field(scale)),
                )
            )
        if ledger:
            heads.append(ledger_message(ledger, f"ledger-{uuid.uuid4().hex}"))
        return [*heads, *(msg for _, msg in files), *kept]

    def _deferred_stack(
        self,
        older: Sequence[BaseMessage],
        summary_input: Sequence[BaseMessage],
        instructions: str,
        cancelled: Mapping[int, str] | None,
        *,
        summary_max: int,
        scale: float,
        margin: float,
    ) -> list[BaseMessage]:
        """Earlier summaries past their share, carried once more when rewriting them
        with the new part would take a second summarizer call that the part alone does
        not (up to ``SUMMARY_STACK_DEFER_SHARE`` of the summary's room); else []."""
        stack = self._carried_summaries(older, summary_max, SUMMARY_STACK_DEFER_SHARE)
        if not stack:
            return []
        ids = {id(m) for m in stack}
        calls = self._call_counter(
            instructions, cancelled, reply_tokens=summary_max, scale=scale, margin=margin
        )
        alone = [m for m in summary_input if id(m) not in ids]
        return stack if calls(alone) < calls(summary_input) else []

    def _call_counter(
        self,
        instructions: str,
        cancelled: Mapping[int, str] | None,
        *,
        reply_tokens: int,
        scale: float,
        margin: float,
    ) -> Callable[..., int]:
        """How many summarizer calls a part takes, packed as :meth:`_pieces` packs it
        (``reserve``: as if each call held that many tokens less)."""

        def calls(part: Sequence[BaseMessage], reserve: int = 0) -> int:
            pieces = self._pieces(
                part,
                instructions,
                cancelled,
                reply_tokens=reply_tokens,
                scale=scale,
                margin=margin,
                reserve=reserve,
            )
            return sum(1 for piece in pieces if piece)

        return calls

    def _carried_summaries(
        self, older: Sequence[BaseMessage], summary_max: int, share: float = SUMMARY_STACK_SHARE
    ) -> list[BaseMessage]:
        """Earlier summaries carried over verbatim, or [] when they are to be re-summarized.

        Carried while they fit ``share`` of the summary's room and there is something
        new to summarize; a failed compaction's note is never carried.
        """
        prior = [m for m in older if _written_summary(m)]
        fresh = any(agentgraph_kind(m) not in COMPACTION_KINDS for m in older)
        if not prior or not fresh:
            return []
        if len(prior) != sum(1 for m in older if agentgraph_kind(m) == "summary"):
            return []  # a fallback note among them: summarize them all again
        size = sum(self.counter.count_message(m) for m in prior)
        return prior if size <= summary_max * share else []
