// words says what an API error means for the person at the page, before
// the server's own message: a refusal by a rate limit or a gate, a closed
// session, a server going down.

import { ApiError } from "./api.js";

const REASONS = {
  "admission/rate-limited": "Too many messages for now (rate limit); wait a moment and send it again.",
  "admission/not-ready": "The agent is not ready to take messages yet; try again shortly.",
  "admission/inbox-full": "Too many messages are waiting already; wait for the agent to take them.",
};

export function words(e) {
  if (!(e instanceof ApiError)) return `the server could not be reached (${e.message}); check that dsh serve runs`;
  const lead = REASONS[e.reason] || lead4(e);
  const detail = e.message && e.message !== e.code ? e.message : "";
  return [lead, detail].filter(Boolean).join(" ") + (e.code ? ` (${e.code})` : "");
}

function lead4(e) {
  switch (e.code) {
    case "SESSION_PROMPT_REJECTED": return "Message refused:";
    case "SESSION_CLOSED": return "This session is closed; resume it to send messages.";
    case "SESSION_LOCKED": return "The session is busy elsewhere (open in another process or host).";
    case "SERVE_SHUTTING_DOWN": return "The server is shutting down; it will take messages again once restarted.";
    case "SERVE_BODY_TOO_LARGE": case "ATTACHMENT_TOO_LARGE": return "Too large to send:";
    case "AGENT_MESSAGE_DROPPED": return "The message was dropped by a cancel; send it again.";
  }
  if (e.status === 429) return "Too many requests for now; wait a moment.";
  if (e.status === 503) return "The server cannot take this now; try again shortly.";
  return "";
}
