// Transcript is one session's conversation as the page shows it, built from
// the stream's updates (services/sessions/live): durable events by seq,
// the message in flight from a snapshot and its chunks, notices, and
// approval questions. Every update may come again after a reconnect; the
// transcript ignores what it already holds, so nothing shows twice. A
// message's images show as images and its files as downloads, their bytes
// fetched through hooks.attachment(ref) (with the token) and shown from
// blob: URLs, which reset releases. Answers are Markdown, rendered by
// hooks.markdown; tool calls are folded rows (tools.js); every message
// has its time, every step its tokens and cost, every turn its duration.
// All of it comes from the events, never from the clock, so a reload
// shows the same text.

import { el, clock, duration, fullFormat } from "./dom.js";
import * as tools from "./tools.js";
import { Totals, line as usageLine } from "./usage.js";
import * as rewinds from "./rewind.js";

export class Transcript {
  // parts: {log, approvals, queue}; hooks: {answer(q, choice), changed(),
  // attachment(ref) -> Promise<Blob>, markdown: Markdown, pricing() ->
  // Pricing, agent() -> the session's agent, rewind(turn, {code,
  // conversation, force}) and redo() -> Promise, goal(goal event) and
  // jobs() when a turn may have started or ended a job}.
  constructor(parts, hooks) {
    this.parts = parts;
    this.hooks = hooks;
    this.urls = [];
    this.reset();
  }

  reset() {
    for (const u of this.urls) URL.revokeObjectURL(u);
    this.urls = [];
    this.generation = (this.generation || 0) + 1;
    this.parts.log.replaceChildren();
    this.parts.approvals.replaceChildren();
    this.parts.queue.replaceChildren();
    this.lastSeq = 0;
    this.firstSeq = 0; // the first seq shown: older ones may come later
    this.lastNotice = 0;
    this.running = false;
    this.inflight = new Map(); // message id -> {box, next}
    this.calls = new Map(); // tool call id -> card (the latest call with that id)
    this.questions = new Map(); // question id -> box
    this.queued = new Map(); // request id -> item
    this.ownRequests = new Set(); // request ids this page sent: their refusal shows where they were sent
    this.refusals = new Set(); // request ids whose refusal is shown: its log event and its notice say the same
    this.session = new Totals();
    this.turn = null; // {n, start, totals}
    this.undo = new rewinds.Undo();
  }

  // lastEventId is what the stream resumes after: "<seq>-<notice>".
  lastEventId() {
    return `${this.lastSeq}-${this.lastNotice}`;
  }

  apply(kind, u) {
    switch (kind) {
      case "event": this.event(u.event); break;
      case "notice": this.notice(u.notice); break;
      case "snapshot": this.snapshot(u.snapshot); break;
      case "chunk": this.chunk(u.chunk); break;
      case "question": this.question(u.question); break;
      case "settled": this.settle(u.settled.question_id, u.settled); break;
    }
    this.hooks.changed();
  }

  // startAt makes the transcript begin at seq first, for a long session
  // shown from its end; prepend adds what came before.
  startAt(first) {
    this.firstSeq = first;
    this.lastSeq = first - 1;
  }

  // prepend shows older events (whole turns, ending right before what is
  // shown) above the rest, built apart with their own state and counted
  // into the session's totals.
  prepend(evs) {
    const older = new Transcript({ log: document.createElement("div"), approvals: document.createElement("div"), queue: document.createElement("ul") },
      { ...this.hooks, changed() {} });
    older.startAt(evs[0].seq);
    for (const ev of evs) older.event(ev);
    // What is shown starts at a turn, so no rewind before it is redoable.
    for (const b of older.parts.log.querySelectorAll(".redo-button")) b.remove();
    this.parts.log.prepend(...older.parts.log.childNodes);
    this.firstSeq = evs[0].seq;
    this.session.merge(older.session);
    // A rewind here may have undone turns there, and a redo here may
    // undo a rewind there: hide by all of them.
    for (const ev of older.undo.events) this.undo.add(ev);
    if (this.undo.events.length) this.undo.hide(this.parts.log);
    this.hooks.changed();
  }

