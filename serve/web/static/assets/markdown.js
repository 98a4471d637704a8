// Markdown of answers, rendered by the server (POST /v1/render: goldmark,
// chroma and bluemonday) and put into the page without assigning markup: the
// sanitized HTML is parsed by DOMParser, whose document runs nothing, and
// its nodes are imported. Rendering never blocks the page: a text shows as
// plain text at once and is swapped for its rendering when that arrives;
// messages are rendered when they come near the view, so a long session
// costs one request for what is on screen.

const BATCH = 40; // texts per request
// EVERY is the least time between two renderings of a streaming answer:
// each one parses and compares the whole answer, so a fast stream would
// otherwise spend its frames on renderings nobody has time to read.
const EVERY = 150;
const CACHE = 500; // renderings kept, by text

export class Markdown {
  // post(texts) -> Promise<html[]>; applied() is called after a
  // rendering changed a box; root is the scrolling element the boxes are
  // in (null: the window).
  constructor(post, applied = () => {}, root = null) {
    this.post = post;
    this.applied = applied;
    this.cache = new Map();
    this.waiting = []; // {text, resolve, reject}
    this.flushing = false;
    this.parser = new DOMParser();
    // The margin counts from the scrolling conversation, not the window:
    // the window's would be clipped by the conversation's own box, and
    // only what is on screen would be rendered, each box blinking from
    // plain to rendered as it scrolls in.
    this.observer = new IntersectionObserver((entries) => this.visible(entries), { root, rootMargin: "1500px 0px" });
  }

  // render resolves to the HTML of text, asking the server in batches.
  render(text) {
    const hit = this.cache.get(text);
    if (hit !== undefined) return Promise.resolve(hit);
    return new Promise((resolve, reject) => {
      this.waiting.push({ text, resolve, reject });
      if (!this.flushing) {
        this.flushing = true;
        queueMicrotask(() => this.flush());
      }
    });
  }

  async flush() {
    while (this.waiting.length > 0) {
      const batch = this.waiting.splice(0, BATCH);
      try {
        const html = await this.post(batch.map((w) => w.text));
        batch.forEach((w, i) => { this.remember(w.text, html[i]); w.resolve(html[i]); });
      } catch (e) {
        for (const w of batch) w.reject(e);
      }
    }
    this.flushing = false;
  }

  remember(text, html) {
    if (this.cache.size >= CACHE) this.cache.delete(this.cache.keys().next().value);
    this.cache.set(text, html);
  }

  // show puts text into box as plain text, and its rendering once the box
  // is near the view. A rendering already held is used at once.
  show(box, text) {
    box.dataset.md = "";
    box.mdText = text;
    const hit = this.cache.get(text);
    if (hit !== undefined) {
      this.apply(box, hit);
      box.mdParsed = null; // a message that does not stream is rendered once
      return;
    }
    if (box.childNodes.length === 0) box.textContent = text;
    box.classList.add("md-plain");
    this.observer.observe(box);
  }

  visible(entries) {
    for (const en of entries) {
      if (!en.isIntersecting) continue;
      const box = en.target;
      this.observer.unobserve(box);
      const text = box.mdText;
      this.render(text).then((html) => {
        if (box.mdText === text) {
          this.apply(box, html);
          box.mdParsed = null;
        }
      }).catch(() => { /* the plain text stays */ });
    }
  }

  // finish shows the whole text of a box that streamed: at once from the
  // cache, else as the streamed rendering plus the rest in plain text
  // until the last rendering comes (now, not when the box is in view:
  // it holds a partial rendering that would otherwise stay).
  finish(box, text) {
    const hit = this.cache.get(text);
    if (hit === undefined) {
      this.stream(box, text);
      return;
    }
    box.mdText = text;
    box.mdStream = null;
    this.tail(box, "");
    this.apply(box, hit);
  }

