// The page's entry: the token, the session list, and the chat of the
// session chosen, kept live by its stream.
import { Api, ApiError, newRequestId } from "./api.js";
import { Transcript } from "./transcript.js";
import { Markdown } from "./markdown.js";
import { Pricing, line as usageLine } from "./usage.js";
import { SessionList } from "./sessions.js";
import { Follower } from "./follow.js";
import { words } from "./words.js";
import { Jobs, showGoal } from "./jobs.js";

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = "dsh-token";

let api = null;
let view = null; // the session shown: {id, open, agent, stop: AbortController}
let pricing = new Pricing(null);

// A rendering changes a message's height: the view follows that too.
const markdown = new Markdown(async (texts) => (await api.call("POST", "/v1/render", { texts })).html, () => follower.changed(), $("log"));

const transcript = new Transcript(
  { log: $("log"), approvals: $("approvals"), queue: $("queue") },
  { answer, changed, attachment, markdown, pricing: () => pricing, agent: () => (view ? view.agent : ""), rewind, redo, goal, jobs: () => jobs.soon() },
);

// sessionCall sends one request about the session shown.
function sessionCall(method, path, body) {
  if (!view) return Promise.reject(new Error("no session is shown"));
  return api.call(method, `/v1/sessions/${encodeURIComponent(view.id)}/${path}`, body);
}

// rewind and redo answer with the event, which the stream brings too:
// the transcript shows it from there, once.
function rewind(turn, opts) {
  return sessionCall("POST", "rewind", { to: String(turn), ...opts });
}

function redo() {
  return sessionCall("POST", "rewind", { redo: true });
}

// goal shows the latest goal event; older ones, read later for a long
// session, do not replace it.
let goalSeq = 0;
function goal(ev) {
  if (ev.seq < goalSeq) return;
  goalSeq = ev.seq;
  showGoal($("goal"), ev.goal, pricing.currency);
}

const jobs = new Jobs(
  { box: $("jobs"), list: $("job-list"), count: $("job-count") },
  {
    list: async () => (await sessionCall("GET", "jobs")).jobs,
    kill: (id) => sessionCall("POST", `jobs/${encodeURIComponent(id)}/kill`, {}),
    failed: (e, what) => report(e, what),
  },
);

const follower = new Follower($("log"), $("jump"));

