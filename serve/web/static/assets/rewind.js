// Rewinds on the page. A conversation rewind hides the turns it undid,
// by the rules of session.Visible (services/session/rewind.go): a rewind
// event with conversation undoes the seqs from..through, and a later redo
// naming that rewind's seq brings them back. Nothing is erased, so the
// page only hides and shows what it already holds. A rewind or redo shows
// as one line saying what it did; each turn the conversation shows has a
// "Rewind" control, and a refusal over a changed workspace offers force.

import { el } from "./dom.js";

// Undo holds the rewind and redo events of a session and says which seqs
// the conversation no longer shows.
export class Undo {
  constructor() {
    this.events = []; // rewind and redo events, by seq
  }

  add(ev) {
    if (!ev.rewind || this.events.some((e) => e.seq === ev.seq)) return;
    this.events.push(ev);
    this.events.sort((a, b) => a.seq - b.seq);
  }

  // spans are the ranges the active conversation rewinds undid.
  spans() {
    const out = [];
    for (const e of this.events) {
      const r = e.rewind;
      if (e.type === "rewind" && r.conversation && r.from > 0) out.push({ from: r.from, through: r.through, by: e.seq });
      if (e.type === "redo") {
        const i = out.findIndex((s) => s.by === r.redo);
        if (i >= 0) out.splice(i, 1);
      }
    }
    return out;
  }

  // rewindAt returns the rewind event at seq, for a redo's line.
  rewindAt(seq) {
    return this.events.find((e) => e.seq === seq && e.type === "rewind");
  }

  // hide hides every entry of log a rewind undid and shows the others.
  hide(log) {
    const spans = this.spans();
    for (const n of log.querySelectorAll(":scope > [data-seq]")) {
      const seq = Number(n.dataset.seq);
      const undone = spans.some((s) => seq >= s.from && seq <= s.through);
      n.hidden = undone;
      n.classList.toggle("undone", undone);
    }
  }
}

function what(r) {
  if (r.code && r.conversation) return "code and conversation";
  return r.code ? "code" : "conversation";
}

function to(r) {
  if (!r || !r.to) return "";
  return r.to.step ? `step ${r.to.step} of turn ${r.to.turn}` : `turn ${r.to.turn}`;
}

// line is the one line a rewind or redo event shows. redo(button) asks
// for a redo; it is offered on a rewind's line.
export function line(ev, undo, redo) {
  const r = ev.rewind;
  const p = el("p", `note rewind-line ${ev.type}`);
  if (ev.type === "redo") {
    const was = undo.rewindAt(r.redo);
    p.textContent = `Redone: the rewind${was ? ` of ${what(was.rewind)} to before ${to(was.rewind)}` : ""} is undone.`;
    return p;
  }
  const bits = [`Rewound ${what(r)} to before ${to(r)}`];
  const files = [];
  if (r.restored) files.push(`${r.restored} restored`);
  if (r.removed) files.push(`${r.removed} removed`);
  if (files.length) bits.push(`files: ${files.join(", ")}`);
  if (r.conversation && r.from) bits.push(`the conversation from there is hidden`);
  if (r.forced) bits.push(`forced over ${(r.differed || []).length || "some"} changed path${(r.differed || []).length === 1 ? "" : "s"}`);
  if (r.by) bits.push(`by ${r.by}`);
  p.append(el("span", "", bits.join(" · ") + ". "));
  const b = el("button", "secondary small redo-button", "Redo");
  b.type = "button";
  b.addEventListener("click", () => redo(b));
  p.append(b);
  return p;
}

// control is the "Rewind" action of turn n: a choice of code,
// conversation or both. rewind(n, {code, conversation, force}) sends it
// and returns a promise that rejects with the API's error.
export function control(n, rewind) {
  const box = el("details", "rewind-control");
  box.append(el("summary", "", `Rewind to before turn ${n}`));
  const actions = el("div", "actions");
  const out = el("p", "rewind-error");
  out.hidden = true;
  const go = async (opts, buttons) => {
    for (const b of buttons) b.disabled = true;
    out.hidden = true;
    out.replaceChildren();
    try {
      await rewind(n, opts);
      box.open = false;
    } catch (e) {
      out.hidden = false;
      out.append(el("span", "", `Not rewound: ${e.message}`));
      // A workspace changed since its checkpoint is refused; force
      // overwrites those changes, so it is a second, explicit click.
      if (e.code === "REWIND_WORKSPACE_CHANGED" && !opts.force) {
        const f = el("button", "danger small force", "Force: overwrite those changes");
        f.type = "button";
        f.addEventListener("click", () => go({ ...opts, force: true }, [f]));
        out.append(" ", f);
      }
    } finally {
      for (const b of buttons) b.disabled = false;
    }
  };
  const choices = [
    ["both", "Code and conversation", { code: true, conversation: true }],
    ["code", "Code only", { code: true }],
    ["conversation", "Conversation only", { conversation: true }],
  ];
  const buttons = [];
  for (const [name, label, opts] of choices) {
    const b = el("button", "secondary small", label);
    b.type = "button";
    b.dataset.rewind = name;
    b.addEventListener("click", () => go(opts, buttons));
    buttons.push(b);
    actions.append(b);
  }
  box.append(actions, out);
  return box;
}
