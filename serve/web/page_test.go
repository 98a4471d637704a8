package web_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// transcriptJS describes the conversation as the page shows it: each
// durable entry's seq and text, in order. The rewind controls are actions
// only an open session offers, not what was said: their text is left out.
const transcriptJS = `[...document.querySelectorAll("#log [data-seq]")].map(e => {
	let text = e.innerText;
	for (const c of e.querySelectorAll(".rewind-control")) text = text.replace(c.innerText, "");
	return e.dataset.seq + " " + e.className + ": " + text.replace(/\s+/g, " ").trim();
})`

// openPage opens the page with the token in its fragment and creates a
// session of the agent "main".
func openPage(t testing.TB, e *env, b *browser) {
	t.Helper()
	b.do("opening the page", chromedp.Navigate(e.url+"/#token="+token))
	b.wait("the session list", `!document.getElementById("app").hidden && document.querySelector("#agent option[value=main]")`)
	if h := eval[string](b, `location.hash`); strings.Contains(h, token) {
		t.Fatalf("the token stayed in the address bar: %q", h)
	}
	if got := eval[string](b, `sessionStorage.getItem("dsh-token")`); got != token {
		t.Fatalf("the token in sessionStorage is %q", got)
	}
	// On a narrow screen the list is a drawer, open while no session is
	// shown; it slides in.
	b.wait("the drawer in place", `document.getElementById("sessions").getBoundingClientRect().left >= 0 && !document.getElementById("sessions").getAnimations().length`)
	b.do("creating a session", chromedp.Click(chromedp.CSS(`#new-session button[type=submit]`)))
	b.wait("the composer", `!document.getElementById("composer").hidden && document.getElementById("conn").textContent === "live"`)
	// and slides away once a session is shown; until then it covers the
	// chat.
	b.wait("the drawer away", `getComputedStyle(document.getElementById("drawer-toggle")).display === "none" ||
		(document.getElementById("sessions").getBoundingClientRect().right <= 0 && !document.getElementById("sessions").getAnimations().length)`)
}

func send(b *browser, text string) {
	b.do("sending "+text,
		chromedp.SetValue(chromedp.ID("prompt"), text),
		chromedp.Click(chromedp.ID("send")),
	)
}

// checkNoDuplicates fails when an entry shows twice.
func checkNoDuplicates(t *testing.T, entries []string) {
	t.Helper()
	seen := map[string]bool{}
	for _, en := range entries {
		seq, _, _ := strings.Cut(en, " ")
		if seen[seq] {
			t.Fatalf("seq %s shows twice:\n%s", seq, strings.Join(entries, "\n"))
		}
		seen[seq] = true
	}
}

func count(b *browser, selector string) int {
	return eval[int](b, `document.querySelectorAll(`+"`"+selector+"`"+`).length`)
}

