package web_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
)

// answerMD is an answer with what a reader expects rendered, and what a
// prompt injection would try: a script, an image with a handler, a
// javascript: link.
const answerMD = "## Result\n\nThe **build** passes; see `main.go`.\n\n" +
	"```go\nfunc main() {\n\tprintln(\"hi\")\n}\n```\n\n" +
	"| file | lines |\n|:-----|------:|\n| main.go | 12 |\n| util.go | 40 |\n\n" +
	"<script>window.pwned = 1</script>\n\n" +
	"Inline <img src=x onerror=\"window.pwned = 2\"> and [a link](javascript:window.pwned=3) and <b onmouseover=\"window.pwned=4\">bold</b>.\n"

// An answer streams in as rendered Markdown — the heading made while it
// streamed (once whole) is the one that stays (nothing is rebuilt when the message
// lands) — with highlighted code in a monospace font and a copy button, a
// table, and nothing of the HTML in it live. The edit it asks for shows
// as a coloured diff, in the question and in the folded tool row.
func TestPageRendersAnswersAndDiffsSafely(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("one\ntwo\nfour\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOpts{
		replies: []scripted.Reply{
			{Text: answerMD, ToolCalls: []scripted.Call{{Name: "edit", Arguments: `{"path":"notes.txt","old":"two\n","new":"TWO\nthree\n"}`}}},
			{Text: "Edited."},
		},
		agentYAML:  "    workspace: " + ws + "\n",
		pluginYAML: "  - use: tools.files\n  - use: tools.permission\n    config: {rules: [{tool: edit, decision: ask}]}\n",
	})
	b := newBrowser(t)
	b.do("a desktop window", chromedp.EmulateViewport(1280, 800))
	openPage(t, e, b)
	eval[bool](b, `(() => { window.firstH2 = null;
		new MutationObserver(() => { const c = document.querySelector("#log .msg.streaming .content");
			if (!window.firstH2 && c && c.querySelector("table")) window.firstH2 = c.querySelector("h2"); })
			.observe(document.getElementById("log"), {subtree: true, childList: true}); return true })()`)
	send(b, "check the build")
	b.wait("the edit's question", `document.querySelector("#approvals .question .diff")`)
	if got := eval[[]string](b, `[...document.querySelectorAll("#approvals .question .diff span")].map(s => s.className + ":" + s.textContent.trim())`); strings.Join(got, "|") != "diff-file:notes.txt|del:- two|add:+ TWO|add:+ three" {
		t.Fatalf("the question's diff reads %q", got)
	}
	b.do("allowing the edit", chromedp.Click(chromedp.CSS(`#approvals button[data-choice=allow-once]`)))
	b.wait("the end of the turn", `document.querySelector("#log .turn-sum") && document.querySelector("#log .msg.assistant:not(.streaming) .content h2") &&
		[...document.querySelectorAll("#log .msg.assistant .content")].some(c => c.textContent === "Edited.")`)

	msg := `document.querySelector("#log .msg.assistant .content")`
	if !eval[bool](b, `window.firstH2 !== null && window.firstH2 === `+msg+`.querySelector("h2")`) {
		t.Fatal("the heading rendered while the answer streamed was rebuilt when the message landed (it would blink)")
	}
	checks := map[string]string{
		"the heading":              msg + `.querySelector("h2").textContent === "Result"`,
		"bold":                     msg + `.querySelector("strong").textContent === "build"`,
		"highlighted Go":           msg + `.querySelector("pre.chroma code.language-go span.kd") !== null`,
		"monospace code":           `getComputedStyle(` + msg + `.querySelector("pre code")).fontFamily.includes("monospace")`,
		"coloured keywords":        `getComputedStyle(` + msg + `.querySelector("pre span.kd")).color !== getComputedStyle(` + msg + `.querySelector("pre")).color`,
		"a copy button":            msg + `.querySelector("pre > button.copy") !== null`,
		"a table":                  msg + `.querySelectorAll("table th").length === 2 && ` + msg + `.querySelectorAll("table tbody tr").length === 2`,
		"right-aligned numbers":    `getComputedStyle(` + msg + `.querySelector("tbody td[align=right]")).textAlign === "right"`,
		"the script as text":       msg + `.textContent.includes("<script>window.pwned = 1</script>")`,
		"no script element":        `document.querySelectorAll("#log script").length === 0`,
		"no image":                 `document.querySelectorAll("#log img").length === 0`,
		"no handler attribute":     `[...document.querySelectorAll("#log *")].every(e => [...e.attributes].every(a => !a.name.startsWith("on")))`,
		"no javascript: link":      `[...document.querySelectorAll("#log a")].every(a => !a.href.startsWith("javascript:"))`,
		"nothing ran":              `window.pwned === undefined`,
		"the edit row folded":      `(() => { const r = document.querySelector("#log .tool[data-tool=edit]"); return r.tagName === "DETAILS" && !r.open })()`,
		"the edit's summary":       `document.querySelector("#log .tool[data-tool=edit] .tool-summary").textContent === "notes.txt"`,
		"the edit done":            `document.querySelector("#log .tool[data-tool=edit] .tool-status").textContent === "done"`,
		"green additions":          `(() => { const a = getComputedStyle(document.querySelector("#log .tool .diff .add")).backgroundColor, d = getComputedStyle(document.querySelector("#log .tool .diff .del")).backgroundColor; return a !== d && a !== "rgba(0, 0, 0, 0)" })()`,
		"a time on each message":   `[...document.querySelectorAll("#log .msg")].every(m => m.querySelector("time.when[datetime]"))`,
		"a step's tokens and cost": `[...document.querySelectorAll("#log .step-meta")].some(p => / in · \d+ out · 0\.\d+ EUR/.test(p.textContent))`,
		"the turn's duration":      `/^Turn 1 · [\d.]+ (ms|s) · 2 steps · .* EUR$/.test(document.querySelector("#log .turn-sum").textContent)`,
		"the session's usage":      `/EUR$/.test(document.getElementById("session-usage").textContent)`,
	}
	for what, cond := range checks {
		if !eval[bool](b, cond) {
			t.Errorf("no %s: %s\nthe answer's HTML: %s", what, cond, eval[string](b, msg+`.outerHTML`))
		}
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "notes.txt")); string(got) != "one\nTWO\nthree\nfour\n" {
		t.Fatalf("the edit did not run: %q", got)
	}
	b.do("unfolding the edit", chromedp.Click(chromedp.CSS(`#log .tool[data-tool=edit] summary`)))
	b.wait("its diff and output", `document.querySelector("#log .tool[data-tool=edit]").open && document.querySelector("#log .tool[data-tool=edit] .diff .add").offsetHeight > 0`)
	if errs := b.pageErrors(); len(errs) > 0 {
		t.Fatalf("the page logged errors:\n%s", strings.Join(errs, "\n"))
	}
}