  // event appends a durable event once: a seq already held is skipped.
  event(ev) {
    if (!ev || ev.seq <= this.lastSeq) return;
    if (!this.firstSeq) this.firstSeq = ev.seq;
    this.lastSeq = ev.seq;
    const m = ev.message;
    switch (ev.type) {
      case "turn/start":
        // A turn after a rewind makes it final (session.Redoable).
        for (const b of this.parts.log.querySelectorAll(".redo-button")) b.remove();
        this.running = true;
        this.turn = { n: ev.turn, start: ev.time, totals: new Totals() };
        break;
      case "user/message":
      case "steering/message":
        this.dequeue(ev.request_id || (m && m.request_id));
        this.add(ev, this.userMessage(m, ev.type === "steering/message", ev.type === "user/message" && (ev.turn || (this.turn && this.turn.n))));
        break;
      case "assistant/message": {
        const streamed = this.takeInflight();
        const box = this.assistantMessage(m, false, streamed);
        // A cancelled answer stays as far as it had come.
        if (ev.finish === "cut") box.append(el("p", "cut-note", "— stopped here"));
        box.append(this.stepMeta(ev));
        this.add(ev, box);
        break;
      }
      case "message/dropped":
        // An accepted message that never reached a turn: its outcome
        // replaces the "Queued" line, also for a page opened later.
        this.dequeue(ev.request_id || (m && m.request_id));
        this.add(ev, this.droppedMessage(ev));
        break;
      case "message/refused":
      case "message/expired": {
        // A message admission turned away, as the log records it: shown
        // once (its notice says the same), and not on the page that sent
        // it, which showed the refusal where it was typed.
        const rid = ev.request_id || (m && m.request_id);
        this.dequeue(rid);
        if (this.firstRefusal(rid) && !this.ownRequests.has(rid)) this.add(ev, this.refusedMessage(ev));
        break;
      }
      case "tool/call":
        this.callStatus(ev.tool_call.id, "running");
        break;
      case "tool/result":
        this.toolResult(m);
        break;
      case "step/end":
        this.dropInflight();
        break;
      case "turn/end": {
        this.dropInflight();
        this.running = false;
        // A call the turn left without a result will never get one.
        for (const card of this.calls.values()) {
          if (["requested", "asking", "running"].includes(card.dataset.status)) tools.setStatus(card, "interrupted");
        }
        const ok = ev.reason === "completed" && !ev.error;
        const p = el("p", ok ? "turn-sum" : "turn-sum turn-end");
        const t = this.turn && this.turn.n === ev.turn ? this.turn : null;
        const bits = [`Turn ${ev.turn || ""}`.trim()];
        if (!ok) bits.push(`ended: ${ev.reason}${ev.error ? ` — ${ev.error}` : ""}`);
        if (t && t.start && ev.time) bits.push(duration(new Date(ev.time) - new Date(t.start)));
        if (t && t.totals.steps > 0) bits.push(`${t.totals.steps} step${t.totals.steps > 1 ? "s" : ""}`, usageLine(t.totals, this.currency()));
        p.textContent = bits.join(" · ");
        this.turn = null;
        this.add(ev, p);
        break;
      }
      case "history/compacted":
        this.add(ev, el("p", "note", "Older history was summarized to fit the model's context."));
        break;
      case "plan/updated":
        if (ev.plan) this.add(ev, this.planUpdate(ev.plan));
        break;
      case "rewind":
      case "redo":
        if (!ev.rewind) break;
        this.undo.add(ev);
        this.add(ev, rewinds.line(ev, this.undo, (b) => this.redo(b)));
        if (ev.type === "redo") {
          const b = this.parts.log.querySelector(`[data-seq="${ev.rewind.redo}"] .redo-button`);
          if (b) b.remove();
        }
        this.undo.hide(this.parts.log);
        break;
      case "goal":
        if (ev.goal && this.hooks.goal) this.hooks.goal(ev);
        break;
    }
    if ((ev.type === "tool/result" || ev.type === "turn/end") && this.hooks.jobs) this.hooks.jobs();
  }

  // planUpdate shows a change of the plan state (tools.plan): the todo
  // list, a proposed or edited plan, or plan mode beginning or ending.
  planUpdate(p) {
    const marks = { completed: "☑", in_progress: "▶", pending: "☐" };
    switch (p.change) {
      case "todos": {
        const box = el("article", "msg plan todos");
        const list = el("ul", "todo-list");
        for (const t of p.todos || []) {
          const li = el("li", `todo ${t.status}`, `${marks[t.status] || "☐"} ${t.text}`);
          list.append(li);
        }
        const done = (p.todos || []).filter((t) => t.status === "completed").length;
        box.append(el("h3", "who", `Todos · ${done} of ${(p.todos || []).length} done`), list);
        return box;
      }
      case "proposed":
      case "edited": {
        const box = el("article", "msg plan");
        box.append(el("h3", "who", p.change === "edited" ? `Plan, edited by ${p.by}` : "Plan proposed"), el("div", "content plan-text", p.plan || ""));
        return box;
      }
    }
    const words = {
      entered: "Plan mode on: only tools that read run until a plan is approved.",
      left: `Plan mode off (${p.by}).`,
      approved: "Plan approved: plan mode off.",
      rejected: "Plan rejected: still in plan mode.",
    };
    return el("p", "note", words[p.change] || `Plan: ${p.change}`);
  }