// The whole round: a prompt streams its reasoning and answer, the tool
// call waits for the approval button, its result and the final answer
// follow, and a reload shows the same history once.
func TestPageChatsApprovesAndReloads(t *testing.T) {
	e := newEnv(t, envOpts{})
	b := newBrowser(t)
	openPage(t, e, b)

	// Watch the answer being streamed: a message in flight with text. The
	// records are read, not the page, since a slow page may take the
	// whole stream in one task and drop the message in flight at its end.
	eval[bool](b, `(() => { window.sawStreaming = false;
		new MutationObserver((records) => { for (const r of records) {
			const n = r.target.nodeType === 1 ? r.target : r.target.parentElement;
			const box = n && n.closest(".streaming");
			const content = box && box.querySelector(".content");
			if (content && content.textContent.length > 0) window.sawStreaming = true;
		} }).observe(document.getElementById("log"), {subtree: true, childList: true, characterData: true}); return true })()`)
	send(b, "say hello web, loudly")

	b.wait("the question", `document.querySelector("#approvals .question button[data-choice=allow-once]")`)
	if !eval[bool](b, `window.sawStreaming`) {
		t.Fatal("the answer was never shown while it streamed")
	}
	if got := eval[string](b, `document.querySelector("#log .msg.assistant:not(.streaming) .content").textContent`); got != "Let me shout that for you." {
		t.Fatalf("the first answer reads %q", got)
	}
	if got := eval[string](b, `document.querySelector("#log .msg.assistant .reasoning-text").textContent`); got != "the user wants it louder" {
		t.Fatalf("the reasoning reads %q", got)
	}
	if eval[bool](b, `document.querySelector("#log .msg.assistant:not(.streaming) .reasoning").open`) {
		t.Fatal("the reasoning of a finished message is not folded")
	}
	if got := eval[string](b, `document.querySelector("#log .tool .tool-status").textContent`); got != "asking" {
		t.Fatalf("the tool call's status is %q while it waits", got)
	}
	if !eval[bool](b, `!document.getElementById("steer").disabled && !document.getElementById("cancel").disabled`) {
		t.Fatal("steer and cancel are not offered while the turn runs")
	}

	b.do("allowing the call", chromedp.Click(chromedp.CSS(`#approvals button[data-choice=allow-once]`)))
	b.wait("the final answer", `[...document.querySelectorAll("#log .msg.assistant .content")].some(c => c.textContent === "All done: the tool shouted it.")`)
	if n := count(b, "#approvals .question"); n != 0 {
		t.Fatalf("%d questions still shown after the answer", n)
	}
	if got := eval[string](b, `document.querySelector("#log .tool .tool-result").textContent`); got != "HELLO WEB!" {
		t.Fatalf("the tool result reads %q", got)
	}
	if got := eval[string](b, `document.querySelector("#log .tool .tool-status").textContent`); got != "done" {
		t.Fatalf("the tool call's status is %q after its result", got)
	}
	b.wait("the end of the turn", `document.getElementById("steer").disabled && document.getElementById("send").textContent === "Send"`)
	before := eval[[]string](b, transcriptJS)
	checkNoDuplicates(t, before)
	if n := count(b, "#log .streaming"); n != 0 {
		t.Fatalf("%d streamed messages left beside the durable ones", n)
	}

	// At a phone's width nothing scrolls sideways, and every field has a
	// label.
	b.do("narrowing the window", chromedp.EmulateViewport(360, 740))
	if w := eval[[]int](b, `[document.documentElement.scrollWidth, window.innerWidth]`); w[0] > w[1] {
		t.Fatalf("the page is %d px wide in a %d px window", w[0], w[1])
	}
	if unlabelled := eval[[]string](b, `[...document.querySelectorAll("input, select, textarea")].filter(e => e.labels.length === 0).map(e => e.id)`); len(unlabelled) > 0 {
		t.Fatalf("fields without a label: %q", unlabelled)
	}

	b.do("reloading the page", chromedp.Reload())
	b.wait("the history after the reload", `document.getElementById("conn").textContent === "live" &&
		[...document.querySelectorAll("#log .msg.assistant .content")].some(c => c.textContent === "All done: the tool shouted it.")`)
	after := eval[[]string](b, transcriptJS)
	if !slices.Equal(before, after) {
		t.Fatalf("the history changed with the reload:\nbefore:\n%s\nafter:\n%s", strings.Join(before, "\n"), strings.Join(after, "\n"))
	}
	if n := count(b, `#log .msg.user`); n != 1 {
		t.Fatalf("%d user messages after the reload", n)
	}
	if errs := b.pageErrors(); len(errs) > 0 {
		t.Fatalf("the page logged errors:\n%s", strings.Join(errs, "\n"))
	}
}

// A stream that drops mid-turn is resumed with Last-Event-ID: the pending
// question comes again but shows once, and no event shows twice.
func TestPageReconnectsWithoutLosingOrDoublingEvents(t *testing.T) {
	e := newEnv(t, envOpts{drop: "question"})
	b := newBrowser(t)
	openPage(t, e, b)
	send(b, "say hello web, loudly")
	b.wait("the question", `document.querySelector("#approvals .question")`)
	poll(t, "a second stream", func() bool { return len(e.streams()) >= 2 })
	b.wait("the stream live again", `document.getElementById("conn").textContent === "live"`)
	streams := e.streams()
	if len(streams) < 2 || streams[0] != "" || streams[1] == "" || streams[1] == "0-0" {
		t.Fatalf("Last-Event-ID of the streams: %q; the reconnect must resume after what the page holds", streams)
	}
	if n := count(b, "#approvals .question"); n != 1 {
		t.Fatalf("%d questions shown after the reconnect", n)
	}
	b.do("allowing the call", chromedp.Click(chromedp.CSS(`#approvals button[data-choice=allow-once]`)))
	b.wait("the final answer", `[...document.querySelectorAll("#log .msg.assistant .content")].some(c => c.textContent === "All done: the tool shouted it.")`)
	entries := eval[[]string](b, transcriptJS)
	checkNoDuplicates(t, entries)
	if n := count(b, "#log .msg.assistant"); n != 2 {
		t.Fatalf("%d assistant messages:\n%s", n, strings.Join(entries, "\n"))
	}
	if errs := b.pageErrors(); len(errs) > 0 {
		t.Fatalf("the page logged errors:\n%s", strings.Join(errs, "\n"))
	}
}

