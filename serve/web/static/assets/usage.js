// Tokens and cost of a session, from the usage each assistant/message
// event records and the config's price table (GET /v1/pricing): the same
// arithmetic as dsh's usage reports (services/usage), so the page and
// `dsh sessions usage` agree. A step whose model has no price has tokens
// and no cost; its turn and session then show tokens only.

export class Pricing {
  // p: {currency, models: {name: {input, cache_hit, output}}, agent_models}
  constructor(p) {
    this.currency = (p && p.currency) || "USD";
    this.models = (p && p.models) || {};
    this.agentModels = (p && p.agent_models) || {};
  }

  // cost returns what a step cost, or null when its model has no price.
  cost(usage, provider, model, agent) {
    const name = model || this.agentModels[agent] || "";
    if (!name) return null;
    const price = (provider && this.models[`${provider}/${name}`]) || this.models[name];
    if (!price) return null;
    const u = normalize(usage);
    const hit = price.cache_hit ?? price.input;
    return (u.cache_miss_tokens * price.input + u.cache_hit_tokens * hit + u.output_tokens * price.output) / 1e6;
  }
}

function normalize(u) {
  const n = {
    input_tokens: u.input_tokens || 0, output_tokens: u.output_tokens || 0, reasoning_tokens: u.reasoning_tokens || 0,
    cache_hit_tokens: u.cache_hit_tokens || 0, cache_miss_tokens: u.cache_miss_tokens || 0,
  };
  if (n.cache_hit_tokens + n.cache_miss_tokens < n.input_tokens) n.cache_miss_tokens = n.input_tokens - n.cache_hit_tokens;
  return n;
}

// Totals adds steps up.
export class Totals {
  constructor() {
    this.steps = 0;
    this.input = 0;
    this.output = 0;
    this.cost = 0;
    this.priced = true;
  }

  merge(o) {
    this.steps += o.steps;
    this.input += o.input;
    this.output += o.output;
    this.cost += o.cost;
    this.priced = this.priced && o.priced;
  }

  add(usage, cost) {
    this.steps++;
    this.input += usage.input_tokens || 0;
    this.output += usage.output_tokens || 0;
    if (cost === null) this.priced = false;
    else this.cost += cost;
  }
}

// tokens writes 950, 1.2k or 34k.
export function tokens(n) {
  if (n < 1000) return String(n);
  if (n < 10000) return `${(n / 1000).toFixed(1)}k`;
  return `${Math.round(n / 1000)}k`;
}

export function money(v, currency) {
  const digits = v === 0 ? 2 : v < 0.01 ? 4 : v < 1 ? 3 : 2;
  return `${v.toFixed(digits)} ${currency}`;
}

// line says what a step or a total used: "1.2k in · 300 out · 0.0042 USD".
export function line(t, currency) {
  const parts = [`${tokens(t.input)} in`, `${tokens(t.output)} out`];
  if (t.priced && t.steps > 0) parts.push(money(t.cost, currency));
  return parts.join(" · ");
}
