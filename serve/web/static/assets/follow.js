// Follower keeps the conversation at its latest line while it grows,
// unless the reader scrolled up to read; then a "Jump to latest" button
// shows, and following resumes once the reader is back at the bottom.

const SLACK = 48; // px from the bottom that still count as "at the bottom"

export class Follower {
  constructor(log, button) {
    this.log = log;
    this.button = button;
    this.following = true;
    this.frame = 0;
    this.set = -1; // the scrollTop the follower set last
    // Only a scroll the reader makes (wheel, touch, keys, the scroll bar)
    // decides whether to follow: the page moves the view too (the
    // browser's scroll anchoring when older history is added above, a
    // rendering that changes a height), and such a move must not stop
    // following because the end grew in the same frame.
    this.touched = -Infinity;
    const touch = () => { this.touched = performance.now(); };
    for (const t of ["wheel", "touchmove", "pointerdown", "keydown"]) log.addEventListener(t, touch, { passive: true });
    log.addEventListener("scroll", () => {
      if (performance.now() - this.touched > 1000) return;
      if (Math.abs(this.log.scrollTop - this.set) <= 1) return; // the follower's own
      this.following = this.atBottom();
      this.button.hidden = this.following;
    }, { passive: true });
    button.addEventListener("click", () => this.jump());
    // The dock below grows when a question or a queued message comes and
    // shrinks when it goes: the conversation's box changes height with no
    // change of its own, and the end must stay in view.
    new ResizeObserver(() => this.changed()).observe(log);
  }

  atBottom() {
    return this.log.scrollHeight - this.log.scrollTop - this.log.clientHeight <= SLACK;
  }

  reset() {
    this.following = true;
    this.button.hidden = true;
    this.changed();
  }

  // stick follows again (the reader sent a message: they want the answer).
  stick() {
    this.touched = -Infinity; // asked to follow: a scroll just before does not count
    this.following = true;
    this.button.hidden = true;
    this.changed();
  }

  jump() {
    this.touched = -Infinity;
    this.following = true;
    this.button.hidden = true;
    this.scroll();
    this.log.focus({ preventScroll: true });
  }

  // changed is called after every update; the layout is read once per
  // frame, however many updates a frame holds (a backlog is thousands).
  changed() {
    this.log.dataset.following = this.following;
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      if (this.following) this.scroll();
      else this.button.hidden = false;
    });
  }

  scroll() {
    const top = this.log.scrollHeight - this.log.clientHeight;
    if (Math.abs(this.log.scrollTop - top) > 1) {
      this.log.scrollTop = top;
      this.set = this.log.scrollTop;
    }
  }
}