// A wrong token shows the server's refusal and the token box; the right
// token typed into it opens the page.
func TestPageRefusesAWrongTokenAndTakesATypedOne(t *testing.T) {
	e := newEnv(t, envOpts{})
	b := newBrowser(t)
	b.do("opening the page with a wrong token", chromedp.Navigate(e.url+"/#token=wrong"))
	b.wait("the error", `!document.getElementById("error").hidden && !document.getElementById("token-form").hidden`)
	if got := eval[string](b, `document.getElementById("error").textContent`); !strings.Contains(got, "refused the token") {
		t.Fatalf("the error reads %q", got)
	}
	if eval[bool](b, `sessionStorage.getItem("dsh-token") !== null`) {
		t.Fatal("a refused token was kept")
	}
	b.do("typing the token",
		chromedp.SetValue(chromedp.ID("token-input"), token),
		chromedp.Click(chromedp.CSS(`#token-form button[type=submit]`)),
	)
	b.wait("the page", `!document.getElementById("app").hidden && document.getElementById("error").hidden`)
	if got := eval[string](b, `sessionStorage.getItem("dsh-token")`); got != token {
		t.Fatalf("the typed token was not kept: %q", got)
	}
}

// A prompt the admission refuses shows the refusal's message and never
// enters the conversation; the session takes the next prompt.
func TestPageShowsARefusedPrompt(t *testing.T) {
	e := newEnv(t, envOpts{})
	b := newBrowser(t)
	openPage(t, e, b)
	send(b, "something forbidden")
	b.wait("the refusal", `!document.getElementById("refusal").hidden`)
	if got := eval[string](b, `document.getElementById("refusal").textContent`); !strings.Contains(got, "prompts saying forbidden are refused here") {
		t.Fatalf("the refusal reads %q", got)
	}
	if n := count(b, "#log .msg.user"); n != 0 {
		t.Fatalf("the refused prompt shows in the conversation (%d user messages)", n)
	}
	if got := eval[string](b, `document.getElementById("prompt").value`); got != "something forbidden" {
		t.Fatalf("the refused text was not left to edit: %q", got)
	}
	send(b, "say hello web, loudly")
	b.wait("the question", `document.querySelector("#approvals .question")`)
	if !eval[bool](b, `document.getElementById("refusal").hidden`) {
		t.Fatal("the old refusal stays after a prompt was taken")
	}
	if n := count(b, "#log .notice"); n != 0 {
		t.Fatalf("the refusal shows a second time in the conversation (%d notices)", n)
	}
	cancelTurn(t, b)
	// Reloaded, the page learns the refusal from the log: once, as a
	// message not delivered, though its notice is retained too.
	b.do("reloading", chromedp.Reload())
	refused := `[...document.querySelectorAll("#log .msg.refused")].filter(d => d.innerText.includes("something forbidden") && d.innerText.includes("Refused: prompts saying forbidden")).length`
	b.wait("the refused message after a reload", refused+` === 1`)
	if n := count(b, "#log .notice"); n != 0 {
		t.Fatalf("the refusal shows twice after a reload (%d notices)", n)
	}
	if errs := b.pageErrors(); len(errs) > 0 {
		t.Fatalf("the page logged errors:\n%s", strings.Join(errs, "\n"))
	}
}

// A steering message refused while the turn waits for an approval is
// recorded in the middle of the turn, before its sender hears: the turn
// goes on, and a reload shows the refusal once, between the turn's prompt
// and its answer, as the log holds it.
func TestPageShowsARefusalDuringATurn(t *testing.T) {
	e := newEnv(t, envOpts{})
	b := newBrowser(t)
	openPage(t, e, b)
	send(b, "say hello web, loudly")
	b.wait("the question", `document.querySelector("#approvals .question button[data-choice=allow-once]")`)
	b.do("steering a forbidden message",
		chromedp.SetValue(chromedp.ID("prompt"), "something forbidden"),
		chromedp.Click(chromedp.ID("steer")),
	)
	b.wait("the refusal", `!document.getElementById("refusal").hidden`)
	b.do("allowing the call", chromedp.Click(chromedp.CSS(`#approvals button[data-choice=allow-once]`)))
	b.wait("the end of the turn", `[...document.querySelectorAll("#log .msg.assistant .content")].some(c => c.textContent === "All done: the tool shouted it.") &&
		document.getElementById("cancel").disabled`)
	b.do("reloading", chromedp.Reload())
	b.wait("the history", `[...document.querySelectorAll("#log .msg.assistant .content")].some(c => c.textContent === "All done: the tool shouted it.")`)
	entries := eval[[]string](b, transcriptJS)
	checkNoDuplicates(t, entries)
	order := []string{"say hello web", "something forbidden", "All done"}
	at, refusals := 0, 0
	for _, en := range entries {
		if strings.Contains(en, "something forbidden") {
			refusals++
		}
		if at < len(order) && strings.Contains(en, order[at]) {
			at++
		}
	}
	if at != len(order) || refusals != 1 {
		t.Fatalf("the reloaded conversation is not %q in order, the refusal once:\n%s", order, strings.Join(entries, "\n"))
	}
	if errs := b.pageErrors(); len(errs) > 0 {
		t.Fatalf("the page logged errors:\n%s", strings.Join(errs, "\n"))
	}
}