  add(ev, node) {
    node.dataset.seq = ev.seq;
    if (ev.time && node.matches("article")) {
      const who = node.querySelector(".who");
      const time = el("time", "when", clock(ev.time));
      time.dateTime = ev.time;
      time.title = fullFormat.format(new Date(ev.time));
      if (who) who.append(time);
    }
    this.parts.log.append(node);
  }

  currency() {
    return this.hooks.pricing().currency;
  }

  // stepMeta is the line under an answer: its tokens and cost, and the
  // totals of its turn and session are counted here.
  stepMeta(ev) {
    const p = el("p", "step-meta");
    if (!ev.usage || !(ev.usage.input_tokens || ev.usage.output_tokens)) return p;
    const cost = this.hooks.pricing().cost(ev.usage, ev.provider, ev.model, this.hooks.agent());
    const t = new Totals();
    t.add(ev.usage, cost);
    this.session.add(ev.usage, cost);
    if (this.turn) this.turn.totals.add(ev.usage, cost);
    p.textContent = usageLine(t, this.currency()) + (ev.model ? ` · ${ev.model}` : "");
    return p;
  }

  // userMessage shows a message; one that began turn n has the control
  // that rewinds to before it.
  userMessage(m, steer, n) {
    const box = el("article", steer ? "msg user steer" : "msg user");
    box.append(el("h3", "who", steer ? "You (steer)" : "You"), el("div", "content", m ? m.content : ""));
    this.showParts(box, m);
    if (n && this.hooks.rewind) {
      box.dataset.turn = n;
      box.append(rewinds.control(n, this.hooks.rewind));
    }
    return box;
  }

  // redo asks for the last rewind to be undone; a refusal shows beside
  // the button.
  async redo(b) {
    b.disabled = true;
    try {
      await this.hooks.redo();
      b.remove();
    } catch (e) {
      b.disabled = false;
      b.textContent = `Redo (not done: ${e.message})`;
    }
  }

  // firstRefusal says whether the refusal of requestId is not shown yet,
  // and counts it as shown.
  firstRefusal(requestId) {
    if (!requestId) return true;
    if (this.refusals.has(requestId)) return false;
    this.refusals.add(requestId);
    return true;
  }

  refusedMessage(ev) {
    const what = ev.type === "message/expired" ? "Expired while it waited" : "Refused";
    const box = el("article", "msg user dropped refused");
    box.append(el("h3", "who", "Not delivered"), el("div", "content", ev.message ? ev.message.content : ""),
      el("p", "note", `${what}: ${ev.error || ev.reason}`));
    return box;
  }

  droppedMessage(ev) {
    const why = ev.reason === "closed" ? "the session was closed" : `${ev.by || "someone"} cancelled turn ${ev.turn || ""}`.trim();
    const box = el("article", "msg user dropped");
    box.append(el("h3", "who", "Not delivered"), el("div", "content", ev.message ? ev.message.content : ""),
      el("p", "note", `Dropped: ${why}. Send it again to deliver it.`));
    return box;
  }

  // showParts appends a message's images and files after its text.
  showParts(box, m) {
    const parts = ((m && m.parts) || []).filter((p) => p.ref && (p.type === "image" || p.type === "file"));
    if (parts.length === 0) return;
    const list = el("div", "parts");
    for (const p of parts) list.append(p.type === "image" ? this.image(p) : this.file(p));
    box.append(list);
  }

  image(p) {
    const img = el("img", "part-image");
    img.alt = p.name || "image";
    img.dataset.ref = p.ref;
    const gen = this.generation;
    this.hooks.attachment(p.ref).then((blob) => {
      if (gen !== this.generation) return; // another session is shown now
      const url = URL.createObjectURL(blob);
      this.urls.push(url);
      img.src = url;
    }).catch((e) => {
      img.replaceWith(el("p", "part-missing", `${p.name || "an image"} could not be loaded: ${e.message}`));
    });
    return img;
  }

