// Drives `dsh acp` with the official ACP TypeScript SDK's client, the
// way an editor built on it does, through every method the protocol has
// for a session: initialize, session/new, session/prompt,
// session/cancel, session/close, session/load, session/list and
// session/resume, plus what initialize advertises (images, embedded
// context, HTTP MCP servers). A capability dsh does not advertise is
// skipped; one it advertises must work. The SDK checks every answer
// against the protocol's schema, so a malformed one fails its check.
//
// Usage: node run.mjs DSH_BINARY CONFIG WORKDIR
// Prints one JSON line per check ({check, status: pass|fail|skip,
// detail}) and ends with "acp: N passed, N failed, N skipped".

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const [dsh, config, cwd] = process.argv.slice(2);
const results = [];
const record = (check, status, detail = "") => {
  results.push({ check, status, detail });
  console.log(JSON.stringify({ check, status, detail }));
};
const timeout = (ms, what) =>
  new Promise((_, reject) => setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms).unref());
const within = (p, what, ms = 20000) => Promise.race([p, timeout(ms, what)]);

async function check(name, fn) {
  try {
    const skipped = await fn();
    if (typeof skipped === "string") record(name, "skip", skipped);
    else record(name, "pass");
  } catch (e) {
    record(name, "fail", String(e && e.stack ? e.stack : e));
  }
}

function assert(cond, msg) {
  if (!cond) throw new Error(msg);
}

// updates collects every session/update, by session.
const updates = new Map();
const waiters = [];
function onUpdate(n) {
  const list = updates.get(n.sessionId) ?? [];
  list.push(n.update);
  updates.set(n.sessionId, list);
  for (const w of waiters.splice(0)) w();
}
function changed() {
  return new Promise((resolve) => waiters.push(resolve));
}
async function waitUpdate(sessionId, ok, what) {
  for (;;) {
    const u = (updates.get(sessionId) ?? []).find(ok);
    if (u) return u;
    await within(changed(), what);
  }
}
const textOf = (sessionId, kind) =>
  (updates.get(sessionId) ?? [])
    .filter((u) => u.sessionUpdate === kind && u.content?.type === "text")
    .map((u) => u.content.text)
    .join("");

const child = spawn(dsh, ["acp", "--config", config], { cwd, stdio: ["pipe", "pipe", "inherit"] });
const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

const app = acp
  .client()
  .onNotification("session/update", ({ params }) => onUpdate(params))
  .onRequest("session/request_permission", ({ params }) => ({
    outcome: { outcome: "selected", optionId: params.options.find((o) => o.kind === "allow_once")?.optionId ?? params.options[0].optionId },
  }));

// A 1×1 PNG.
const png =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

