// The claude-trio web console: the sessions of a gateway, the requests waiting for an answer
// across them, and one session's stream. Speaks the gateway's websocket protocol; renders
// every string with textContent (render.js).

import { age, diffView, el, governorLine, isEdit, json, money } from "./render.js";
import { Connection } from "./wire.js";

const TOKEN_KEY = "claude-trio-token";
const $ = (id) => document.getElementById(id);

const state = {
  conn: null,
  sessions: new Map(), // id -> session record
  inbox: new Map(), // "session\nrequest" -> InboxItem
  selected: null,
  openedBy: new Set(), // ids of our own "open" ops: select the session they create
  answers: new Map(), // request key -> {question: label} (questions answered so far)
  admin: false, // the principal sees every session: the list shows their principals
};

function record(id) {
  let s = state.sessions.get(id);
  if (!s) {
    s = { id, info: null, lastSeq: 0, events: [], terminal: null, model: null, turns: 0, attached: false };
    state.sessions.set(id, s);
  }
  return s;
}

// ---- login --------------------------------------------------------------------------------

function readToken() {
  const hash = new URLSearchParams(location.hash.slice(1));
  const fromHash = hash.get("token");
  if (fromHash) {
    sessionStorage.setItem(TOKEN_KEY, fromHash);
    history.replaceState(null, "", location.pathname); // the token leaves the address bar
    return fromHash;
  }
  return sessionStorage.getItem(TOKEN_KEY);
}

function showLogin(message) {
  $("main").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  $("status").textContent = "not connected";
}

$("login").addEventListener("submit", (e) => {
  e.preventDefault();
  const token = $("login-token").value.trim();
  if (!token) return;
  sessionStorage.setItem(TOKEN_KEY, token);
  $("login-token").value = "";
  connect(token);
});

// ---- the connection -----------------------------------------------------------------------

function connect(token) {
  if (state.conn) state.conn.stop();
  $("login").hidden = true;
  $("main").hidden = false;
  $("status").textContent = "connecting";
  const conn = new Connection(token, {
    onopen() {
      $("status").textContent = "connected";
      conn.send("hello");
      conn.send("inbox", { follow: true });
      conn.send("governor", { follow: true });
      conn.send("list");
      for (const s of state.sessions.values()) attach(s);
    },
    onframe: onFrame,
    onclose(authFailed) {
      for (const s of state.sessions.values()) s.attached = false;
      if (authFailed) {
        sessionStorage.removeItem(TOKEN_KEY);
        state.conn.stop();
        showLogin("The server refused this token.");
      } else {
        $("status").textContent = "reconnecting";
      }
    },
  });
  state.conn = conn;
  conn.start();
}

function attach(s) {
  // Exact resume: the events after the last one held (all of them the first time).
  if (state.conn.send("attach", { session: s.id, last_seq: s.lastSeq || null })) s.attached = true;
}

function onFrame(frame) {
  switch (frame.type) {
    case "sessions":
      for (const info of frame.sessions) {
        const s = record(info.session);
        s.info = info;
        if (!s.attached) attach(s);
      }
      break;
    case "opened": {
      const s = record(frame.session);
      if (!s.attached) attach(s);
      if (state.openedBy.delete(frame.id)) select(frame.session);
      state.conn.send("list");
      break;
    }
    case "continued":
      record(frame.session).terminal = null;
      state.conn.send("list");
      break;
    case "event":
      onEvent(record(frame.session), frame.event);
      break;
    case "resync_required": {
      // The events after our last seq are gone from the server's buffer: take what it has.
      const s = record(frame.session);
      s.events = [];
      s.lastSeq = 0;
      if (state.selected === s.id) redrawStream();
      attach(s);
      break;
    }
    case "inbox":
      state.inbox.clear();
      for (const item of frame.items) state.inbox.set(key(item.session, item.request.request_id), item);
      break;
    case "inbox_arrived":
      state.inbox.set(key(frame.item.session, frame.item.request.request_id), frame.item);
      if (!state.sessions.has(frame.item.session)) state.conn.send("list");
      break;
    case "inbox_resolved":
      state.inbox.delete(key(frame.session, frame.request));
      state.answers.delete(key(frame.session, frame.request));
      break;
    case "governor": {
      // The server's fleet governor, pushed as it changes (none: the line is hidden).
      const line = $("governor");
      line.hidden = frame.governor === null;
      line.textContent = frame.governor === null ? "" : governorLine(frame.governor);
      // Why it is as it is: the governor's latest notice, on hover.
      line.title = frame.governor?.last_notice ? `latest: ${frame.governor.last_notice}` : "";
      break;
    }
    case "hello":
      state.admin = frame.admin === true;
      document.body.classList.toggle("admin", state.admin);
      break;
    case "error":
      $("status").textContent = `error: ${frame.message}`;
      break;
    default:
      break;
  }
  scheduleLists();
}

