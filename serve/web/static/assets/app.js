// The page's entry: the token, the session list, and the chat of the
// session chosen, kept live by its stream.
import { Api, ApiError, newRequestId } from "./api.js";
import { Transcript } from "./transcript.js";

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = "dsh-token";

let api = null;
let view = null; // the session shown: {id, open, stop: AbortController}

const transcript = new Transcript(
  { log: $("log"), approvals: $("approvals"), queue: $("queue") },
  { answer, changed: showTurnState, attachment },
);

// attachment fetches the bytes of a part of the session shown: with the
// token, which an <img src> could not send.
function attachment(ref) {
  return api.blob(`/v1/sessions/${encodeURIComponent(view.id)}/attachments/${encodeURIComponent(ref)}`);
}

// attached are the files the next message carries.
let attached = [];

function formatSize(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} kB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

function showAttached() {
  const ul = $("attached");
  ul.replaceChildren();
  attached.forEach((f, i) => {
    const li = document.createElement("li");
    li.className = "attached-file";
    li.textContent = `${f.name || "pasted image"} (${formatSize(f.size)}) `;
    const b = document.createElement("button");
    b.type = "button";
    b.className = "secondary";
    b.textContent = "Remove";
    b.setAttribute("aria-label", `Remove ${f.name || "pasted image"}`);
    b.addEventListener("click", () => { attached.splice(i, 1); showAttached(); });
    li.append(b);
    ul.append(li);
  });
}

function attach(files) {
  for (const f of files) attached.push(f);
  showAttached();
}

// takeToken moves a token from the URL fragment (#token=...) into this
// tab's sessionStorage and out of the address bar and history.
function takeToken() {
  const params = new URLSearchParams(location.hash.slice(1));
  const token = params.get("token");
  if (token) {
    sessionStorage.setItem(TOKEN_KEY, token);
    params.delete("token");
    setFragment(params);
  }
  return sessionStorage.getItem(TOKEN_KEY);
}

function setFragment(params) {
  const f = params.toString();
  history.replaceState(null, "", location.pathname + location.search + (f ? `#${f}` : ""));
}

function showError(text) {
  $("error").textContent = text;
  $("error").hidden = !text;
}

function setConn(text) {
  $("conn").textContent = text;
}

function askToken() {
  $("app").hidden = true;
  $("token-form").hidden = false;
  $("token-input").focus();
}

// refused handles a 401: the token is wrong or was changed.
function refused(e) {
  stopStream();
  sessionStorage.removeItem(TOKEN_KEY);
  showError(`The server refused the token: ${e.message}. Type the token dsh serve printed.`);
  setConn("not connected");
  askToken();
}

// report shows an error; a 401 asks for the token again.
function report(e, what) {
  if (e instanceof ApiError && e.status === 401) refused(e);
  else showError(`${what}: ${e.message}${e.code ? ` (${e.code})` : ""}`);
}

async function connect(token) {
  api = new Api(token);
  let agents;
  try {
    agents = await api.call("GET", "/v1/agents");
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return refused(e);
    return report(e, "Could not reach dsh serve");
  }
  showError("");
  $("token-form").hidden = true;
  $("app").hidden = false;
  const select = $("agent");
  select.replaceChildren();
  for (const a of agents.agents || []) {
    const o = document.createElement("option");
    o.value = a.id;
    o.textContent = a.model ? `${a.id} (${a.provider}/${a.model})` : `${a.id} (${a.provider})`;
    o.selected = a.id === agents.default;
    select.append(o);
  }
  await listSessions();
  const id = new URLSearchParams(location.hash.slice(1)).get("session");
  if (id) await openSession(id);
}

async function listSessions() {
  let list;
  try {
    list = await api.call("GET", "/v1/sessions");
  } catch (e) {
    return report(e, "Could not list the sessions");
  }
  const ul = $("session-list");
  ul.replaceChildren();
  for (const s of list.sessions || []) {
    const li = document.createElement("li");
    const b = document.createElement("button");
    b.type = "button";
    b.className = "session-item";
    b.dataset.session = s.id;
    if (view && view.id === s.id) {
      b.setAttribute("aria-current", "true");
      if (s.title) $("chat-title").textContent = s.title; // a new session's title is its first prompt
    }
    const title = document.createElement("span");
    title.className = "title";
    title.textContent = s.title || s.id;
    const meta = document.createElement("span");
    meta.className = "meta";
    meta.textContent = `${s.agent || "?"} · ${s.running ? "running" : s.open ? "open" : s.state}`;
    b.append(title, meta);
    b.addEventListener("click", () => openSession(s.id));
    li.append(b);
    ul.append(li);
  }
}