  // file is a button that downloads the part: its bytes are fetched only
  // when asked for.
  file(p) {
    const b = el("button", "part-file secondary", `${p.name || "file"} (${p.media_type || "file"}, ${p.size || 0} bytes)`);
    b.type = "button";
    b.dataset.ref = p.ref;
    b.addEventListener("click", async () => {
      b.disabled = true;
      try {
        const url = URL.createObjectURL(await this.hooks.attachment(p.ref));
        const a = el("a");
        a.href = url;
        a.download = p.name || "attachment";
        document.body.append(a);
        a.click();
        a.remove();
        setTimeout(() => URL.revokeObjectURL(url), 60000);
      } catch (e) {
        b.textContent = `${p.name || "file"}: ${e.message}`;
      } finally {
        b.disabled = false;
      }
    });
    return b;
  }

  // assistantMessage renders a message: its reasoning folded away, its
  // text as Markdown, and a folded row for each tool call it asks for.
  // streamed is the content element of the same message as it streamed,
  // whose rendering is taken over so that the answer does not blink.
  assistantMessage(m, streaming, streamed) {
    const box = el("article", streaming ? "msg assistant streaming" : "msg assistant");
    box.append(el("h3", "who", "Agent"));
    const details = el("details", "reasoning");
    details.append(el("summary", "", "Reasoning"), el("div", "reasoning-text", m.reasoning || ""));
    details.hidden = !m.reasoning;
    details.open = !!streaming;
    const content = streamed || el("div", "content md");
    box.append(details, content);
    if (!streaming) {
      if (streamed) this.hooks.markdown.finish(content, m.content || "");
      else this.hooks.markdown.show(content, m.content || "");
    }
    for (const call of m.tool_calls || []) {
      if (streaming) continue;
      const card = tools.row(call);
      this.calls.set(call.id, card);
      box.append(card);
    }
    return box;
  }

  callStatus(id, status) {
    const card = this.calls.get(id);
    if (card) tools.setStatus(card, status);
  }

  toolResult(m) {
    const card = this.calls.get(m.tool_call_id);
    if (!card) return;
    // The error result of a call that never ran says why: a person
    // denied it, or the turn ended first (the words are the tool
    // pipeline's). The row keeps that, also when the log is read later.
    const text = m.content || "";
    let status = m.is_error ? "failed" : "done";
    if (card.dataset.status === "denied" || (m.is_error && /\bdenied\b/i.test(text))) status = "denied";
    else if (card.dataset.status === "interrupted" || (m.is_error && /^not executed: the turn was (aborted|cancelled)/i.test(text))) status = "interrupted";
    this.callStatus(m.tool_call_id, status);
    tools.setResult(card, m);
    if (!card.querySelector(".parts")) this.showParts(card.querySelector(".tool-body"), m);
  }

  // inflightBox returns the box of the message being streamed, made on
  // its first snapshot or chunk.
  inflightBox(id) {
    let s = this.inflight.get(id);
    if (!s) {
      const box = this.assistantMessage({}, true);
      box.dataset.message = id;
      this.parts.log.append(box);
      s = { box, next: 0, calls: new Map(), text: "" };
      this.inflight.set(id, s);
    }
    return s;
  }

  // snapshot replaces what the page assembled for a message with the
  // server's copy; only chunks from snap.next on apply after it.
  snapshot(snap) {
    const s = this.inflightBox(snap.message_id);
    const m = snap.message;
    s.text = m.content || "";
    this.hooks.markdown.stream(s.box.querySelector(".content"), s.text);
    const r = s.box.querySelector(".reasoning");
    r.querySelector(".reasoning-text").textContent = m.reasoning || "";
    r.hidden = !m.reasoning;
    s.next = snap.next;
    s.calls = new Map((m.tool_calls || []).map((c, i) => [i, c.name]));
    this.showCalls(s);
  }

  // chunk applies one chunk of the message in flight, once and in order.
  chunk(c) {
    const s = this.inflightBox(c.message_id);
    if (c.index < s.next) return;
    s.next = c.index + 1;
    const ch = c.chunk;
    if (ch.kind === "text") {
      s.text += ch.text || "";
      this.hooks.markdown.stream(s.box.querySelector(".content"), s.text);
    } else if (ch.kind === "reasoning") {
      const r = s.box.querySelector(".reasoning");
      r.hidden = false;
      r.querySelector(".reasoning-text").append(ch.text || "");
    } else if (ch.kind === "tool-call" && ch.tool_call && ch.tool_call.name) {
      s.calls.set(ch.tool_call.index, ch.tool_call.name);
      this.showCalls(s);
    }
  }

  showCalls(s) {
    let p = s.box.querySelector(".tool-pending");
    if (s.calls.size === 0) { if (p) p.remove(); return; }
    if (!p) { p = el("p", "tool-pending"); s.box.append(p); }
    p.textContent = `Calling ${[...s.calls.values()].join(", ")}…`;
  }