const key = (session, request) => `${session}\n${request}`;

function onEvent(s, ev) {
  if (typeof ev.seq === "number") {
    if (ev.seq <= s.lastSeq) return; // already held (a replay overlapping what we have)
    s.lastSeq = ev.seq;
  }
  s.events.push(ev);
  switch (ev.kind) {
    case "adapter_ready":
      s.terminal = null;
      if (ev.model) s.model = ev.model;
      break;
    case "turn_started":
      s.terminal = null;
      s.turns += 1;
      if (ev.model) s.model = ev.model;
      break;
    case "result":
      if (ev.final) s.terminal = terminalOf(ev.outcome);
      break;
    case "aborted":
      s.terminal = "aborted";
      break;
    case "error":
      if (ev.fatal) s.terminal = "failed";
      break;
    default:
      break;
  }
  if (state.selected === s.id) appendEvent($("stream"), ev, streamIndex);
}

function terminalOf(outcome) {
  if (outcome === "aborted" || outcome === "closed" || outcome === "run_timeout" || outcome === "idle_timeout") return "aborted";
  if (outcome === "failed" || outcome === "api_error") return "failed";
  return "ended";
}

function stateOf(s) {
  if (s.terminal) return s.terminal;
  const info = s.info;
  if (info && info.state === "waiting") return "waiting";
  for (const item of state.inbox.values()) if (item.session === s.id) return "needs_input";
  if (info && info.state === "ended") return "ended";
  return "running";
}

const ORDER = { needs_input: 0, running: 1, waiting: 2, failed: 3, aborted: 4, ended: 5 };

// ---- the lists ----------------------------------------------------------------------------

// The lists are drawn at most every LIST_MS, whatever the rate of frames (twenty sessions
// streaming send a thousand a second; each would sort and touch every row).
const LIST_MS = 100;
let listsScheduled = false;
function scheduleLists() {
  if (listsScheduled) return;
  listsScheduled = true;
  setTimeout(() => {
    listsScheduled = false;
    renderLists();
  }, LIST_MS);
}

function renderLists() {
  renderSessions();
  renderInbox();
  renderControls();
}

const rowNodes = new Map(); // session id -> <tr>, kept (updated in place) while it is listed
const itemNodes = new Map(); // request key -> <li>, kept until the request is resolved

function renderSessions() {
  const now = Date.now() / 1000;
  const rows = [...state.sessions.values()]
    .filter((s) => s.info)
    .map((s) => ({ s, st: stateOf(s) }))
    .sort((a, b) => ORDER[a.st] - ORDER[b.st] || b.s.info.created_at - a.s.info.created_at);
  const body = $("session-rows");
  let index = 0;
  for (const { s, st } of rows) {
    const usage = s.info.usage || {};
    const tokens = (usage.input_tokens || 0) + (usage.output_tokens || 0);
    let tr = rowNodes.get(s.id);
    if (!tr) {
      tr = el("tr", { testid: "session-row", "data-session-id": s.id });
      for (let i = 0; i < 8; i++) tr.append(el("td"));
      tr.cells[2].dataset.testid = "session-principal";
      tr.cells[2].className = "principal";
      tr.cells[6].dataset.testid = "session-cost";
      tr.addEventListener("click", () => select(s.id));
      rowNodes.set(s.id, tr);
    }
    tr.dataset.state = st;
    tr.dataset.lastSeq = String(s.lastSeq);
    tr.className = s.id === state.selected ? "selected" : "";
    const cells = [st.replace("_", " "), s.info.label ?? s.id.slice(0, 8), s.info.owner ?? "", s.model ?? "", s.turns, tokens, money(usage.cost_usd), age(now - s.info.created_at)];
    cells.forEach((text, i) => {
      if (tr.cells[i].textContent !== String(text)) tr.cells[i].textContent = String(text);
    });
    tr.cells[1].title = s.id;
    placeAt(body, index++, tr); // into its sorted place
  }
}

