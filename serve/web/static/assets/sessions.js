// The session list: grouped by the day each session was last active,
// filtered by a search, shown a page at a time (a server that runs
// schedules and webhooks holds thousands), each with its state.

import { el } from "./dom.js";

const PAGE = 100;

// Formatters made once (see dom.js).
const monthFormat = new Intl.DateTimeFormat([], { year: "numeric", month: "long" });
const hourFormat = new Intl.DateTimeFormat([], { hour: "2-digit", minute: "2-digit" });
const dayFormat = new Intl.DateTimeFormat([], { month: "short", day: "numeric" });

// groupOf names the group of a date: Today, Yesterday, Previous 7 days,
// Previous 30 days, then the month.
export function groupOf(iso, now = new Date()) {
  const d = new Date(iso || 0);
  const day = (x) => new Date(x.getFullYear(), x.getMonth(), x.getDate()).getTime();
  const days = Math.round((day(now) - day(d)) / 86400000);
  if (days <= 0) return "Today";
  if (days === 1) return "Yesterday";
  if (days < 7) return "Previous 7 days";
  if (days < 30) return "Previous 30 days";
  return monthFormat.format(d);
}

// stateOf is what a person needs to know of a session.
export function stateOf(s, waiting) {
  if (waiting) return "waiting for approval";
  if (s.running) return "running";
  if (s.open) return "open";
  if (s.state === "idle") return "closed";
  return s.state || "closed";
}

function when(iso) {
  const d = new Date(iso || 0);
  if (Number.isNaN(d.getTime()) || d.getTime() === 0) return "";
  if (d.toDateString() === new Date().toDateString()) return hourFormat.format(d);
  return dayFormat.format(d);
}

export class SessionList {
  // parts: {list, more, search, count}; hooks: {open(id), current() -> id,
  // waiting(id) -> bool}
  constructor(parts, hooks) {
    this.parts = parts;
    this.hooks = hooks;
    this.all = [];
    this.titles = {};
    this.shown = PAGE;
    parts.search.addEventListener("input", () => { this.shown = PAGE; this.draw(); });
    parts.more.addEventListener("click", () => this.showMore());
    // The list pages on by itself when its end scrolls into view.
    this.observer = new IntersectionObserver((en) => { if (en.some((e) => e.isIntersecting)) this.showMore(); });
    this.observer.observe(parts.more);
  }

  set(sessions, titles) {
    this.all = sessions;
    this.titles = titles || {};
    this.draw();
  }

  find(id) {
    return this.all.find((s) => s.id === id);
  }

  titleOf(s) {
    return this.titles[s.id] || s.title || s.id;
  }

  showMore() {
    if (this.parts.more.hidden) return;
    this.shown += PAGE;
    this.draw();
  }

  matches() {
    const q = this.parts.search.value.trim().toLowerCase();
    if (!q) return this.all;
    return this.all.filter((s) => `${this.titleOf(s)} ${s.title || ""} ${s.id} ${s.agent || ""}`.toLowerCase().includes(q));
  }

  draw() {
    const list = this.matches();
    const now = new Date();
    const frag = document.createDocumentFragment();
    let group = "";
    let ul = null;
    for (const s of list.slice(0, this.shown)) {
      const g = groupOf(s.updated || s.created, now);
      if (g !== group) {
        group = g;
        const sec = el("section", "session-group");
        sec.append(el("h3", "group-title", g));
        ul = el("ul", "session-items");
        sec.append(ul);
        frag.append(sec);
      }
      ul.append(this.item(s));
    }
    this.parts.list.replaceChildren(frag);
    if (list.length === 0) this.parts.list.append(el("p", "hint", this.all.length ? "No session matches the search." : "No sessions yet: start one above."));
    this.parts.more.hidden = list.length <= this.shown;
    this.parts.count.textContent = list.length === this.all.length ? `${list.length}` : `${list.length} of ${this.all.length}`;
  }

  item(s) {
    const li = el("li");
    const b = el("button", "session-item");
    b.type = "button";
    b.dataset.session = s.id;
    if (this.hooks.current() === s.id) b.setAttribute("aria-current", "true");
    const state = stateOf(s, this.hooks.waiting(s.id));
    b.dataset.state = state;
    const meta = el("span", "meta");
    meta.append(el("span", "state", state), document.createTextNode(` · ${s.agent || "?"} · ${when(s.updated || s.created)}`));
    b.append(el("span", "title", this.titleOf(s)), meta);
    b.addEventListener("click", () => this.hooks.open(s.id));
    li.append(b);
    return li;
  }

  mark(id) {
    for (const b of this.parts.list.querySelectorAll(".session-item")) {
      if (b.dataset.session === id) b.setAttribute("aria-current", "true");
      else b.removeAttribute("aria-current");
    }
  }
}