  // stream shows a text that grows: the rendering of what it held at the
  // last request, then the rest as plain text; a new request goes out when
  // the last came back, so there is at most one in flight per message.
  stream(box, text) {
    box.mdText = text;
    if (!box.mdStream) box.mdStream = { busy: false, rendered: "" };
    const s = box.mdStream;
    this.tail(box, rest(text, s.rendered));
    if (s.busy || text === s.rendered) return;
    s.busy = true;
    const started = performance.now();
    this.render(text).then(async (html) => {
      if (box.isConnected && box.mdStream === s) {
        s.rendered = text;
        this.apply(box, html);
        this.tail(box, rest(box.mdText, text));
      }
      await new Promise((r) => setTimeout(r, Math.max(0, EVERY - (performance.now() - started))));
      s.busy = false;
      if (box.isConnected && box.mdStream === s && box.mdText !== s.rendered) this.stream(box, box.mdText);
    }).catch(() => {
      s.busy = false;
      box.textContent = box.mdText;
    });
  }

  // tail shows the text that arrived after the last rendering, inside
  // the last paragraph when the rendering ends with one, so that a word
  // cut by the rendering goes on on its line.
  tail(box, text) {
    let t = box.querySelector(".md-tail");
    if (!text) { if (t) t.remove(); return; }
    if (!t) {
      t = document.createElement("span");
      t.className = "md-tail";
    }
    const last = box.lastElementChild === t ? t.previousElementSibling : box.lastElementChild;
    const host = last && /^(P|LI|H[1-6])$/.test(last.tagName) ? last : box;
    if (t.parentNode !== host || host.lastChild !== t) host.append(t);
    if (t.textContent !== text) t.textContent = text;
  }

  // apply makes box hold html, replacing only the blocks that changed:
  // while an answer streams only its last block changes, so what the
  // reader looks at is not rebuilt (no flicker, the selection stays).
  apply(box, html) {
    box.classList.remove("md-plain");
    const doc = this.parser.parseFromString(`<body>${html}</body>`, "text/html");
    const fresh = [...doc.body.childNodes].filter((n) => n.nodeType === 1 || n.textContent.trim() !== "");
    // Blocks are compared with the parsed blocks of the last rendering,
    // kept as parsed: a shown code block holds the copy button the new
    // one lacks. isEqualNode compares in the browser, without writing
    // either block out as text.
    const prev = box.mdParsed || [];
    const nodes = box.mdNodes || [];
    let i = 0;
    while (i < prev.length && i < fresh.length && nodes[i].parentNode === box && prev[i].isEqualNode(fresh[i])) i++;
    const keep = new Set(nodes.slice(0, i));
    // The caller shows the tail again after the rendering.
    const tail = box.querySelector(".md-tail");
    if (tail) tail.remove();
    for (const n of [...box.childNodes]) if (!keep.has(n)) n.remove();
    const add = fresh.slice(i).map((n) => document.importNode(n, true));
    box.mdParsed = prev.slice(0, i).concat(fresh.slice(i));
    for (const n of add) decorate(n);
    box.append(...add);
    box.mdNodes = nodes.slice(0, i).concat(add);
    this.applied();
  }
}

// rest is what text holds beyond the rendered part, with the spaces the
// rendering dropped at the end of what it rendered.
function rest(text, rendered) {
  return text.slice(rendered.trimEnd().length);
}

// decorate gives code blocks a copy button and makes links open apart.
function decorate(n) {
  if (n.nodeType !== 1) return;
  const pres = n.matches("pre") ? [n] : [...n.querySelectorAll("pre")];
  for (const pre of pres) addCopy(pre);
}

function addCopy(pre) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = "copy secondary";
  b.textContent = "Copy";
  b.setAttribute("aria-label", "Copy the code");
  b.addEventListener("click", async () => {
    const code = pre.querySelector("code") || pre;
    try {
      // A clipboard that waits for a permission nobody grants must not
      // leave the button doing nothing: after a second, select instead.
      const late = new Promise((_, reject) => setTimeout(() => reject(new Error("no clipboard")), 1000));
      await Promise.race([navigator.clipboard.writeText(code.textContent), late]);
      b.textContent = "Copied";
    } catch {
      // No clipboard (plain http off localhost): select the code instead.
      const r = document.createRange();
      r.selectNodeContents(code);
      const sel = getSelection();
      sel.removeAllRanges();
      sel.addRange(r);
      b.textContent = "Selected";
    }
    setTimeout(() => { b.textContent = "Copy"; }, 1500);
  });
  pre.prepend(b);
}