// Put node at position index of parent, touching the page only when it is not there already:
// moving a node takes the focus (and the keys being typed) from a field inside it.
function placeAt(parent, index, node) {
  const here = parent.children[index] ?? null;
  if (here !== node) parent.insertBefore(node, here);
}

function renderInbox() {
  const items = [...state.inbox.values()].sort((a, b) => a.asked_at - b.asked_at);
  $("inbox-count").textContent = String(items.length);
  const list = $("inbox");
  // What was answered leaves first, so the items after it are already in their places.
  const wanted = new Set(items.map((item) => key(item.session, item.request.request_id)));
  for (const [k, li] of itemNodes) {
    if (!wanted.has(k)) {
      li.remove();
      itemNodes.delete(k);
    }
  }
  let index = 0;
  for (const item of items) {
    const k = key(item.session, item.request.request_id);
    let li = itemNodes.get(k);
    if (!li) itemNodes.set(k, (li = approvalView(item)));
    placeAt(list, index++, li);
  }
}

function approvalView(item) {
  const request = item.request;
  const k = key(item.session, request.request_id);
  const li = el("li", {
    testid: "approval",
    "data-request-id": request.request_id,
    "data-session-id": item.session,
  });
  const who = item.label ?? item.session.slice(0, 8);
  const answer = (value) => {
    for (const b of li.querySelectorAll("button")) b.disabled = true;
    state.conn.send("answer", { session: item.session, request: request.request_id, answer: value });
  };
  if (request.source === "tool_permission") {
    li.append(el("div", { text: `${who}: allow ${request.tool_name ?? "a tool"}?` }));
    if (isEdit(request.tool_name)) li.append(diffView(request.tool_name, request.tool_input));
    else li.append(el("pre", { text: json(request.tool_input) }));
    const button = (testid, label, value) => {
      const b = el("button", { testid, type: "button", text: label });
      b.addEventListener("click", () => answer(value));
      return b;
    };
    li.append(
      button("approve", "Approve", { decision: "allow" }),
      button("deny", "Deny", { decision: "deny", message: "denied from the console" }),
      button("always", "Always", { decision: "always" }),
      editView(request, answer),
    );
  } else if (request.questions && request.questions.length) {
    li.append(el("div", { text: `${who} asks:` }));
    const chosen = state.answers.get(k) ?? {};
    state.answers.set(k, chosen);
    const answered = () => {
      if (request.questions.every((x) => x.question in chosen)) answer(chosen);
    };
    for (const q of request.questions) {
      const box = el("div", { testid: "question" }, el("div", { text: q.question }));
      const labels = (q.options ?? []).map((o) => String(typeof o === "string" ? o : o?.label));
      if (q.multi_select) {
        // Several options may be chosen: each button toggles, "Send choices" answers.
        const picked = new Set();
        const buttons = labels.map((label) => {
          const b = el("button", { testid: "answer-option", type: "button", text: label });
          b.setAttribute("aria-pressed", "false");
          b.addEventListener("click", () => {
            if (picked.has(label)) picked.delete(label);
            else picked.add(label);
            b.setAttribute("aria-pressed", String(picked.has(label)));
            done.disabled = picked.size === 0;
          });
          return b;
        });
        const done = el("button", {
          testid: "answer-done",
          type: "button",
          text: "Send choices",
          disabled: true,
        });
        done.addEventListener("click", () => {
          chosen[q.question] = labels.filter((label) => picked.has(label));
          for (const b of [...buttons, done]) b.disabled = true;
          answered();
        });
        box.append(...buttons, done);
      } else {
        for (const label of labels) {
          const b = el("button", { testid: "answer-option", type: "button", text: label });
          b.addEventListener("click", () => {
            chosen[q.question] = label;
            b.disabled = true;
            answered();
          });
          box.append(b);
        }
      }
      li.append(box);
    }
  } else {
    li.append(el("div", { text: `${request.server_name ?? who} asks: ${request.message ?? "a request"}` }));
    li.append(elicitationForm(request.requested_schema, answer));
  }
  return li;
}