await app.connectWith(stream, async (ctx) => {
  let caps;
  await check("initialize", async () => {
    const r = await within(ctx.request("initialize", { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} }), "initialize");
    assert(r.protocolVersion === 1, `protocolVersion ${r.protocolVersion}`);
    caps = r.agentCapabilities ?? {};
  });
  if (!caps) return;
  const sc = caps.sessionCapabilities ?? {};

  let first;
  await check("session/new", async () => {
    const r = await within(ctx.request("session/new", { cwd, mcpServers: [] }), "session/new");
    assert(typeof r.sessionId === "string" && r.sessionId, "no sessionId");
    first = r.sessionId;
  });
  if (!first) return;

  await check("session/prompt", async () => {
    const r = await within(ctx.request("session/prompt", { sessionId: first, prompt: [{ type: "text", text: "hello conformance" }] }), "prompt");
    assert(r.stopReason === "end_turn", `stopReason ${r.stopReason}`);
    assert(textOf(first, "agent_message_chunk").length > 0, "no agent_message_chunk streamed");
  });

  await check("prompt with an image (promptCapabilities.image)", async () => {
    if (!caps.promptCapabilities?.image) return "not advertised";
    const r = await within(
      ctx.request("session/prompt", { sessionId: first, prompt: [{ type: "text", text: "look" }, { type: "image", mimeType: "image/png", data: png }] }),
      "image prompt",
    );
    assert(r.stopReason === "end_turn", `stopReason ${r.stopReason}`);
  });

  await check("prompt with an embedded resource (promptCapabilities.embeddedContext)", async () => {
    if (!caps.promptCapabilities?.embeddedContext) return "not advertised";
    const r = await within(
      ctx.request("session/prompt", {
        sessionId: first,
        prompt: [{ type: "text", text: "read" }, { type: "resource", resource: { uri: "file:///notes.txt", mimeType: "text/plain", text: "notes" } }],
      }),
      "resource prompt",
    );
    assert(r.stopReason === "end_turn", `stopReason ${r.stopReason}`);
  });

  await check("session/cancel", async () => {
    const before = (updates.get(first) ?? []).length;
    const prompt = ctx.request("session/prompt", { sessionId: first, prompt: [{ type: "text", text: "a long answer please" }] });
    let ended = false;
    prompt.then(() => (ended = true), () => (ended = true));
    // Cancel once the answer streams, while the turn runs.
    await waitUpdate(first, (u) => (updates.get(first) ?? []).indexOf(u) >= before && u.sessionUpdate === "agent_message_chunk", "streaming");
    if (ended) return "the turn ended before the cancel could be sent (the model is too fast to cancel)";
    await ctx.notify("session/cancel", { sessionId: first });
    const r = await within(prompt, "cancelled prompt");
    if (r.stopReason === "end_turn") return "the turn ended before the cancel arrived (the model is too fast to cancel)";
    assert(r.stopReason === "cancelled", `stopReason ${r.stopReason}`);
  });

  await check("session/new with an HTTP MCP server (mcpCapabilities.http)", async () => {
    if (!caps.mcpCapabilities?.http) return "not advertised";
    // Nothing listens there: the session opens all the same, and says so.
    const r = await within(
      ctx.request("session/new", { cwd, mcpServers: [{ type: "http", name: "nowhere", url: "http://127.0.0.1:9/mcp", headers: [] }] }),
      "session/new with MCP",
    );
    assert(r.sessionId, "no sessionId");
    if (sc.close) await ctx.request("session/close", { sessionId: r.sessionId });
  });

  await check("session/close (sessionCapabilities.close)", async () => {
    if (!sc.close) return "not advertised";
    await within(ctx.request("session/close", { sessionId: first }), "session/close");
  });

  await check("session/list (sessionCapabilities.list)", async () => {
    if (!sc.list) return "not advertised";
    const r = await within(ctx.request("session/list", { cwd }), "session/list");
    assert(r.sessions.some((s) => s.sessionId === first), `session ${first} not listed: ${JSON.stringify(r.sessions)}`);
  });

  await check("session/load (loadSession)", async () => {
    if (!caps.loadSession) return "not advertised";
    updates.delete(first);
    await within(ctx.request("session/load", { sessionId: first, cwd, mcpServers: [] }), "session/load");
    // The history is replayed before the answer.
    const said = textOf(first, "user_message_chunk");
    assert(said.includes("hello conformance"), `replayed user text: ${JSON.stringify(said)}`);
    assert(textOf(first, "agent_message_chunk").length > 0, "the agent's answers were not replayed");
    const r = await within(ctx.request("session/prompt", { sessionId: first, prompt: [{ type: "text", text: "after load" }] }), "prompt after load");
    assert(r.stopReason === "end_turn", `stopReason ${r.stopReason}`);
    if (sc.close) await ctx.request("session/close", { sessionId: first });
  });

  await check("session/resume (sessionCapabilities.resume)", async () => {
    if (!sc.resume) return "not advertised";
    updates.delete(first);
    await within(ctx.request("session/resume", { sessionId: first, cwd, mcpServers: [] }), "session/resume");
    assert(textOf(first, "user_message_chunk") === "", "resume replayed the history");
    const r = await within(ctx.request("session/prompt", { sessionId: first, prompt: [{ type: "text", text: "after resume" }] }), "prompt after resume");
    assert(r.stopReason === "end_turn", `stopReason ${r.stopReason}`);
  });
});

// The editor goes away: dsh exits 0 once its sessions are saved.
child.stdin.end();
await check("clean exit when the client closes stdin", async () => {
  const { code, signal } = await within(exited, "exit");
  assert(code === 0 && signal === null, `exit code ${code}, signal ${signal}`);
});

const n = (s) => results.filter((r) => r.status === s).length;
console.log(`acp: ${n("pass")} passed, ${n("fail")} failed, ${n("skip")} skipped`);
process.exit(n("fail") > 0 ? 1 : 0);