// While an answer streams, the text after the last rendering goes on in
// the rendered paragraph, with the space the rendering dropped: "Let" and
// " me" read "Let me", on one line, never "Letme".
func TestPageStreamsTextAfterARendering(t *testing.T) {
	e := newEnv(t, envOpts{})
	b := newBrowser(t)
	b.do("opening the page", chromedp.Navigate(e.url+"/#token="+token))
	got := b.evalAwait(`(async () => {
		const { Markdown } = await import("/assets/markdown.js");
		let release;
		const md = new Markdown((texts) => new Promise((r) => { release = () => r(texts.map((t) => "<p>" + t.trim() + "</p>\n")) }));
		const box = document.createElement("div");
		document.body.append(box);
		md.stream(box, "Let ");
		await new Promise((r) => setTimeout(r, 10));
		release();
		await new Promise((r) => setTimeout(r, 10));
		md.stream(box, "Let me say");
		const p = box.querySelector("p");
		return [box.textContent, String(box.children.length), p.lastChild.className || "", p.firstChild.textContent];
	})()`)
	if want := []string{"Let me say", "1", "md-tail", "Let"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("the streamed box reads %q, want %q", got, want)
	}
}

// A tool row says what became of its call: denied when a person said no,
// interrupted when the turn was cancelled while it asked, failed when the
// tool failed; after a reload the same, from the log alone. The copy
// button of a code block copies its code (or selects it where the
// browser gives no clipboard).
func TestPageToolStatesAndCopy(t *testing.T) {
	e := newEnv(t, envOpts{replies: []scripted.Reply{
		{Text: "```sh\necho hi\n```", ToolCalls: []scripted.Call{{Name: "shout", Arguments: `{"text":"one"}`}}},
		{Text: "Denied, then."},
		{Text: "Again.", ToolCalls: []scripted.Call{{Name: "shout", Arguments: `{"text":"two"}`}}},
		{Text: "Broken.", ToolCalls: []scripted.Call{{Name: "shout", Arguments: `{"txt":3}`}}},
		{Text: "It failed."},
	}})
	b := newBrowser(t)
	b.do("a desktop window", chromedp.EmulateViewport(1280, 800))
	openPage(t, e, b)
	states := `[...document.querySelectorAll("#log .tool .tool-status")].map(s => s.textContent)`

	send(b, "first")
	b.wait("the question", `document.querySelector("#approvals .question button[data-choice=deny]")`)
	b.do("denying", chromedp.Click(chromedp.CSS(`#approvals button[data-choice=deny]`)))
	b.wait("the turn's end", `document.querySelectorAll("#log .turn-sum").length === 1`)
	send(b, "second")
	b.wait("the second question", `document.querySelector("#approvals .question")`)
	cancelTurn(t, b)
	send(b, "third")
	b.wait("the third turn's end", `document.querySelectorAll("#log .turn-sum").length === 3`)
	want := "denied|interrupted|failed"
	if got := eval[[]string](b, states); strings.Join(got, "|") != want {
		t.Fatalf("the calls read %q, want %s", got, want)
	}
	b.do("reloading", chromedp.Reload())
	b.wait("the history", `document.querySelectorAll("#log .turn-sum").length === 3`)
	if got := eval[[]string](b, states); strings.Join(got, "|") != want {
		t.Fatalf("after a reload the calls read %q, want %s", got, want)
	}

	b.wait("the code rendered", `document.querySelector("#log pre > button.copy")`)
	b.do("copying", chromedp.Click(chromedp.CSS(`#log pre > button.copy`)))
	b.wait("copied or selected", `["Copied", "Selected"].includes(document.querySelector("#log pre > button.copy").textContent)`)
	if eval[string](b, `document.querySelector("#log pre > button.copy").textContent`) == "Selected" {
		if got := eval[string](b, `getSelection().toString()`); got != "echo hi\n" {
			t.Fatalf("the selection holds %q", got)
		}
	}
}