const sessions = new SessionList(
  { list: $("session-list"), more: $("more-sessions"), search: $("search"), count: $("session-count") },
  { open: (id) => openSession(id), current: () => (view ? view.id : ""), waiting: (id) => !!view && view.id === id && transcript.questions.size > 0 },
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
    b.className = "secondary small";
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

function setConn(text, state) {
  $("conn").textContent = text;
  $("conn").dataset.state = state || "";
}

// banner says what became of the connection, in words: lost and
// reconnecting, or the server gone.
function banner(text, state) {
  $("banner").hidden = !text;
  $("banner").dataset.state = state || "";
  $("banner-text").textContent = text || "";
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
  else showError(`${what}: ${words(e)}`);
}

// Narrow screens show the session list as a drawer over the chat.
const narrow = matchMedia("(max-width: 44rem)");

function drawer(open) {
  $("app").classList.toggle("drawer-open", open);
  $("drawer-toggle").setAttribute("aria-expanded", String(open));
  $("scrim").hidden = !(open && narrow.matches);
}

async function connect(token) {
  api = new Api(token);
  let agents;
  // The price table comes with the agents, in parallel: an older server
  // has none, and shows tokens without cost.
  const prices = api.call("GET", "/v1/pricing").catch(() => null);
  try {
    agents = await api.call("GET", "/v1/agents");
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return refused(e);
    return report(e, "Could not reach dsh serve");
  }
  pricing = new Pricing(await prices);
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
  const fs = $("presets");
  for (const b of fs.querySelectorAll("label")) b.remove();
  for (const p of agents.presets || []) {
    const l = document.createElement("label");
    l.className = "preset";
    const c = document.createElement("input");
    c.type = "checkbox";
    c.name = "preset";
    c.value = p;
    l.append(c, document.createTextNode(` ${p}`));
    fs.append(l);
  }
  // The list and the session shown load side by side: a session's first
  // paint does not wait for a list of thousands.
  const listing = listSessions();
  const id = new URLSearchParams(location.hash.slice(1)).get("session");
  if (id) await openSession(id);
  else drawer(true);
  await listing;
}

async function listSessions() {
  let list;
  let titles = {};
  try {
    const [l, t] = await Promise.all([api.call("GET", "/v1/sessions"), api.call("GET", "/v1/titles").catch(() => ({ titles: {} }))]);
    list = l;
    titles = t.titles || {};
  } catch (e) {
    return report(e, "Could not list the sessions");
  }
  sessions.set(list.sessions || [], titles);
  if (view) showTitle();
}

function showTitle() {
  const s = sessions.find(view.id);
  $("chat-title").textContent = s ? sessions.titleOf(s) : view.id;
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
  banner("");
  view = { id, open: s.open, agent: s.agent, stop: new AbortController() };
  const params = new URLSearchParams(location.hash.slice(1));
  params.set("session", id);
  setFragment(params);
  showTitle();
  if (!sessions.find(id)) $("chat-title").textContent = s.title || s.id;
  $("empty").hidden = true;
  $("resume").hidden = s.open;
  $("close").hidden = !s.open;
  $("rename").hidden = false;
  $("delete").hidden = false;
  $("composer").hidden = !s.open;
  sessions.mark(id);
  drawer(false);
  transcript.reset();
  goalSeq = 0;
  showGoal($("goal"), null);
  jobs.reset(s.open);
  follower.reset();
  showTurnState();
  const v = view;
  if (s.last_seq > TAIL * 1.5) await showTail(v, s.last_seq);
  if (v !== view) return;
  if (s.open) {
    follow(v);
    $("prompt").focus({ preventScroll: true });
  } else await readHistory(v);
  if (transcript.firstSeq > 1) loadOlder(v);
}

// A long session shows its last TAIL events first, then the older ones a
// chunk at a time while the page is idle: the end of a conversation of
// thousands of messages is on screen at once, and no chunk holds the page
// long enough to make it stutter.
const TAIL = 240;
const OLDER = 300;

// events reads the session's durable events with after < seq <= upto.
async function events(v, after, upto) {
  const out = [];
  while (after < upto) {
    const page = await api.call("GET", `/v1/sessions/${encodeURIComponent(v.id)}/events?after=${after}&limit=${Math.min(1000, upto - after)}`);
    const evs = (page.events || []).filter((e) => e.seq <= upto);
    if (evs.length === 0) break;
    out.push(...evs);
    after = evs[evs.length - 1].seq;
  }
  return out;
}

// fromTurnStart drops the events before the first turn/start, so that a
// part of the history holds whole turns (a tool's result with its call).
function fromTurnStart(evs) {
  const i = evs.findIndex((e) => e.type === "turn/start");
  return i > 0 ? evs.slice(i) : evs;
}

async function showTail(v, last) {
  let evs;
  try {
    evs = fromTurnStart(await events(v, last - TAIL, last));
  } catch (e) {
    return report(e, "Could not read the history");
  }
  if (v !== view || evs.length === 0) return;
  transcript.startAt(evs[0].seq);
  for (const ev of evs) transcript.apply("event", { event: ev });
}

const idle = () => new Promise((resolve) => (window.requestIdleCallback ? requestIdleCallback(resolve, { timeout: 300 }) : setTimeout(resolve, 0)));

async function loadOlder(v) {
  while (v === view && transcript.firstSeq > 1) {
    await idle();
    const end = transcript.firstSeq;
    const after = Math.max(0, end - 1 - OLDER);
    let evs;
    try {
      evs = await events(v, after, end - 1);
    } catch (e) {
      return report(e, "Could not read the earlier history");
    }
    if (v !== view) return;
    if (after > 0) evs = fromTurnStart(evs);
    if (evs.length === 0) return;
    transcript.prepend(evs);
  }
}

// readHistory shows a session that is not open: its events, page by page.
async function readHistory(v) {
  setConn("history (not open)", "history");
  for (;;) {
    let page;
    try {
      page = await api.call("GET", `/v1/sessions/${encodeURIComponent(v.id)}/events?after=${transcript.lastSeq}&limit=1000`);
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
  retryNow = () => { clearTimeout(t); resolve(); };
});
let retryNow = () => {};

// serverUp tells a dropped stream (the server answers) from a server that
// is gone (nothing answers at all).
async function serverUp() {
  try {
    const res = await fetch("/v1/health", { cache: "no-store" });
    return res.ok;
  } catch {
    return false;
  }
}

// follow keeps the session's stream open: after any drop it reconnects
// with Last-Event-ID, backing off up to 10 s, and the transcript skips
// what it already holds.
async function follow(v) {
  const signal = v.stop.signal;
  let delay = 0;
  while (!signal.aborted) {
    if (delay > 0) {
      const up = await serverUp();
      if (signal.aborted) return;
      if (up) {
        setConn("reconnecting", "reconnecting");
        banner(`Connection lost; reconnecting in ${(delay / 1000).toFixed(1)} s. Nothing is lost: the page resumes where it stopped.`, "reconnecting");
      } else {
        setConn("server gone", "gone");
        banner(`The server does not answer (stopped or unreachable); trying again in ${(delay / 1000).toFixed(1)} s.`, "gone");
      }
      await sleep(delay, signal);
      if (signal.aborted) return;
    }
    setConn("connecting…", "connecting");
    const after = transcript.lastSeq || transcript.lastNotice ? transcript.lastEventId() : "";
    try {
      await api.stream(v.id, after, signal, (msg) => {
        if (msg.event === "ready") {
          // The server sends the questions still pending after its
          // backlog: drop the ones shown before the drop.
          transcript.clearQuestions();
          delay = 0;
          setConn("live", "live");
          banner("");
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
          setConn("not live", "closed");
          banner(`This session's stream ended: ${words(e)}`, "closed");
          return;
        }
      }
    }
    if (signal.aborted) return;
    delay = Math.min(delay ? delay * 2 : 250, 10000);
  }
}

let shownRunning = false;
let shownWaiting = false;
let relistTimer = 0;

// relist refreshes the session list (it says which sessions run) once a
// burst of turn starts and ends is over, such as a history being read.
function relist() {
  clearTimeout(relistTimer);
  relistTimer = setTimeout(listSessions, 300);
}

function changed() {
  showTurnState();
  follower.changed();
}

function showTurnState() {
  const running = transcript.running;
  const waiting = transcript.questions.size > 0;
  if ((running !== shownRunning || waiting !== shownWaiting) && api) {
    shownRunning = running;
    shownWaiting = waiting;
    relist();
  }
  // Called for every chunk of a stream: write only what changed.
  const t = transcript.session;
  const shown = [waiting, running, t.steps, t.input, t.output].join();
  if (shown === lastShown) return;
  lastShown = shown;
  $("turn-state").textContent = waiting ? "waiting for your approval" : running ? "working…" : "";
  $("turn-state").dataset.state = waiting ? "waiting" : running ? "running" : "";
  $("steer").disabled = !running;
  $("cancel").disabled = !running;
  $("send").textContent = running ? "Queue" : "Send";
  $("session-usage").textContent = t.steps ? usageLine(t, pricing.currency) : "";
}
let lastShown = "";

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
  if (!v || !v.open || (!text && files.length === 0)) return;
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
  follower.stick();
  try {
    await post(v.id, body(requestId, text, mode, files));
    if ($("prompt").value.trim() === text) $("prompt").value = "";
  } catch (e) {
    attached = files.concat(attached);
    showAttached();
    transcript.dequeue(requestId);
    if (e instanceof ApiError && e.status !== 401) {
      $("refusal").textContent = words(e);
      $("refusal").hidden = false;
      if (e.status === 422) return;
    }
    transcript.ownRequests.delete(requestId);
    if (!(e instanceof ApiError) || e.status === 401) report(e, "The message was not sent");
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
  showTurnState();
}

async function act(path, what) {
  const v = view;
  if (!v) return;
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

// remove deletes the session shown, closing it first when it is open; the
// button asks to be pressed twice.
let deleteArmed = 0;
async function remove() {
  const v = view;
  if (!v) return;
  const b = $("delete");
  if (!deleteArmed) {
    b.textContent = "Delete for good?";
    deleteArmed = setTimeout(() => { deleteArmed = 0; b.textContent = "Delete"; }, 4000);
    return;
  }
  clearTimeout(deleteArmed);
  deleteArmed = 0;
  b.textContent = "Delete";
  stopStream();
  try {
    if (v.open) await api.call("POST", `/v1/sessions/${encodeURIComponent(v.id)}/close`, {});
    await api.call("DELETE", `/v1/sessions/${encodeURIComponent(v.id)}`);
    await api.call("POST", `/v1/sessions/${encodeURIComponent(v.id)}/title`, { title: "" }).catch(() => {});
  } catch (e) {
    report(e, "Could not delete the session");
    return openSession(v.id);
  }
  view = null;
  transcript.reset();
  goalSeq = 0;
  showGoal($("goal"), null);
  jobs.reset(false);
  const params = new URLSearchParams(location.hash.slice(1));
  params.delete("session");
  setFragment(params);
  for (const id of ["resume", "close", "rename", "delete", "composer"]) $(id).hidden = true;
  $("chat-title").textContent = "No session";
  $("empty").hidden = false;
  setConn("");
  await listSessions();
  drawer(true);
}

function startRename() {
  if (!view) return;
  $("rename-input").value = $("chat-title").textContent;
  $("rename-form").hidden = false;
  $("chat-title").hidden = true;
  $("rename-input").focus();
  $("rename-input").select();
}

function endRename() {
  $("rename-form").hidden = true;
  $("chat-title").hidden = false;
}

$("rename-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const v = view;
  try {
    await api.call("POST", `/v1/sessions/${encodeURIComponent(v.id)}/title`, { title: $("rename-input").value });
  } catch (e) {
    return report(e, "Could not rename the session");
  }
  endRename();
  await listSessions();
});

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
  const req = { agent: $("agent").value };
  const ws = $("workspace").value.trim();
  if (ws) req.workspace = ws;
  const presets = [...document.querySelectorAll("#presets input:checked")].map((c) => c.value);
  if (presets.length) req.presets = presets;
  let s;
  try {
    s = await api.call("POST", "/v1/sessions", req);
  } catch (e) {
    return report(e, "Could not create a session");
  }
  await listSessions();
  await openSession(s.id);
});

$("composer").addEventListener("submit", (ev) => {
  ev.preventDefault();
  send("followup");
});
$("prompt").addEventListener("keydown", (ev) => {
  if (ev.key !== "Enter" || ev.isComposing || ev.shiftKey) return;
  ev.preventDefault();
  send(ev.ctrlKey || ev.metaKey ? (transcript.running ? "steer" : "followup") : "followup");
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
$("delete").addEventListener("click", () => remove());
$("rename").addEventListener("click", () => startRename());
$("drawer-toggle").addEventListener("click", () => drawer(!$("app").classList.contains("drawer-open")));
$("scrim").addEventListener("click", () => drawer(false));
$("shortcuts-open").addEventListener("click", () => $("shortcuts").showModal());
$("shortcuts-close").addEventListener("click", () => $("shortcuts").close());
$("banner-retry").addEventListener("click", () => retryNow());

// typing says whether a key goes to a field rather than to a shortcut.
const typing = (t) => t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable);

document.addEventListener("keydown", (ev) => {
  if (ev.defaultPrevented || ev.isComposing) return;
  if (ev.key === "Escape") {
    if ($("shortcuts").open) return; // the dialog closes itself
    if (!$("rename-form").hidden) { endRename(); ev.preventDefault(); return; }
    if ($("app").classList.contains("drawer-open") && narrow.matches && view) { drawer(false); ev.preventDefault(); return; }
    if (transcript.running && view) { ev.preventDefault(); act("cancel", "Could not cancel the turn"); }
    return;
  }
  if (ev.altKey && (ev.key === "n" || ev.key === "N")) {
    ev.preventDefault();
    $("new-session").requestSubmit();
    return;
  }
  if (ev.altKey && (ev.key === "ArrowUp" || ev.key === "ArrowDown")) {
    const items = [...document.querySelectorAll("#session-list .session-item")];
    const at = items.findIndex((b) => b.getAttribute("aria-current") === "true");
    const next = items[ev.key === "ArrowUp" ? Math.max(0, at - 1) : Math.min(items.length - 1, at + 1)];
    if (next) { ev.preventDefault(); openSession(next.dataset.session); }
    return;
  }
  if (typing(ev.target) || ev.ctrlKey || ev.metaKey || ev.altKey) return;
  if (ev.key === "/") {
    ev.preventDefault();
    drawer(true);
    $("search").focus();
  } else if (ev.key === "?") {
    ev.preventDefault();
    $("shortcuts").showModal();
  } else if (ev.key === "End" && ev.target === $("log")) {
    ev.preventDefault();
    follower.jump();
  }
});
$("rename-input").addEventListener("keydown", (ev) => {
  if (ev.key === "Escape") { ev.preventDefault(); endRename(); }
});

const token = takeToken();
if (token) connect(token);
else askToken();
