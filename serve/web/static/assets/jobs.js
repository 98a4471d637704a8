// The session's background jobs and its goal, beside the conversation.
// Jobs are not session events: the panel reads GET /v1/sessions/{id}/jobs
// when a turn may have started or ended one, and every few seconds while
// it is unfolded (a job ends by itself too). It shows once the session
// has a job. The goal is the last goal event
// of the log: each records the goal's whole state.

import { el } from "./dom.js";

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

// showGoal writes a goal event's goal into p: its objective, state, and
// what it spent of its budget. A cleared goal (or none) hides p.
export function showGoal(p, g) {
  p.hidden = !g || g.state === "cleared";
  if (p.hidden) return;
  p.dataset.state = g.state;
  const spent = g.spent || {};
  const budget = g.budget || {};
  const parts = [];
  const of = (name, s, b) => {
    if (!s && !b) return;
    parts.push(b ? `${s || 0} of ${b} ${name}` : `${s} ${name}`);
  };
  of("tokens", spent.tokens, budget.tokens);
  of("turns", spent.turns, budget.turns);
  if (spent.cost || budget.cost) parts.push(budget.cost ? `${(spent.cost || 0).toFixed(4)} of ${budget.cost} cost` : `${spent.cost.toFixed(4)} cost`);
  if (spent.time || budget.time) parts.push(budget.time ? `${spent.time || "0s"} of ${budget.time}` : `${spent.time}`);
  p.replaceChildren(el("strong", "", "Goal: "), el("span", "goal-objective", g.objective), el("span", "goal-state", ` · ${g.state}${g.reason ? ` (${g.reason})` : ""}`));
  if (parts.length) p.append(el("span", "goal-spent", ` · spent ${parts.join(", ")}`));
}