  // takeInflight removes the message streamed so far and returns its
  // content element, for the durable message to take over.
  takeInflight() {
    let content = null;
    for (const s of this.inflight.values()) {
      content = s.box.querySelector(".content");
      s.box.remove();
    }
    this.inflight.clear();
    if (content) content.remove();
    return content;
  }

  // dropInflight forgets the streamed messages: the log now holds them
  // (or the step ended without one, when the stream was aborted).
  dropInflight() {
    for (const s of this.inflight.values()) s.box.remove();
    this.inflight.clear();
  }

  notice(n) {
    if (!n || n.id <= this.lastNotice) return;
    this.lastNotice = n.id;
    if (n.request_id) this.dequeue(n.request_id);
    if (n.request_id && this.ownRequests.has(n.request_id)) return;
    if (n.type === "session/prompt-rejected" && !this.firstRefusal(n.request_id)) return;
    const text = n.type === "session/prompt-rejected" ? `Message refused: ${n.message || n.reason || n.code}` : (n.message || n.type);
    const p = el("p", "notice", text);
    p.dataset.notice = n.id;
    this.parts.log.append(p);
  }

  // question shows an approval question with its three answers, once.
  question(q) {
    if (this.questions.has(q.id)) return;
    const r = q.request;
    const box = el("div", "question");
    box.dataset.question = q.id;
    box.setAttribute("role", "group");
    const title = el("p", "question-title");
    title.append(el("strong", "", r.tool), document.createTextNode(" asks for permission"));
    const args = r.arguments && typeof r.arguments === "object" ? r.arguments : {};
    const diff = tools.diffOf(r.tool, args);
    title.id = `question-${q.id}`;
    box.setAttribute("aria-labelledby", title.id);
    box.append(title);
    if (r.summary) box.append(el("p", "question-summary", r.summary));
    if (r.reason) box.append(el("p", "question-reason", r.reason));
    if (diff) box.append(diff);
    else if (r.arguments && !r.summary) box.append(el("pre", "tool-args", JSON.stringify(r.arguments)));
    const actions = el("div", "actions");
    const choices = [
      ["allow-once", "Allow once", ""],
      ["allow-session", r.pattern ? `Allow “${r.pattern}” for this session` : `Allow ${r.tool} for this session`, "secondary"],
      ["deny", "Deny", "danger"],
    ];
    for (const [choice, label, cls] of choices) {
      const b = el("button", cls, label);
      b.type = "button";
      b.dataset.choice = choice;
      b.addEventListener("click", () => {
        for (const x of actions.querySelectorAll("button")) x.disabled = true;
        this.hooks.answer(q, choice);
      });
      actions.append(b);
    }
    box.append(actions);
    this.questions.set(q.id, box);
    this.parts.approvals.append(box);
    if (r.call_id) {
      box.dataset.call = r.call_id;
      this.callStatus(r.call_id, "asking");
    }
  }

  // settle removes a question that was answered (here or elsewhere) or
  // withdrawn; the call's card says what became of it.
  settle(id, settled) {
    const box = this.questions.get(id);
    if (!box) return;
    box.remove();
    this.questions.delete(id);
    const call = box.dataset.call;
    const card = this.calls.get(call);
    if (!settled || !card || card.dataset.status !== "asking") return;
    const choice = settled.answer && settled.answer.choice;
    // A question withdrawn is a turn that ended (cancelled, closed)
    // before anyone answered: the call never ran.
    this.callStatus(call, settled.withdrawn ? "interrupted" : choice === "deny" ? "denied" : "running");
  }

  // enableQuestion lets a question be answered again after a failed try.
  enableQuestion(id) {
    const box = this.questions.get(id);
    if (box) for (const b of box.querySelectorAll("button")) b.disabled = false;
  }

  // clearQuestions forgets the questions before a reconnect: the server
  // sends the ones still pending after its backlog.
  clearQuestions() {
    for (const box of this.questions.values()) box.remove();
    this.questions.clear();
  }

  // queue shows a message sent while a turn runs until its turn takes it.
  queue(requestId, text, steer) {
    const item = el("li", "queued", `${steer ? "Steer" : "Queued"}: ${text}`);
    item.dataset.request = requestId;
    this.queued.set(requestId, item);
    this.parts.queue.append(item);
  }

  dequeue(requestId) {
    if (!requestId) return;
    const item = this.queued.get(requestId);
    if (item) item.remove();
    this.queued.delete(requestId);
  }
}
