// DOM helpers of the console. Every string that came from a session, a tool or a client is
// put in the page with textContent: never parsed as HTML, never used as a URL.

export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null) continue;
    if (key === "testid") node.dataset.testid = value;
    else if (key === "text") node.textContent = String(value);
    else if (key === "cls") node.className = value;
    else if (key.startsWith("data-")) node.setAttribute(key, String(value));
    else if (key === "type" || key === "title" || key === "disabled") node[key] = value;
    else if (key === "rows") node.setAttribute("rows", String(value));
    else throw new Error(`el: unexpected property ${key}`);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

export function json(value) {
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

const EDIT_TOOLS = new Set(["Edit", "Write", "MultiEdit"]);

export function isEdit(name) {
  return EDIT_TOOLS.has(name);
}

// The lines of `before` and `after` as a unified list of [" " | "-" | "+", line].
function lines(text) {
  if (text === "") return [];
  const all = text.split("\n");
  if (all[all.length - 1] === "") all.pop(); // a final newline ends the last line
  return all;
}

export function lineDiff(before, after) {
  const a = lines(before);
  const b = lines(after);
  if (a.length * b.length > 250000) {
    return [...a.map((l) => ["-", l]), ...b.map((l) => ["+", l])];
  }
  const n = a.length, m = b.length;
  const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  const out = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) { out.push([" ", a[i]]); i++; j++; }
    else if (lcs[i + 1][j] >= lcs[i][j + 1]) out.push(["-", a[i++]]);
    else out.push(["+", b[j++]]);
  }
  while (i < n) out.push(["-", a[i++]]);
  while (j < m) out.push(["+", b[j++]]);
  return out;
}

// The diff an Edit / Write / MultiEdit call makes, as a <div data-testid="diff">.
export function diffView(name, input) {
  const box = el("div", { testid: "diff", cls: "diff" });
  const path = typeof input?.file_path === "string" ? input.file_path : "";
  box.append(el("div", { cls: "path", text: path }));
  const pairs = [];
  if (name === "Write") pairs.push(["", String(input?.content ?? "")]);
  else if (name === "Edit") pairs.push([String(input?.old_string ?? ""), String(input?.new_string ?? "")]);
  else if (Array.isArray(input?.edits)) {
    for (const edit of input.edits) pairs.push([String(edit?.old_string ?? ""), String(edit?.new_string ?? "")]);
  }
  for (const [before, after] of pairs) {
    const pre = el("pre");
    for (const [mark, line] of lineDiff(before, after)) {
      const cls = mark === "-" ? "del" : mark === "+" ? "add" : "same";
      pre.append(el("div", { cls, text: `${mark} ${line}` }));
    }
    box.append(pre);
  }
  return box;
}

export function money(usd) {
  return typeof usd === "number" ? `$${usd.toFixed(4)}` : "";
}

export function age(seconds) {
  if (!(seconds >= 0)) return "";
  if (seconds < 60) return `${Math.floor(seconds)}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m`;
  return `${Math.floor(seconds / 3600)}h`;
}

// A wall-clock time (seconds since the epoch) as HH:MM:SS, local time.
export function clock(seconds) {
  const d = new Date(seconds * 1000);
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, "0")).join(":");
}

// The fleet governor's figures (the gateway's "governor" frame) in one line: its pause and
// when it resumes, the effective concurrency, what runs and waits, the budget spent.
export function governorLine(g) {
  const parts = [];
  if (g.paused) parts.push(g.resumes_at ? `paused: rate limit, resumes ${clock(g.resumes_at)}` : "paused: rate limit");
  if (g.degraded) parts.push("starts wait: the shared state cannot be read");
  parts.push(`concurrency ${g.limit}/${g.max_live}`);
  parts.push(`${g.cluster_running ?? g.running} running`);
  if (g.asking) parts.push(`${g.asking} asking a person`);
  if (g.waiting) parts.push(`${g.waiting} waiting`);
  if (g.budget_usd !== null && g.budget_usd !== undefined) parts.push(`spent ${money(g.spent_usd)} of ${money(g.budget_usd)}`);
  return parts.join(" · ");
}
