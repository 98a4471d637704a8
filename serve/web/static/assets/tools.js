// Tool calls as one folded row each: the tool, a one-line summary of
// what it was asked (the command, the path, the pattern) and its state;
// unfolded, its arguments (a coloured diff for edit and write) and its
// output.

import { el } from "./dom.js";

// States a call goes through, as the row names them.
export const STATES = ["requested", "asking", "running", "done", "failed", "denied", "interrupted"];

function parseArgs(call) {
  if (call.arguments && typeof call.arguments === "object") return call.arguments;
  try {
    const v = JSON.parse(call.arguments || "{}");
    return v && typeof v === "object" ? v : {};
  } catch {
    return {};
  }
}

// summary is the one line that says what a call does.
export function summary(name, args) {
  const first = (s) => String(s).split("\n")[0];
  for (const k of ["command", "path", "pattern", "url", "query", "prompt", "text"]) {
    if (typeof args[k] === "string" && args[k] !== "") {
      let s = first(args[k]);
      if (k === "pattern" && typeof args.path === "string" && args.path) s += ` in ${args.path}`;
      return s.length > 160 ? `${s.slice(0, 159)}…` : s;
    }
  }
  const json = JSON.stringify(args);
  return json === "{}" ? "" : json.length > 160 ? `${json.slice(0, 159)}…` : json;
}

// row makes the folded row of one call.
export function row(call) {
  const args = parseArgs(call);
  const box = el("details", "tool");
  box.dataset.call = call.id;
  box.dataset.tool = call.name;
  const head = el("summary", "tool-head");
  head.append(el("span", "tool-state-dot"), el("span", "tool-name", call.name), el("span", "tool-summary", summary(call.name, args)),
    el("span", "tool-status", "requested"));
  box.append(head);
  const body = el("div", "tool-body");
  const diff = diffOf(call.name, args);
  if (diff) body.append(diff);
  else body.append(el("pre", "tool-args", JSON.stringify(args, null, 2)));
  box.append(body);
  box.dataset.status = "requested";
  return box;
}

export function setStatus(box, status) {
  box.dataset.status = status;
  box.querySelector(".tool-status").textContent = status;
}

// setResult shows a call's output, folded with the row.
export function setResult(box, m) {
  let out = box.querySelector(".tool-result");
  if (!out) {
    out = el("pre", "tool-result");
    box.querySelector(".tool-body").append(out);
  }
  out.textContent = m.content || "";
  const lines = (m.content || "").split("\n").length;
  box.querySelector(".tool-status").title = `${lines} line${lines === 1 ? "" : "s"} of output`;
}

// diffOf is the diff an edit or a write makes, or null for other tools.
export function diffOf(name, args) {
  if (name === "edit" && typeof args.old === "string" && typeof args.new === "string") {
    return diffView(args.path, lines(args.old), lines(args.new));
  }
  if (name === "write" && typeof args.content === "string") {
    return diffView(args.path, [], lines(args.content));
  }
  return null;
}

function lines(s) {
  if (s === "") return [];
  return s.replace(/\n$/, "").split("\n");
}

function diffView(path, a, b) {
  const pre = el("pre", "diff");
  pre.setAttribute("aria-label", `Changes to ${path || "the file"}`);
  if (path) pre.append(el("span", "diff-file", `${path}\n`));
  for (const [op, text] of diffLines(a, b)) {
    pre.append(el("span", op === "+" ? "add" : op === "-" ? "del" : "ctx", `${op === "=" ? " " : op} ${text}\n`));
  }
  return pre;
}

// diffLines is a line diff by longest common subsequence: edits are a
// few dozen lines, so the quadratic table is small; past 1,000,000 cells
// it shows the old lines removed and the new ones added.
export function diffLines(a, b) {
  const n = a.length;
  const m = b.length;
  if (n * m > 1_000_000) return a.map((x) => ["-", x]).concat(b.map((x) => ["+", x]));
  const t = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      t[i][j] = a[i] === b[j] ? t[i + 1][j + 1] + 1 : Math.max(t[i + 1][j], t[i][j + 1]);
    }
  }
  const out = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) { out.push(["=", a[i]]); i++; j++; }
    else if (t[i + 1][j] >= t[i][j + 1]) out.push(["-", a[i++]]);
    else out.push(["+", b[j++]]);
  }
  while (i < n) out.push(["-", a[i++]]);
  while (j < m) out.push(["+", b[j++]]);
  return out;
}
