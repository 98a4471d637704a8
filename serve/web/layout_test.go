package web_test

import (
	stdctx "context"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// screenshots, when set, is the directory the layout test writes the
// page's pictures to (docs/ holds the committed ones):
//
//	go test ./serve/web -run TestPageLayout -screenshots ../../docs
var screenshots = flag.String("screenshots", "", "write the page's screenshots (desktop and phone) to this directory")

// inView is a JavaScript function: whether an element is wholly inside the
// window.
const inView = `(e) => { if (!e) return false; const r = e.getBoundingClientRect();
	return r.height > 0 && r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight && r.right <= innerWidth }`

// firstPaintJS resolves, from the moment it is evaluated, to the time
// since navigation when the element of seq is painted inside the
// conversation's view, and the time its Markdown was rendered.
func firstPaintJS(seq int64) string {
	return `new Promise((resolve) => { let shown = 0;
		const tick = () => {
			const e = document.querySelector('#log [data-seq="` + strconv.FormatInt(seq, 10) + `"]');
			const log = document.getElementById("log");
			if (e && !shown) { const r = e.getBoundingClientRect(), l = log.getBoundingClientRect(); if (r.bottom > l.top && r.top < l.bottom) shown = performance.now(); }
			if (shown && e.querySelector(".content.md:not(.md-plain)")) { const done = performance.now(); requestAnimationFrame(() => resolve([String(shown), String(done)])); return; }
			requestAnimationFrame(tick);
		};
		tick(); })`
}

// The page is the window, however much it holds: with 500 sessions and a
// session of 2,000 messages, the composer and a pending approval are in
// view at a desktop's and at a phone's width, the list and the
// conversation scroll on their own, the view follows the end, and the
// reader who scrolls up gets a way back.
func TestPageLayoutHoldsWithThousandsOfMessages(t *testing.T) {
	e := newEnv(t, envOpts{})
	const big = "big-session"
	last := seedSessions(t, e.sessionDir, 500, 1000, big)
	if st, out := apiCall(t, e, "POST", "/v1/sessions/"+big+"/resume", `{}`); st != 200 {
		t.Fatalf("resume: %d %v", st, out)
	}
	b := newBrowser(t)
	b.do("a desktop window", chromedp.EmulateViewport(1280, 800))
	b.do("opening the big session", chromedp.Navigate(e.url+"/#token="+token+"&session="+big))
	times := b.evalAwait(firstPaintJS(last))
	shown, _ := strconv.ParseFloat(times[0], 64)
	rendered, _ := strconv.ParseFloat(times[1], 64)
	t.Logf("2,000-message session: last message painted %.0f ms after navigation, rendered %.0f ms", shown, rendered)

	// A prompt whose turn asks for approval.
	b.wait("live", `document.getElementById("conn").textContent === "live"`)
	send(b, "one more, loudly")
	b.wait("the question", `document.querySelector("#approvals .question button[data-choice=allow-once]")`)
	b.wait("the end followed", `(() => { const l = document.getElementById("log"); return l.scrollHeight - l.scrollTop - l.clientHeight < 60 })()`)
	checkLayout(t, b, "desktop")
	// The older history comes in while the page is idle, all of it.
	b.wait("the whole history", `document.querySelectorAll("#log .msg").length >= 2000`)
	if got := eval[string](b, `document.querySelector("#log [data-seq]").dataset.seq`); got != "2" {
		t.Fatalf("the conversation begins at seq %s, not at the first prompt", got)
	}
	checkLayout(t, b, "desktop, the whole history loaded")
	if got := eval[[]string](b, `[...document.querySelectorAll("#session-list .group-title")].map(h => h.textContent)`); len(got) < 3 || got[0] != "Today" {
		t.Fatalf("the groups of the list: %q", got)
	}
	// The list shows a page and brings the next when its end is scrolled
	// to.
	if n := count(b, "#session-list .session-item"); n != 100 {
		t.Fatalf("the list shows %d sessions at first, not a page of 100", n)
	}
	b.do("scrolling the list to its end", chromedp.Evaluate[chromedp.Void](`document.getElementById("session-scroll").scrollTop = 1e9`))
	b.wait("the next page", `document.querySelectorAll("#session-list .session-item").length === 200`)
	if got := eval[string](b, `document.getElementById("session-count").textContent`); got != "501" {
		t.Fatalf("the count reads %q", got)
	}
	if got := eval[string](b, `document.querySelector("#session-list .session-item[aria-current=true] .state").textContent`); got != "waiting for approval" {
		t.Fatalf("the current session's state reads %q", got)
	}

	// Scrolled up, the view stays where the reader is while the answer
	// streams (the message at the top of the view stays there), and Jump
	// to latest brings the end back.
	b.do("scrolling up", chromedp.Evaluate[chromedp.Void](`(() => { const l = document.getElementById("log");
		l.dispatchEvent(new WheelEvent("wheel", {deltaY: -1000, bubbles: true})); l.scrollTop = 1000 })()`))
	b.wait("the jump button", `!document.getElementById("jump").hidden`)
	const topOfView = `(() => { const top = document.getElementById("log").getBoundingClientRect().top;
		const e = [...document.querySelectorAll("#log [data-seq]")].find(e => e.getBoundingClientRect().bottom > top + 1);
		return e ? e.dataset.seq + " at " + Math.round(e.getBoundingClientRect().top - top) : "" })()`
	// Messages come into view laid out for the first time: let two
	// frames settle their sizes before noting what is at the top.
	b.evalAwait(`new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(() => r([]), 200))))`)
	before := eval[string](b, topOfView)
	b.do("allowing the call", chromedp.Click(chromedp.CSS(`#approvals button[data-choice=allow-once]`)))
	b.wait("the final answer", `[...document.querySelectorAll("#log .msg.assistant .content")].some(c => c.textContent === "All done: the tool shouted it.")`)
	if after := eval[string](b, topOfView); after != before || before == "" {
		t.Fatalf("the view moved while the reader was up: %q at its top before, %q after", before, after)
	}
	b.do("jumping to the latest", chromedp.Click(chromedp.ID("jump")))
	b.wait("the end", `(() => { const l = document.getElementById("log"); return l.scrollHeight - l.scrollTop - l.clientHeight < 2 && document.getElementById("jump").hidden })()`)

	// A new question, for the pictures and the phone.
	send(b, "and again")
	b.wait("the second question", `document.querySelector("#approvals .question button[data-choice=allow-once]")`)
	b.wait("the end followed", `(() => { const l = document.getElementById("log"); return l.scrollHeight - l.scrollTop - l.clientHeight < 60 })()`)
	if *screenshots != "" {
		// The picture shows a rendered answer of the history (the
		// question stays in view below it) and the way back to the end.
		b.do("the list at its top, an answer in view", chromedp.Evaluate[chromedp.Void](`(() => {
			document.getElementById("session-scroll").scrollTop = 0;
			const l = document.getElementById("log");
			l.dispatchEvent(new WheelEvent("wheel", {deltaY: -500, bubbles: true}));
			const e = document.querySelector('#log [data-seq="`+strconv.FormatInt(last, 10)+`"]');
			l.scrollTop += e.getBoundingClientRect().bottom - l.getBoundingClientRect().bottom + 40 })()`))
		b.wait("the jump button", `!document.getElementById("jump").hidden`)
		screenshot(t, b, "serve-desktop.png")
		b.do("jumping to the latest", chromedp.Click(chromedp.ID("jump")))
	}

	b.do("a phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	b.wait("the phone layout", `getComputedStyle(document.getElementById("drawer-toggle")).display !== "none" && !document.getElementById("sessions").getAnimations().length`)
	checkLayout(t, b, "phone")
	if !eval[bool](b, `document.getElementById("sessions").getBoundingClientRect().right <= 0`) {
		t.Fatal("on a phone the session list covers the chat while a session is shown")
	}
	b.wait("the end followed", `(() => { const l = document.getElementById("log"); return l.scrollHeight - l.scrollTop - l.clientHeight < 60 })()`)
	screenshot(t, b, "serve-phone.png")
	b.do("opening the drawer", chromedp.Click(chromedp.ID("drawer-toggle")))
	b.wait("the drawer", `document.getElementById("sessions").getBoundingClientRect().left >= 0 && !document.getElementById("sessions").getAnimations().length`)
	if !eval[bool](b, `[...document.querySelectorAll("#session-list .session-item")].some(`+inView+`)`) {
		t.Fatal("the drawer does not show the sessions")
	}
	screenshot(t, b, "serve-phone-drawer.png")
	b.do("closing it with Escape", chromedp.KeyEvent("\x1b"))
	b.wait("the drawer closed", `document.getElementById("sessions").getBoundingClientRect().right <= 0 && !document.getElementById("sessions").getAnimations().length`)
	if eval[bool](b, `document.getElementById("cancel").disabled`) {
		t.Fatal("Escape on the drawer also cancelled the turn")
	}
	if errs := b.pageErrors(); len(errs) > 0 {
		t.Fatalf("the page logged errors:\n%s", strings.Join(errs, "\n"))
	}
}

// checkLayout fails unless the page is exactly the window, with the
// composer and the question inside it and both lists scrolling inside.
func checkLayout(t *testing.T, b *browser, width string) {
	t.Helper()
	if got := eval[[]float64](b, `[document.documentElement.scrollHeight, innerHeight, document.documentElement.scrollWidth, innerWidth]`); got[0] > got[1] || got[2] > got[3] {
		t.Fatalf("%s: the page is %v×%v px in a %v×%v window; it must not grow", width, got[2], got[0], got[3], got[1])
	}
	for what, sel := range map[string]string{
		"the composer":            "#prompt",
		"the send button":         "#send",
		"the question":            "#approvals .question",
		"the question's allow":    "#approvals .question button[data-choice=allow-once]",
		"the conversation's last": "#log > :last-child",
	} {
		if !eval[bool](b, `(`+inView+`)(document.querySelector("`+sel+`"))`) {
			t.Errorf("%s: %s is not in view: %v in %v×%v", width, what,
				eval[string](b, `JSON.stringify(document.querySelector("`+sel+`") && document.querySelector("`+sel+`").getBoundingClientRect())`),
				eval[int](b, "innerWidth"), eval[int](b, "innerHeight"))
		}
	}
	if !eval[bool](b, `(() => { const l = document.getElementById("log"); return l.scrollHeight > 10 * l.clientHeight && getComputedStyle(l).overflowY === "auto" })()`) {
		t.Errorf("%s: the conversation does not scroll inside the page", width)
	}
	if !eval[bool](b, `(() => { const l = document.getElementById("session-scroll"); return l.scrollHeight > l.clientHeight && getComputedStyle(l).overflowY === "auto" })()`) {
		t.Errorf("%s: the session list does not scroll on its own", width)
	}
}

func screenshot(t *testing.T, b *browser, name string) {
	t.Helper()
	if *screenshots == "" {
		return
	}
	time.Sleep(300 * time.Millisecond) // let a transition and a render settle
	ctx, cancel := contextFor(b)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(*screenshots, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// contextFor is a step's context of the browser.
func contextFor(b *browser) (stdctx.Context, stdctx.CancelFunc) {
	return stdctx.WithTimeout(b.ctx, step)
}