// Approve with an edited tool input: the input as JSON to change, sent with the allow answer.
function editView(request, answer) {
  const input = el("textarea", { testid: "edit-input", cls: "edit", rows: "6" });
  input.value = json(request.tool_input ?? {});
  const problem = el("span", { testid: "edit-error", cls: "error" });
  const submit = el("button", { testid: "edit-submit", type: "button", text: "Approve edited input" });
  submit.addEventListener("click", () => {
    let value;
    try {
      value = JSON.parse(input.value);
    } catch (err) {
      problem.textContent = `not JSON: ${err.message}`;
      return;
    }
    if (!value || typeof value !== "object" || Array.isArray(value)) {
      problem.textContent = "the tool input is a JSON object ({...})";
      return;
    }
    answer({ decision: "allow", input: value });
  });
  return el("details", { cls: "edit" }, el("summary", { text: "Edit input" }), input, submit, problem);
}

// An MCP server's form (its requested_schema): one field per property; accept sends the
// values (numbers and booleans as such), decline sends none.
function elicitationForm(schema, answer) {
  const box = el("div", { cls: "elicitation" });
  const properties = schema && typeof schema.properties === "object" && schema.properties ? schema.properties : {};
  const fields = [];
  for (const [name, spec] of Object.entries(properties)) {
    const type = spec && typeof spec === "object" ? spec.type : undefined;
    const field = el("input", { testid: "elicit-field", "data-name": name, type: type === "boolean" ? "checkbox" : "text" });
    const title = spec && typeof spec.title === "string" ? spec.title : name;
    box.append(el("label", {}, `${title} `, field));
    fields.push([name, type, field]);
  }
  const problem = el("span", { testid: "elicit-error", cls: "error" });
  const accept = el("button", { testid: "elicit-accept", type: "button", text: "Send" });
  accept.addEventListener("click", () => {
    const content = {};
    for (const [name, type, field] of fields) {
      if (type === "boolean") content[name] = field.checked;
      else if (type === "number" || type === "integer") {
        const n = Number(field.value);
        if (field.value.trim() === "" || !Number.isFinite(n) || (type === "integer" && !Number.isInteger(n))) {
          problem.textContent = `${name}: a ${type}`;
          return;
        }
        content[name] = n;
      } else content[name] = field.value;
    }
    answer({ action: "accept", content });
  });
  const decline = el("button", { testid: "elicit-decline", type: "button", text: "Decline" });
  decline.addEventListener("click", () => answer({ action: "decline" }));
  box.append(accept, decline, problem);
  return box;
}

function renderControls() {
  const s = state.selected && state.sessions.get(state.selected);
  const st = s ? stateOf(s) : null;
  $("abort").disabled = !s || !["running", "needs_input", "waiting"].includes(st);
  $("push-send").disabled = !s;
  $("selected-label").textContent = s ? (s.info?.label ?? s.id) : "select a session";
}

// ---- one session's stream -----------------------------------------------------------------

let streamIndex = new Map();

function select(id) {
  state.selected = id;
  redrawStream();
  renderLists(); // at once: the buttons follow the click
}

function redrawStream() {
  const box = $("stream");
  box.replaceChildren();
  streamIndex = new Map();
  const s = state.sessions.get(state.selected);
  if (!s) return;
  for (const ev of s.events) appendEvent(box, ev, streamIndex);
}