function stopStream() {
  if (view && view.stop) view.stop.abort();
}

// openSession shows a session: live through its stream when it is open
// here, else its history from the store with a Resume button.
async function openSession(id) {
  stopStream();
  let s;
  try {
    s = await api.call("GET", `/v1/sessions/${encodeURIComponent(id)}`);
  } catch (e) {
    return report(e, `Could not open session ${id}`);
  }
  showError("");
  hideRefusal();
  view = { id, open: s.open, stop: new AbortController() };
  const params = new URLSearchParams(location.hash.slice(1));
  params.set("session", id);
  setFragment(params);
  $("chat-title").textContent = s.title || s.id;
  $("resume").hidden = s.open;
  $("close").hidden = !s.open;
  $("composer").hidden = !s.open;
  for (const b of $("session-list").querySelectorAll("button")) {
    if (b.dataset.session === id) b.setAttribute("aria-current", "true");
    else b.removeAttribute("aria-current");
  }
  transcript.reset();
  showTurnState();
  if (s.open) follow(view);
  else await readHistory(view);
}

// readHistory shows a session that is not open: its events, page by page.
async function readHistory(v) {
  setConn("history (not open)");
  for (;;) {
    let page;
    try {
      page = await api.call("GET", `/v1/sessions/${encodeURIComponent(v.id)}/events?after=${transcript.lastSeq}&limit=500`);
    } catch (e) {
      return report(e, "Could not read the history");
    }
    if (v !== view) return;
    for (const ev of page.events || []) transcript.apply("event", { event: ev });
    if (!page.events || page.events.length === 0 || transcript.lastSeq >= page.last_seq) return;
  }
}

const sleep = (ms, signal) => new Promise((resolve) => {
  const t = setTimeout(resolve, ms);
  signal.addEventListener("abort", () => { clearTimeout(t); resolve(); }, { once: true });
});

// follow keeps the session's stream open: after any drop it reconnects
// with Last-Event-ID, backing off up to 10 s, and the transcript skips
// what it already holds.
async function follow(v) {
  const signal = v.stop.signal;
  let delay = 0;
  while (!signal.aborted) {
    if (delay > 0) {
      setConn(`disconnected; reconnecting in ${(delay / 1000).toFixed(1)} s`);
      await sleep(delay, signal);
      if (signal.aborted) return;
    }
    setConn("connecting…");
    const after = transcript.lastSeq || transcript.lastNotice ? transcript.lastEventId() : "";
    try {
      await api.stream(v.id, after, signal, (msg) => {
        if (msg.event === "ready") {
          // The server sends the questions still pending after its
          // backlog: drop the ones shown before the drop.
          transcript.clearQuestions();
          delay = 0;
          setConn("live");
          return;
        }
        let u;
        try {
          u = JSON.parse(msg.data);
        } catch {
          return;
        }
        transcript.apply(msg.event, u);
      });
    } catch (e) {
      if (signal.aborted) return;
      if (e instanceof ApiError) {
        if (e.status === 401) return refused(e);
        if (e.status === 404 || e.status === 409 || e.status === 400) {
          setConn("not live");
          return report(e, "The session's stream ended");
        }
      }
    }
    if (signal.aborted) return;
    delay = Math.min(delay ? delay * 2 : 250, 10000);
  }
}

let shownRunning = false;
let relistTimer = 0;

// relist refreshes the session list (it says which sessions run) once a
// burst of turn starts and ends is over, such as a history being read.
function relist() {
  clearTimeout(relistTimer);
  relistTimer = setTimeout(listSessions, 300);
}

function showTurnState() {
  const running = transcript.running;
  if (running !== shownRunning && api) {
    shownRunning = running;
    relist();
  }
  $("turn-state").textContent = running ? "a turn is running" : "";
  $("steer").disabled = !running;
  $("cancel").disabled = !running;
  $("send").textContent = running ? "Queue" : "Send";
}

function hideRefusal() {
  $("refusal").hidden = true;
  $("refusal").textContent = "";
}

// post sends a message; a network failure is retried with the same
// request id, which the server acknowledges once and delivers once.
async function post(id, body) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await api.call("POST", `/v1/sessions/${encodeURIComponent(id)}/messages`, body);
    } catch (e) {
      if (e instanceof ApiError || attempt >= 3) throw e;
      await new Promise((r) => setTimeout(r, 300 * 2 ** attempt));
    }
  }
}

