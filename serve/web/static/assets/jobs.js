// The session's background jobs and its goal, beside the conversation.
// Jobs are not session events: the panel reads GET /v1/sessions/{id}/jobs
// when a turn may have started or ended one, and every few seconds while
// it is unfolded (a job ends by itself too). It shows once the session
// has a job. The goal is the last goal event
// of the log: each records the goal's whole state.

import { el, duration } from "./dom.js";
import { tokens, money } from "./usage.js";

const POLL = 3000;

export class Jobs {
  // parts: {box: <details>, list, count}; hooks: {list() -> Promise<jobs>,
  // kill(id) -> Promise<job>, failed(e, what)}.
  constructor(parts, hooks) {
    this.parts = parts;
    this.hooks = hooks;
    this.timer = 0;
    this.gen = 0;
    parts.box.addEventListener("toggle", () => this.poll());
  }

  // reset forgets the jobs shown, for another session (or none: active
  // false hides the panel).
  reset(active) {
    this.gen++;
    this.active = active;
    this.parts.list.replaceChildren();
    this.parts.count.textContent = "";
    // Shown once the session has a job: most sessions never start one.
    this.parts.box.hidden = true;
    if (active) this.refresh();
    this.poll();
  }

  poll() {
    clearInterval(this.timer);
    this.timer = 0;
    if (this.active && this.parts.box.open) this.timer = setInterval(() => this.refresh(), POLL);
  }

  // soon refreshes once a burst of events (a history read) is over.
  soon() {
    clearTimeout(this.later);
    this.later = setTimeout(() => this.refresh(), 200);
  }

  async refresh() {
    if (!this.active) return;
    const gen = this.gen;
    let list;
    try {
      list = await this.hooks.list();
    } catch {
      return; // a session that closed lists none; the next refresh says
    }
    if (gen !== this.gen) return;
    this.show(list || []);
  }

  show(list) {
    const running = list.filter((j) => j.running).length;
    this.parts.box.hidden = list.length === 0;
    this.parts.count.textContent = `${running} running of ${list.length}`;
    this.parts.list.replaceChildren(...list.map((j) => this.item(j)));
  }

  item(j) {
    const li = el("li", j.running ? "job running" : "job ended");
    li.dataset.job = j.id;
    li.append(el("code", "job-command", j.command), el("span", "job-status", ` ${j.id} · ${j.running ? "running" : j.status}`));
    if (j.running) {
      const b = el("button", "danger small kill", "Kill");
      b.type = "button";
      b.setAttribute("aria-label", `Kill ${j.id}`);
      b.addEventListener("click", async () => {
        b.disabled = true;
        try {
          await this.hooks.kill(j.id);
        } catch (e) {
          this.hooks.failed(e, `Could not kill ${j.id}`);
        }
        this.refresh();
      });
      li.append(" ", b);
    }
    return li;
  }
}

// goDuration reads a Go duration ("1h2m3.5s", "173.05ms") as milliseconds,
// the way the goal's budget and spending are written.
const units = { h: 3600000, m: 60000, s: 1000, ms: 1, us: 0.001, "µs": 0.001, ns: 0.000001 };
export function goDuration(d) {
  let ms = 0;
  for (const [, n, u] of String(d || "").matchAll(/(\d+(?:\.\d+)?)(ms|us|µs|ns|h|m|s)/g)) ms += Number(n) * units[u];
  return ms;
}

// showGoal writes a goal event's goal into p: its objective, state, and
// what it spent of each part of its budget (cost in currency). A cleared
// goal (or none) hides p.
export function showGoal(p, g, currency) {
  p.hidden = !g || g.state === "cleared";
  if (p.hidden) return;
  p.dataset.state = g.state;
  const spent = g.spent || {};
  const budget = g.budget || {};
  const parts = [];
  const of = (s, b, fmt, unit) => {
    if (!s && !b) return;
    parts.push(b ? `${fmt(s || 0)} of ${fmt(b)}${unit}` : `${fmt(s)}${unit}`);
  };
  of(spent.tokens, budget.tokens, tokens, " tokens");
  of(spent.turns, budget.turns, String, " turns");
  of(spent.cost, budget.cost, (v) => money(v, currency), "");
  of(goDuration(spent.time), goDuration(budget.time), duration, "");
  p.replaceChildren(el("strong", "", "Goal: "), el("span", "goal-objective", g.objective), el("span", "goal-state", ` · ${g.state}${g.reason ? ` (${g.reason})` : ""}`));
  if (parts.length) p.append(el("span", "goal-spent", ` · spent ${parts.join(", ")}`));
}