// cancelTurn cancels the running turn, which waits for an approval: the
// question is withdrawn and the turn ends aborted.
func cancelTurn(t *testing.T, b *browser) {
	t.Helper()
	b.do("cancelling the turn", chromedp.Click(chromedp.ID("cancel")))
	b.wait("the aborted turn", `[...document.querySelectorAll("#log .turn-end")].some(p => p.textContent.includes("aborted"))`)
	b.wait("the question withdrawn", `document.querySelectorAll("#approvals .question").length === 0`)
	b.wait("the turn's buttons off", `document.getElementById("cancel").disabled && document.getElementById("steer").disabled`)
}

// A message sent while a turn runs is queued for the next turn and one
// sent with Steer joins the running turn; each shows as pending until the
// turn takes it. Cancel ends the turn that follows.
func TestPageQueuesSteersAndCancels(t *testing.T) {
	e := newEnv(t, envOpts{})
	b := newBrowser(t)
	openPage(t, e, b)
	send(b, "say hello web, loudly")
	b.wait("the question", `document.querySelector("#approvals .question")`)
	if got := eval[string](b, `document.getElementById("send").textContent`); got != "Queue" {
		t.Fatalf("while a turn runs the send button says %q", got)
	}
	send(b, "and then this")
	b.do("steering",
		chromedp.SetValue(chromedp.ID("prompt"), "mind the volume"),
		chromedp.Click(chromedp.ID("steer")),
	)
	b.wait("both pending", `document.querySelectorAll("#queue .queued").length === 2`)
	if got := eval[[]string](b, `[...document.querySelectorAll("#queue .queued")].map(q => q.textContent)`); !slices.Equal(got, []string{"Queued: and then this", "Steer: mind the volume"}) {
		t.Fatalf("pending: %q", got)
	}
	b.do("allowing the call", chromedp.Click(chromedp.CSS(`#approvals button[data-choice=allow-once]`)))
	// The next turn starts with the queued message and asks again (the
	// script starts over).
	b.wait("the queued message's turn", `[...document.querySelectorAll("#log .msg.user:not(.steer) .content")].some(c => c.textContent === "and then this") &&
		document.querySelector("#approvals .question")`)
	if n := count(b, "#queue .queued"); n != 0 {
		t.Fatalf("%d messages still pending after their turns took them", n)
	}
	entries := eval[[]string](b, transcriptJS)
	checkNoDuplicates(t, entries)
	order := []string{"say hello web", "mind the volume", "All done", "and then this"}
	at := 0
	for _, en := range entries {
		if at < len(order) && strings.Contains(en, order[at]) {
			if order[at] == "mind the volume" && !strings.Contains(en, "steer") {
				t.Fatalf("the steering shows as a plain message: %s", en)
			}
			at++
		}
	}
	if at != len(order) {
		t.Fatalf("the conversation is not %q in order:\n%s", order, strings.Join(entries, "\n"))
	}
	cancelTurn(t, b)
	if errs := b.pageErrors(); len(errs) > 0 {
		t.Fatalf("the page logged errors:\n%s", strings.Join(errs, "\n"))
	}
}

// answerRound sends the prompt of the script and allows its tool call,
// up to the final answer.
func answerRound(b *browser, text string) {
	send(b, text)
	b.wait("the question", `document.querySelector("#approvals .question button[data-choice=allow-once]")`)
	b.do("allowing the call", chromedp.Click(chromedp.CSS(`#approvals button[data-choice=allow-once]`)))
	b.wait("the end of the turn", `[...document.querySelectorAll("#log .msg.assistant .content")].some(c => c.textContent === "All done: the tool shouted it.") &&
		document.getElementById("cancel").disabled`)
}

