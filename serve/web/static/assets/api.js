// The HTTP API of dsh serve: JSON calls with the bearer token, and the
// session stream read with fetch (EventSource cannot send a header).

// ApiError is a non-2xx answer; its fields are the error body's
// (code, reason, message, presented, request_id) plus the status.
export class ApiError extends Error {
  constructor(status, body) {
    super(body.message || body.code || `HTTP ${status}`);
    this.status = status;
    this.code = body.code || "";
    this.reason = body.reason || "";
    this.presented = !!body.presented;
    this.requestId = body.request_id || "";
  }
}

export class Api {
  constructor(token) {
    this.token = token;
  }

  headers(extra = {}) {
    return { Authorization: `Bearer ${this.token}`, ...extra };
  }

  // call sends one request and returns the decoded body (null for 204).
  async call(method, path, body) {
    const init = { method, headers: this.headers() };
    if (body instanceof FormData) {
      init.body = body; // the browser sets multipart/form-data with its boundary
    } else if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const res = await fetch(path, init);
    if (res.status === 204) return null;
    let data = {};
    try {
      data = await res.json();
    } catch {
      data = { code: "HTTP_" + res.status, message: `the server answered ${res.status} without a JSON body` };
    }
    if (!res.ok) throw new ApiError(res.status, data);
    return data;
  }

  // blob fetches bytes the API serves (an attachment) with the token.
  async blob(path) {
    const res = await fetch(path, { headers: this.headers() });
    if (!res.ok) {
      let data = {};
      try { data = await res.json(); } catch { /* the status says enough */ }
      throw new ApiError(res.status, data);
    }
    return res.blob();
  }

  // stream reads a session's Server-Sent Events until the stream ends,
  // fails or signal aborts, calling onMessage({event, id, data}) for each
  // message. It resumes after lastEventId when one is given.
  async stream(sessionId, lastEventId, signal, onMessage) {
    const headers = this.headers({ Accept: "text/event-stream" });
    if (lastEventId) headers["Last-Event-ID"] = lastEventId;
    const res = await fetch(`/v1/sessions/${encodeURIComponent(sessionId)}/stream`, { headers, signal, cache: "no-store" });
    if (!res.ok) {
      let data = {};
      try { data = await res.json(); } catch { /* not JSON: the status says enough */ }
      throw new ApiError(res.status, data);
    }
    const parser = new SseParser(onMessage);
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      parser.push(value);
    }
  }
}

// SseParser cuts a text/event-stream into messages; text may arrive in
// pieces that split lines anywhere.
export class SseParser {
  constructor(onMessage) {
    this.onMessage = onMessage;
    this.rest = "";
    this.afterCR = false;
    this.reset();
  }

  reset() {
    this.event = "";
    this.id = null;
    this.data = [];
  }

  push(text) {
    if (text === "") return;
    // A "\r\n" cut after its "\r": the "\r" ended the line already.
    if (this.afterCR && text.startsWith("\n")) text = text.slice(1);
    const all = this.rest + text;
    this.afterCR = all.endsWith("\r");
    const lines = all.split(/\r\n|\r|\n/);
    this.rest = lines.pop();
    for (const line of lines) this.line(line);
  }

  line(line) {
    if (line === "") {
      if (this.data.length > 0) {
        this.onMessage({ event: this.event || "message", id: this.id, data: this.data.join("\n") });
      }
      this.reset();
      return;
    }
    if (line.startsWith(":")) return; // a comment: the server's ping
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.event = value;
    else if (field === "id") this.id = value;
    else if (field === "data") this.data.push(value);
  }
}

// newRequestId names one message for the server's retry check.
export function newRequestId() {
  if (crypto.randomUUID) return crypto.randomUUID();
  // randomUUID needs a secure context; plain http on a LAN address is not.
  const b = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}
