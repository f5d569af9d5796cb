// agentgraph web UI: sessions, a streaming conversation, approvals, the context chart.
// Model text is never parsed as HTML: every node is built with createElement and
// textContent (the tiny markdown renderer below included).
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const ARGS_PREVIEW_CHARS = 80;
const DIFF_FOLD_LINES = 400;
const CHART_HEADROOM = 1.2, CHART_BUDGET_REACH = 2;
const CHART_W = 380, CHART_H = 200, PAD_L = 44, PAD_B = 22, PAD_T = 10, PAD_R = 8;
const CATEGORY_COLORS = {
  system_prompt: "#6f42c1", instructions: "#a371f7", tool_schemas: "#0366d6",
  user: "#28a745", assistant: "#2ea44f", tool_results: "#e36209",
  summaries: "#8a3ffc", files_reinjected: "#b08800", unattributed: "#bbbbbb",
};

const state = {
  threadId: null, source: null, busy: false, bubble: null, bubbleText: "",
  tools: new Map(), pending: new Map(), subagents: new Set(), sessions: [],
};

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("data-")) node.setAttribute(key, value);
    else node[key] = value;
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  return node;
}

// --- markdown (escaped by construction: text nodes only) ---------------------------

function inline(text) {
  const frag = document.createDocumentFragment();
  for (const part of text.split(/(`[^`\n]+`|\*\*[^*\n]+\*\*)/)) {
    if (!part) continue;
    if (part.startsWith("`") && part.endsWith("`") && part.length > 1) {
      frag.append(el("code", {}, part.slice(1, -1)));
    } else if (part.startsWith("**") && part.endsWith("**") && part.length > 4) {
      frag.append(el("strong", {}, part.slice(2, -2)));
    } else {
      frag.append(document.createTextNode(part));
    }
  }
  return frag;
}

function renderMarkdown(text) {
  const frag = document.createDocumentFragment();
  const lines = text.split("\n");
  let para = [], list = null;
  const flushPara = () => {
    if (para.length) frag.append(el("p", {}, inline(para.join("\n"))));
    para = [];
  };
  const flushList = () => { if (list) frag.append(list); list = null; };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = line.match(/^\s*```(.*)$/);
    if (fence) {
      flushPara(); flushList();
      const code = [];
      for (i++; i < lines.length && !/^\s*```\s*$/.test(lines[i]); i++) code.push(lines[i]);
      frag.append(el("pre", {}, el("code", { "data-lang": fence[1].trim() }, code.join("\n"))));
      continue;
    }
    const heading = line.match(/^(#{1,6})\s+(.*)$/);
    const item = line.match(/^\s*(?:[-*+]|(\d+)[.)])\s+(.*)$/);
    if (heading) {
      flushPara(); flushList();
      frag.append(el("h" + Math.min(heading[1].length + 2, 6), {}, inline(heading[2])));
    } else if (item) {
      flushPara();
      const tag = item[1] ? "ol" : "ul";
      if (!list || list.tagName.toLowerCase() !== tag) { flushList(); list = el(tag, {}); }
      list.append(el("li", {}, inline(item[2])));
    } else if (!line.trim()) {
      flushPara(); flushList();
    } else {
      flushList();
      para.push(line);
    }
  }
  flushPara(); flushList();
  return frag;
}

// --- server ------------------------------------------------------------------------

async function getJson(path) {
  const response = await fetch(path, { credentials: "same-origin" });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.error || `HTTP ${response.status}`);
  return data;
}

async function op(body) {
  const response = await fetch("/api/op", {
    method: "POST", credentials: "same-origin",
    headers: { "content-type": "application/json" }, body: JSON.stringify(body),
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.error || `HTTP ${response.status}`);
  return data;
}

function newThreadId() {
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function subscribe(threadId) {
  if (state.source) state.source.close();
  const source = new EventSource(`/api/sessions/${encodeURIComponent(threadId)}/events`);
  state.source = source;
  source.onmessage = (message) => render(JSON.parse(message.data), true);
  source.addEventListener("overflow", () => openSession(threadId));
  return new Promise((resolve) => {
    if (source.readyState === EventSource.OPEN) resolve();
    source.addEventListener("open", () => resolve(), { once: true });
  });
}

// --- sessions ----------------------------------------------------------------------

async function loadSessions() {
  const query = $("search").value;
  const data = await getJson(`/api/sessions?q=${encodeURIComponent(query)}`);
  state.sessions = data.sessions;
  const list = $("sessions");
  list.replaceChildren();
  for (const s of data.sessions) {
    const when = new Date(s.updated_at * 1000).toLocaleString();
    const item = el("li", { "data-thread": s.thread_id, title: s.thread_id },
      el("span", { class: "title" }, s.title || s.thread_id.slice(0, 12)),
      el("span", { class: "where" }, `${s.workspace} · ${when}`));
    if (s.thread_id === state.threadId) item.classList.add("current");
    item.addEventListener("click", () => openSession(s.thread_id));
    list.append(item);
  }
}

function resetLog() {
  $("log").replaceChildren();
  state.bubble = null; state.bubbleText = "";
  state.tools.clear(); state.pending.clear(); state.subagents.clear();
}

async function openSession(threadId) {
  resetLog();
  state.threadId = threadId;
  $("toggle-context").disabled = false;
  const data = await getJson(`/api/sessions/${encodeURIComponent(threadId)}`);
  const info = data.info || {};
  $("session-title").textContent = info.title || threadId.slice(0, 12);
  $("session-meta").textContent = `${info.workspace || ""} · ${threadId.slice(0, 12)}`;
  $("model").value = data.model || "";
  $("model").disabled = false;
  for (const event of data.events) render(event, false);
  finishBubble();
  setBusy(Boolean(data.running));
  await subscribe(threadId);
  loadSessions();
  if (!$("context").hidden) loadContext();
}

function newSession() {
  if (state.source) state.source.close();
  state.source = null;
  state.threadId = null;
  resetLog();
  $("session-title").textContent = "New session";
  $("session-meta").textContent = "";
  $("toggle-context").disabled = true;
  $("context").hidden = true;
  $("model").value = "";
  $("model").disabled = true;
  setBusy(false);
  $("prompt").focus();
}

function setBusy(busy) {
  state.busy = busy;
  $("send").disabled = busy;
  $("stop").disabled = !busy;
}

async function submit(event) {
  event.preventDefault();
  const text = $("prompt").value.trim();
  if (!text || state.busy) return;
  let threadId = state.threadId;
  if (!threadId) {
    threadId = state.threadId = newThreadId();
    $("session-title").textContent = text.split("\n")[0].slice(0, 60);
    $("toggle-context").disabled = false;
  }
  setBusy(true);
  try {
    if (!state.source) await subscribe(threadId);
    await op({ op: "submit_turn", thread_id: threadId, text });
    $("prompt").value = "";
  } catch (err) {
    setBusy(false);
    note("error", err.message);
  }
}

// --- rendering ---------------------------------------------------------------------

function log() { return $("log"); }

function scroll() { const l = log(); l.scrollTop = l.scrollHeight; }

function note(kind, text) {
  finishBubble();
  log().append(el("div", { class: `line-note ${kind}`, "data-type": kind }, text));
  scroll();
}

function finishBubble() {
  if (!state.bubble) return;
  state.bubble.classList.remove("streaming");
  state.bubble.replaceChildren(renderMarkdown(state.bubbleText));
  state.bubble = null; state.bubbleText = "";
}

function streamText(text) {
  if (!state.bubble) {
    state.bubble = el("div", { class: "msg assistant streaming", "data-type": "assistant" });
    log().append(state.bubble);
  }
  state.bubbleText += text;
  state.bubble.textContent = state.bubbleText;
  scroll();
}

function shortArgs(args) {
  let text;
  if (args && typeof args === "object" && !Array.isArray(args)) {
    const entries = Object.entries(args);
    text = entries.map(([k, v]) => {
      const shown = (typeof v === "string" ? v : JSON.stringify(v)).replace(/\s+/g, " ");
      return entries.length > 1 ? `${k}=${shown.slice(0, 40)}` : shown;
    }).join(", ");
  } else {
    text = JSON.stringify(args);
  }
  return text.length > ARGS_PREVIEW_CHARS ? text.slice(0, ARGS_PREVIEW_CHARS - 1) + "…" : text;
}

function diffBlock(path, diff, added, removed, noteText) {
  if (added === null) {  // a preview: counted here
    const body = (diff || "").split("\n").filter((l) => !l.startsWith("+++") && !l.startsWith("---"));
    added = body.filter((l) => l.startsWith("+")).length;
    removed = body.filter((l) => l.startsWith("-")).length;
  }
  const block = el("div", { class: "diff", "data-type": "diff" },
    el("div", { class: "head" }, `${path} +${added} -${removed}${noteText ? ` (${noteText})` : ""}`));
  const lines = (diff || "").split("\n");
  if (lines.length && lines[lines.length - 1] === "") lines.pop();
  for (const line of lines.slice(0, DIFF_FOLD_LINES)) {
    let cls = "line";
    if (line.startsWith("+++") || line.startsWith("---")) cls += " file";
    else if (line.startsWith("@@")) cls += " hunk";
    else if (line.startsWith("+")) cls += " add";
    else if (line.startsWith("-")) cls += " del";
    block.append(el("div", { class: cls }, line));
  }
  if (lines.length > DIFF_FOLD_LINES) {
    block.append(el("div", { class: "line" }, `… ${lines.length - DIFF_FOLD_LINES} more lines`));
  }
  return block;
}

function toolCall(event) {
  finishBubble();
  const details = el("details", { class: "tool", "data-type": "tool", "data-call": event.id },
    el("summary", {}, el("span", { class: "name" }, event.name), " ",
      el("span", { class: "args" }, shortArgs(event.args)), " ",
      el("span", { class: "status" }, "running…")));
  details.append(el("pre", { class: "args-full" }, JSON.stringify(event.args, null, 2)));
  const tail = el("div", { class: "tool-tail" });
  log().append(details, tail);
  state.tools.set(event.id, { details, tail });
  scroll();
}

function toolResult(event) {
  const tool = state.tools.get(event.id);
  if (!tool) return;
  const content = event.content || "";
  const lines = content.split("\n");
  const first = (lines.find((l) => l.trim()) || "(no output)").trim();
  const summary = first.length > 100 ? first.slice(0, 99) + "…" : first;
  const more = lines.length > 1 ? ` (+${lines.length - 1} lines)` : "";
  tool.details.querySelector(".status").textContent = `→ ${summary}${more}`;
  if (event.status === "error") tool.details.classList.add("error");
  tool.details.append(el("pre", { class: "output", "data-type": "tool-output" }, content));
}

function approval(event) {
  finishBubble();
  if (state.pending.has(event.id)) return;
  const what = event.command || event.path || event.memory || event.memory_id || "";
  const card = el("div", { class: "approval", "data-type": "approval", "data-id": event.id },
    el("div", {}, el("strong", {}, `Approve ${event.tool}?`), " ", el("code", {}, what)),
    event.reason ? el("div", { class: "line-note" }, event.reason) : null);
  if (event.diff) card.append(diffBlock(event.path || "", event.diff, null, null, "preview"));
  const approve = el("button", { type: "button", class: "primary", "data-answer": "yes" }, "Approve");
  const deny = el("button", { type: "button", "data-answer": "no" }, "Deny");
  card.append(el("div", { class: "buttons" }, approve, deny));
  const entry = { card, answer: null };
  state.pending.set(event.id, entry);
  const answer = (value) => {
    entry.answer = value;
    approve.disabled = deny.disabled = true;
    card.classList.add("answered");
    card.append(el("div", { class: "line-note" }, value ? "approved" : "denied"));
    sendAnswers();
  };
  approve.addEventListener("click", () => answer(true));
  deny.addEventListener("click", () => answer(false));
  // Under its tool call, before the diff the approved change will show.
  const tool = state.tools.get(event.tool_call_id);
  (tool ? tool.tail : log()).append(card);
  scroll();
}

async function sendAnswers() {
  const entries = [...state.pending.entries()];
  if (entries.some(([, e]) => e.answer === null)) return;  // wait for every question
  const answers = Object.fromEntries(entries.map(([id, e]) => [id, e.answer]));
  state.pending.clear();
  setBusy(true);
  try {
    if (!state.source) await subscribe(state.threadId);
    await op({ op: "answer_approvals", thread_id: state.threadId, answers });
  } catch (err) {
    setBusy(false);
    note("error", err.message);
  }
}

function render(event, live) {
  switch (event.type) {
    case "user_message":
      finishBubble();
      log().append(el("div", { class: "msg user", "data-type": "user" }, event.text));
      if (live) setBusy(true);
      scroll();
      break;
    case "text_delta":
      streamText(event.text);
      break;
    case "answer":
      if (!state.bubble) streamText(event.text);
      else state.bubbleText = event.text;
      finishBubble();
      break;
    case "tool_call": toolCall(event); break;
    case "tool_result": toolResult(event); break;
    case "diff": {
      finishBubble();
      const block = diffBlock(event.path, event.diff, event.added, event.removed, event.note);
      const tool = state.tools.get(event.tool_call_id);
      (tool ? tool.tail : log()).append(block);
      scroll();
      break;
    }
    case "approval": approval(event); break;
    case "notice": case "retry": note("notice", event.text); break;
    case "compaction": {
      const before = event.tokens_before || 0, after = event.tokens_after || 0;
      note("compaction", `Compacted (${event.trigger}): ${before.toLocaleString()} → ${after.toLocaleString()} tokens`);
      break;
    }
    case "masking":
      note("masking", `Masked ${event.masked_outputs} old tool outputs: ${event.tokens_before.toLocaleString()} → ${event.tokens_after.toLocaleString()} tokens`);
      break;
    case "todos":
      finishBubble();
      log().append(el("ul", { class: "todos", "data-type": "todos" },
        ...event.todos.map((t) => el("li", {}, `[${t.status}] ${t.content}`))));
      break;
    case "subagent_started":
      state.subagents.add(event.id);
      note("subagent", `↳ ${event.id}${event.background ? " (background)" : ""}: ${event.task}`);
      break;
    case "subagent_tool": {
      const who = state.subagents.size > 1 ? `[${event.id.split("-").pop()}] ` : "";
      note("subagent", `    ↳ ${who}${event.name} ${shortArgs(event.args)} · ${Number(event.elapsed_s).toFixed(1)}s`);
      break;
    }
    case "subagent_done": {
      state.subagents.delete(event.id);
      const tokens = (event.input_tokens || 0) + (event.output_tokens || 0);
      note("subagent", `↳ ${event.id} ${event.status} · ${event.loops} steps · ${Number(event.elapsed_s).toFixed(1)}s · ${tokens.toLocaleString()} tokens`);
      break;
    }
    case "subagent_tasks":
      for (const t of event.tasks) note("subagent", `background ${t.id} ${t.status}: ${t.task}`);
      break;
    case "stopped": note("notice", `stopped: ${event.reason}`); break;
    case "turn_end": {
      finishBubble();
      const cost = event.cost_usd === null || event.cost_usd === undefined ? "" : ` · $${event.cost_usd.toFixed(4)}`;
      note("usage", `${event.input_tokens.toLocaleString()} in · ${event.output_tokens.toLocaleString()} out${cost}`);
      if (!(event.pending_approvals || []).length) setBusy(false);
      loadSessions();
      if (!$("context").hidden) loadContext();
      break;
    }
    case "error":
      note("error", event.message);
      setBusy(false);
      break;
    default:
      break;  // prompt_tokens and types this page does not know yet
  }
}

// --- context panel -----------------------------------------------------------------

function fmt(n) { return Number(n || 0).toLocaleString(); }

function drawChart(data) {
  const calls = data.calls || [];
  const box = $("context-chart");
  box.replaceChildren();
  if (!calls.length) {
    box.append(el("p", { class: "line-note" }, "No model calls with reported usage yet."));
    return;
  }
  const budget = data.report ? data.report.budget : 0;
  // Scaled to the calls (a budget far above them would flatten the line); the budget
  // line is drawn when it is within reach.
  const peak = Math.max(...calls.map((c) => c.input_tokens), 1);
  const top = budget && budget <= peak * CHART_BUDGET_REACH ? budget : peak * CHART_HEADROOM;
  const w = CHART_W - PAD_L - PAD_R, h = CHART_H - PAD_T - PAD_B;
  // A marker sits between the calls it came between (after the last one: half a step on).
  const marks = [...(data.compactions || []), ...(data.maskings || [])].map((p) => p.call - 0.5);
  const span = Math.max(calls.length - 1, ...marks, 0);
  const x = (i) => PAD_L + (span === 0 ? w / 2 : (Math.max(i, 0) * w) / span);
  const y = (v) => PAD_T + h - (v / top) * h;
  const chart = svg("svg", { viewBox: `0 0 ${CHART_W} ${CHART_H}`, role: "img", "data-type": "context-chart" });
  chart.append(svg("title", {}));
  chart.firstChild.textContent = "Prompt tokens per model call";
  chart.append(svg("line", { class: "axis", x1: PAD_L, y1: PAD_T + h, x2: PAD_L + w, y2: PAD_T + h }));
  chart.append(svg("line", { class: "axis", x1: PAD_L, y1: PAD_T, x2: PAD_L, y2: PAD_T + h }));
  for (const v of [0, top / 2, top]) {
    const label = svg("text", { x: PAD_L - 4, y: y(v) + 3, "text-anchor": "end" });
    label.textContent = v >= 1000 ? `${Math.round(v / 1000)}k` : String(Math.round(v));
    chart.append(label);
  }
  const xlabel = svg("text", { x: PAD_L + w / 2, y: CHART_H - 4, "text-anchor": "middle" });
  xlabel.textContent = `model calls (${calls.length})`;
  chart.append(xlabel);
  if (budget && budget <= top) {
    chart.append(svg("line", { class: "budget", x1: PAD_L, y1: y(budget), x2: PAD_L + w, y2: y(budget) }));
  }
  const cachedPts = calls.map((c, i) => `${x(i)},${y(c.cached_tokens)}`);
  chart.append(svg("polygon", { class: "cached", points: `${x(0)},${y(0)} ${cachedPts.join(" ")} ${x(calls.length - 1)},${y(0)}` }));
  chart.append(svg("polyline", { class: "prompt", points: calls.map((c, i) => `${x(i)},${y(c.input_tokens)}`).join(" ") }));
  calls.forEach((c, i) => {
    const dot = svg("circle", { cx: x(i), cy: y(c.input_tokens), r: 2.5, fill: "#0366d6", "data-type": "call-point" });
    dot.append(svg("title", {}));
    dot.firstChild.textContent = `call ${i + 1}: ${fmt(c.input_tokens)} prompt tokens (${fmt(c.cached_tokens)} cached), ${fmt(c.output_tokens)} out`;
    chart.append(dot);
  });
  const marker = (point, cls, text) => {
    const at = point.call - 0.5;
    const line = svg("line", { class: cls, x1: x(at), y1: PAD_T, x2: x(at), y2: PAD_T + h, "data-type": cls });
    line.append(svg("title", {}));
    line.firstChild.textContent = text;
    chart.append(line);
  };
  for (const p of data.compactions || []) marker(p, "compaction", `compaction (${p.trigger}): ${fmt(p.tokens_before)} → ${fmt(p.tokens_after)}`);
  for (const p of data.maskings || []) marker(p, "masking", `masking: ${p.masked_outputs} outputs, ${fmt(p.tokens_before)} → ${fmt(p.tokens_after)}`);
  box.append(chart);
  const swatch = (color) => el("span", { class: "swatch", style: `background:${color}` });
  const legend = el("div", { class: "legend" },
    el("span", {}, swatch("#0366d6"), "prompt tokens"),
    el("span", {}, swatch("rgba(3,102,214,.3)"), "cached"),
    el("span", {}, swatch("#b31d28"), budget > top ? `budget ${fmt(budget)} (above the chart)` : "budget"),
    el("span", {}, swatch("#8a3ffc"), `compactions (${(data.compactions || []).length})`),
    el("span", {}, swatch("#e36209"), `maskings (${(data.maskings || []).length})`));
  box.append(legend);
}

function drawCategories(report) {
  const box = $("context-categories");
  box.replaceChildren();
  if (!report) return;
  const cats = { ...report.by_category };
  if (report.unattributed > 0) cats.unattributed = report.unattributed;
  const total = Object.values(cats).reduce((a, b) => a + b, 0) || 1;
  const bar = el("div", { class: "bar", "data-type": "category-bar" });
  const table = el("table", { class: "cats" });
  for (const [name, tokens] of Object.entries(cats)) {
    if (!tokens) continue;
    const color = CATEGORY_COLORS[name] || "#999";
    bar.append(el("span", { style: `width:${(100 * tokens) / total}%;background:${color}`, title: `${name}: ${fmt(tokens)}` }));
    table.append(el("tr", {},
      el("td", {}, el("span", { class: "swatch", style: `display:inline-block;width:10px;height:10px;background:${color}` })),
      el("td", {}, name.replace(/_/g, " ")), el("td", { class: "num" }, fmt(tokens)),
      el("td", { class: "num" }, `${((100 * tokens) / total).toFixed(1)}%`)));
  }
  box.append(el("div", {}, "Next prompt by category"), bar, table);
}

async function loadContext() {
  if (!state.threadId) return;
  const data = await getJson(`/api/sessions/${encodeURIComponent(state.threadId)}/context`);
  const report = data.report;
  const summary = $("context-summary");
  summary.replaceChildren();
  if (report) {
    const usage = report.usage || {};
    const cost = usage.cost_usd === null || usage.cost_usd === undefined ? "unknown" : `$${usage.cost_usd.toFixed(4)}`;
    const cached = usage.input_tokens ? ((100 * (usage.cached_input_tokens || 0)) / usage.input_tokens).toFixed(1) : "0.0";
    summary.append(
      el("div", {}, el("strong", {}, `${fmt(report.tokens)} / ${fmt(report.budget)} tokens`), ` (${report.percent}%, ${report.source})`),
      el("div", { class: "line-note" }, `session: ${fmt(usage.input_tokens)} in · ${fmt(usage.output_tokens)} out · ${cached}% cached · cost ${cost}`));
  }
  drawChart(data);
  drawCategories(report);
}

// --- wiring ------------------------------------------------------------------------

document.addEventListener("DOMContentLoaded", () => {
  $("composer").addEventListener("submit", submit);
  $("prompt").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("composer").requestSubmit(); }
  });
  $("stop").addEventListener("click", () => {
    if (state.threadId) op({ op: "cancel", thread_id: state.threadId }).catch((err) => note("error", err.message));
  });
  $("new-session").addEventListener("click", newSession);
  $("model").addEventListener("keydown", async (e) => {
    if (e.key !== "Enter" || !state.threadId || !$("model").value.trim()) return;
    e.preventDefault();
    try {
      const data = await op({ op: "switch_model", thread_id: state.threadId, model: $("model").value.trim() });
      note("notice", `model: ${data.model} from the next turn on`);
    } catch (err) {
      note("error", err.message);
    }
  });
  let timer = null;
  $("search").addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(loadSessions, 200); });
  $("toggle-context").addEventListener("click", () => {
    $("context").hidden = !$("context").hidden;
    if (!$("context").hidden) loadContext();
  });
  $("refresh-context").addEventListener("click", loadContext);
  $("compact").addEventListener("click", async () => {
    if (!state.threadId || state.busy) return;
    try {
      const data = await op({ op: "compact", thread_id: state.threadId });
      const record = data.record;
      if (!record) note("notice", "nothing to compact");
      else if (record.applied === false) note("notice", `not compacted: ${record.reason || "the summary failed"}`);
      else render({ type: "compaction", ...record }, false);
      loadContext();
    } catch (err) {
      note("error", err.message);
    }
  });
  loadSessions().catch((err) => note("error", err.message));
});