// A closed session shows its history from the store with a Resume
// button; resumed, it is live again with the same history.
func TestPageClosesAndResumesASession(t *testing.T) {
	e := newEnv(t, envOpts{})
	b := newBrowser(t)
	openPage(t, e, b)
	answerRound(b, "say hello web, loudly")
	before := eval[[]string](b, transcriptJS)

	b.do("closing the session", chromedp.Click(chromedp.ID("close")))
	b.wait("the closed session", `document.getElementById("composer").hidden && !document.getElementById("resume").hidden &&
		document.getElementById("conn").textContent.startsWith("history")`)
	b.wait("its history", `document.querySelectorAll("#log [data-seq]").length === `+strconv.Itoa(len(before)))
	if got := eval[[]string](b, transcriptJS); !slices.Equal(before, got) {
		t.Fatalf("the closed session's history differs:\nlive:\n%s\nclosed:\n%s", strings.Join(before, "\n"), strings.Join(got, "\n"))
	}
	if !eval[bool](b, `document.getElementById("error").hidden`) {
		t.Fatalf("closing showed an error: %s", eval[string](b, `document.getElementById("error").textContent`))
	}

	b.do("resuming the session", chromedp.Click(chromedp.ID("resume")))
	b.wait("the resumed session", `!document.getElementById("composer").hidden && document.getElementById("conn").textContent === "live" &&
		document.querySelectorAll("#log [data-seq]").length === `+strconv.Itoa(len(before)))
	if got := eval[[]string](b, transcriptJS); !slices.Equal(before, got) {
		t.Fatalf("the resumed session's history differs:\nbefore:\n%s\nresumed:\n%s", strings.Join(before, "\n"), strings.Join(got, "\n"))
	}
	if errs := b.pageErrors(); len(errs) > 0 {
		t.Fatalf("the page logged errors:\n%s", strings.Join(errs, "\n"))
	}
}

// The stream parser takes text cut anywhere, even inside a line ending,
// and gives each message whole: the network decides the pieces.
func TestPageParsesAStreamCutAnywhere(t *testing.T) {
	e := newEnv(t, envOpts{})
	b := newBrowser(t)
	b.do("opening the page", chromedp.Navigate(e.url+"/#token="+token))
	stream := "event: ready\r\ndata: {\"last_seq\":0}\r\n\r\n: ping\n\nevent: event\nid: 7-2\ndata: {\"seq\":7}\n\n" +
		"event: chunk\ndata:{\"a\":\ndata: 1}\n\nid: 9\n\n"
	want := `[{"event":"ready","id":null,"data":"{\"last_seq\":0}"},{"event":"event","id":"7-2","data":"{\"seq\":7}"},{"event":"chunk","id":null,"data":"{\"a\":\n1}"}]`
	got := b.evalAwait(`(async () => {
		const { SseParser } = await import("/assets/api.js");
		const text = ` + strconv.Quote(stream) + `;
		const runs = [];
		for (let cut = 0; cut <= text.length; cut++) {
			for (let cut2 = cut; cut2 <= text.length; cut2 += 7) {
				const got = [];
				const p = new SseParser((m) => got.push(m));
				p.push(text.slice(0, cut)); p.push(text.slice(cut, cut2)); p.push(text.slice(cut2));
				runs.push(JSON.stringify(got));
			}
		}
		return [...new Set(runs)];
	})()`)
	if len(got) != 1 || got[0] != want {
		t.Fatalf("the parser gave %d different results; want only\n%s\ngot\n%s", len(got), want, strings.Join(got, "\n"))
	}
}

// A message queued behind a turn that is then cancelled does not stay
// "Queued" for ever: the page shows it as not delivered, with who
// cancelled, and a reload shows the same from the log.
func TestPageShowsAMessageDroppedByCancel(t *testing.T) {
	e := newEnv(t, envOpts{})
	b := newBrowser(t)
	openPage(t, e, b)
	send(b, "say hello web, loudly")
	b.wait("the question", `document.querySelector("#approvals .question")`)
	send(b, "queued, then cancelled")
	b.wait("pending", `document.querySelectorAll("#queue .queued").length === 1`)
	cancelTurn(t, b)
	dropped := `[...document.querySelectorAll("#log .msg.dropped")].some(d => d.innerText.includes("queued, then cancelled") && d.innerText.includes("HTTP client"))`
	b.wait("the dropped message", dropped+` && document.querySelectorAll("#queue .queued").length === 0`)
	b.do("reloading", chromedp.Reload())
	b.wait("the dropped message after a reload", dropped)
	if errs := b.pageErrors(); len(errs) > 0 {
		t.Fatalf("the page logged errors:\n%s", strings.Join(errs, "\n"))
	}
}