function appendEvent(box, ev, index) {
  const s = state.sessions.get(state.selected);
  box.dataset.lastSeq = String(s ? s.lastSeq : 0);
  box.dataset.sessionId = state.selected ?? "";
  const add = (node, parent = null) => {
    node.dataset.seq = String(ev.seq);
    let into = parent ?? box;
    if (ev.is_subagent) {
      // A subagent's events nest in its box, under the tool call that started it.
      node.classList.add("sub");
      into = parent ?? index.get(`sub ${ev.subagent_task_id}`) ?? box;
    }
    into.append(node);
    return node;
  };
  switch (ev.kind) {
    case "adapter_ready": // an execution's prompt (a new session's, a continue's)
      if (ev.prompt) add(el("div", { cls: "user prompt", text: `> ${ev.prompt}` }));
      break;
    case "user_message":
      add(el("div", { cls: "user", text: `> ${ev.text}` }));
      break;
    case "text_delta": {
      const k = `text ${ev.message_id} ${ev.index}`;
      let node = index.get(k);
      if (!node) index.set(k, (node = add(el("div", { cls: "text" }))));
      node.textContent += ev.text;
      index.set(`said ${ev.message_id}`, true);
      break;
    }
    case "thinking": {
      const k = `thinking ${ev.message_id} ${ev.index}`;
      let pre = index.get(k);
      if (!pre) {
        pre = el("pre");
        add(el("details", { cls: "thinking" }, el("summary", { text: "thinking" }), pre));
        index.set(k, pre);
      }
      pre.textContent += ev.text;
      break;
    }
    case "assistant_message": {
      const m = ev.message;
      if (m?.role !== "assistant" || index.get(`said ${m.message_id}`)) break;
      for (const block of m.content ?? []) {
        if (block.type === "text") add(el("div", { cls: "text", text: block.text }));
      }
      break;
    }
    case "tool_use": {
      const node = add(el("div", { cls: "tool", "data-tool-use-id": ev.tool_use_id }, el("span", { cls: "name", text: ev.name })));
      node.append(isEdit(ev.name) ? diffView(ev.name, ev.input) : el("pre", { text: json(ev.input) }));
      index.set(`tool ${ev.tool_use_id}`, node);
      break;
    }
    case "tool_result": {
      const text = typeof ev.content === "string" ? ev.content : json(ev.content);
      const result = el("pre", { cls: ev.is_error ? "result error" : "result", text });
      const node = index.get(`tool ${ev.tool_use_id}`);
      if (node) node.append(result);
      else add(result);
      break;
    }
    case "subagent_started": {
      const head = el("div", { cls: "name", text: `subagent: ${ev.description}` });
      const nest = el("div", { cls: "subagent", testid: "subagent", "data-task-id": ev.task_id }, head);
      add(nest, index.get(`tool ${ev.tool_use_id}`) ?? box);
      index.set(`sub ${ev.task_id}`, nest);
      break;
    }
    case "subagent_completed": {
      const nest = index.get(`sub ${ev.task_id}`);
      if (nest) add(el("div", { cls: "end", text: `subagent ${ev.status}` }), nest);
      break;
    }
    case "todo_list_updated":
      add(
        el(
          "ul",
          { cls: "todos" },
          ...(ev.items ?? []).map((t) =>
            el("li", { text: `${t.status === "completed" ? "[x]" : t.status === "in_progress" ? "[~]" : "[ ]"} ${t.content}` }),
          ),
        ),
      );
      break;
    case "user_input_resolved": {
      const decision = ev.answer && typeof ev.answer === "object" ? ev.answer.decision : undefined;
      add(el("div", { cls: "end", text: `answered: ${decision ?? ev.outcome}` }));
      break;
    }
    case "result":
      if (ev.final) add(el("div", { cls: "end", text: `ended: ${ev.outcome} (${money(ev.execution_usage?.cost_usd)})` }));
      break;
    case "aborted":
      add(el("div", { cls: "end", text: `aborted: ${ev.reason}` }));
      break;
    case "error":
      add(el("div", { cls: "end error", text: `error: ${ev.message}` }));
      break;
    default:
      break;
  }
}

// ---- actions ------------------------------------------------------------------------------

$("push").addEventListener("submit", (e) => {
  e.preventDefault();
  const s = state.sessions.get(state.selected);
  const text = $("push-input").value;
  if (!s || !text.trim()) return;
  const st = stateOf(s);
  const sent = ["ended", "aborted", "failed"].includes(st)
    ? state.conn.send("continue", { session: s.id, prompt: text })
    : state.conn.send("push", { session: s.id, text });
  if (!sent) return notSent("the message was not sent (it is kept in the box)");
  $("push-input").value = "";
});

$("abort").addEventListener("click", () => {
  if (state.selected && !state.conn.send("abort", { session: state.selected })) {
    notSent("the abort was not sent");
  }
});

// A send while the connection is down reaches nobody: say so, and keep what was typed.
function notSent(what) {
  $("status").textContent = `not connected: ${what}; try again once connected`;
}

$("new").addEventListener("submit", (e) => {
  e.preventDefault();
  const prompt = $("new-prompt").value;
  if (!prompt.trim()) return;
  const id = state.conn.send("open", {
    params: { prompt, permission_mode: $("new-mode").value },
    label: prompt.split("\n")[0].slice(0, 40),
  });
  if (!id) return notSent("the session was not opened (the prompt is kept in the box)");
  state.openedBy.add(id);
  $("new-prompt").value = "";
});

setInterval(() => {
  if (state.conn && state.conn.ws && state.conn.ws.readyState === WebSocket.OPEN) state.conn.send("list");
}, 2000);

const token = readToken();
if (token) connect(token);
else showLogin("");