// body is a message as JSON, or as multipart/form-data when it carries
// files: a retry sends the same form again.
function body(requestId, text, mode, files) {
  if (files.length === 0) return { request_id: requestId, content: text, mode };
  const form = new FormData();
  form.append("request_id", requestId);
  form.append("content", text);
  form.append("mode", mode);
  for (const f of files) form.append("file", f, f.name || "pasted-image");
  return form;
}

async function send(mode) {
  const v = view;
  const text = $("prompt").value.trim();
  const files = attached;
  if (!v || (!text && files.length === 0)) return;
  // The files leave the composer with the message, and come back if it
  // is not taken.
  attached = [];
  showAttached();
  hideRefusal();
  const requestId = newRequestId();
  transcript.ownRequests.add(requestId);
  const queued = transcript.running;
  const label = files.length ? `${text}${text ? " " : ""}(+${files.length} file${files.length > 1 ? "s" : ""})` : text;
  if (queued) transcript.queue(requestId, label, mode === "steer");
  try {
    await post(v.id, body(requestId, text, mode, files));
    if ($("prompt").value.trim() === text) $("prompt").value = "";
  } catch (e) {
    attached = files.concat(attached);
    showAttached();
    transcript.dequeue(requestId);
    if (e instanceof ApiError && e.status === 422) {
      $("refusal").textContent = `Message refused: ${e.message}`;
      $("refusal").hidden = false;
      return;
    }
    transcript.ownRequests.delete(requestId);
    report(e, "The message was not sent");
  }
}

async function answer(q, choice) {
  const v = view;
  try {
    await api.call("POST", `/v1/sessions/${encodeURIComponent(v.id)}/approvals/${q.id}`, { choice });
    transcript.settle(q.id, { answer: { choice } });
  } catch (e) {
    if (e instanceof ApiError && (e.status === 404 || e.status === 409)) {
      transcript.settle(q.id);
      return report(e, "The question was already settled");
    }
    transcript.enableQuestion(q.id);
    report(e, "The answer was not taken");
  }
}

async function act(path, what) {
  const v = view;
  // A closing session ends its stream: stop it first, so that the end
  // does not read as a drop to reconnect from.
  if (path === "close") stopStream();
  try {
    await api.call("POST", `/v1/sessions/${encodeURIComponent(v.id)}/${path}`, {});
  } catch (e) {
    if (path === "close") await openSession(v.id); // live again
    return report(e, what);
  }
  if (path !== "cancel") {
    await openSession(v.id);
    await listSessions();
  }
}

$("token-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const token = $("token-input").value.trim();
  if (!token) return;
  sessionStorage.setItem(TOKEN_KEY, token);
  $("token-input").value = "";
  connect(token);
});

$("new-session").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  let s;
  try {
    s = await api.call("POST", "/v1/sessions", { agent: $("agent").value });
  } catch (e) {
    return report(e, "Could not create a session");
  }
  await openSession(s.id);
  await listSessions();
});

$("composer").addEventListener("submit", (ev) => {
  ev.preventDefault();
  send("followup");
});
$("prompt").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) {
    ev.preventDefault();
    send("followup");
  }
});
$("steer").addEventListener("click", () => send("steer"));
$("attach").addEventListener("change", (ev) => {
  attach(ev.target.files);
  ev.target.value = "";
});
// A pasted image (a screenshot) is attached; pasted text stays text.
$("prompt").addEventListener("paste", (ev) => {
  const files = [...(ev.clipboardData ? ev.clipboardData.files : [])];
  if (files.length === 0) return;
  ev.preventDefault();
  attach(files);
});
$("composer").addEventListener("dragover", (ev) => {
  if (ev.dataTransfer && [...ev.dataTransfer.types].includes("Files")) ev.preventDefault();
});
$("composer").addEventListener("drop", (ev) => {
  if (!ev.dataTransfer || ev.dataTransfer.files.length === 0) return;
  ev.preventDefault();
  attach(ev.dataTransfer.files);
});
$("cancel").addEventListener("click", () => act("cancel", "Could not cancel the turn"));
$("resume").addEventListener("click", () => act("resume", "Could not resume the session"));
$("close").addEventListener("click", () => act("close", "Could not close the session"));
$("refresh").addEventListener("click", () => listSessions());

const token = takeToken();
if (token) connect(token);
else askToken();
