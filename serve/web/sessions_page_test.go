package web_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
)

// The list finds sessions by a search, a session is renamed (the title
// outlives a reload) and deleted (gone from the list and the store), and
// a new session takes a workspace and a preset.
func TestPageSearchesRenamesDeletesAndOpensWithOptions(t *testing.T) {
	ws := t.TempDir()
	e := newEnv(t, envOpts{serveYAML: "  workspaces: [" + ws + "]\n  client_presets: [read-only]\n"})
	seedSessions(t, e.sessionDir, 30, 0, "empty")
	os.Remove(filepath.Join(e.sessionDir, "empty.jsonl"))
	b := newBrowser(t)
	b.do("a desktop window", chromedp.EmulateViewport(1280, 800))
	b.do("opening the page", chromedp.Navigate(e.url+"/#token="+token))
	b.wait("the list", `document.querySelectorAll("#session-list .session-item").length === 30`)

	b.do("searching", chromedp.SendKeys(chromedp.ID("search"), "package p17"))
	b.wait("one match", `document.querySelectorAll("#session-list .session-item").length === 1`)
	if got := eval[string](b, `document.getElementById("session-count").textContent`); got != "1 of 30" {
		t.Fatalf("the count reads %q", got)
	}
	b.do("opening it", chromedp.Click(chromedp.CSS(`#session-list .session-item`)))
	b.wait("its history", `document.getElementById("chat-title").textContent === "task 17: tidy the imports of package p17" && document.querySelector("#log .msg.user")`)

	b.do("renaming", chromedp.Click(chromedp.ID("rename")))
	b.do("typing the title", chromedp.SetValue(chromedp.ID("rename-input"), "imports of p17"), chromedp.Click(chromedp.CSS("#rename-form button[type=submit]")))
	b.wait("the new title", `document.getElementById("chat-title").textContent === "imports of p17" &&
		document.querySelector("#session-list .session-item[aria-current=true] .title").textContent === "imports of p17"`)
	b.do("reloading", chromedp.Reload())
	b.wait("the title after a reload", `document.getElementById("chat-title").textContent === "imports of p17"`)

	b.do("deleting", chromedp.Click(chromedp.ID("delete")))
	if got := eval[string](b, `document.getElementById("delete").textContent`); got != "Delete for good?" {
		t.Fatalf("one press deleted, or the button reads %q", got)
	}
	b.do("confirming", chromedp.Click(chromedp.ID("delete")))
	b.wait("the session gone", `document.querySelectorAll("#session-list .session-item").length === 29 && document.getElementById("chat-title").textContent === "No session"`)
	if _, err := os.Stat(filepath.Join(e.sessionDir, "s-0017.jsonl")); !os.IsNotExist(err) {
		t.Fatalf("the deleted session's log is still there: %v", err)
	}
	if _, out := apiCall(t, e, "GET", "/v1/titles", ""); len(out["titles"].(map[string]any)) != 0 {
		t.Fatalf("the deleted session's title stays: %v", out)
	}

	b.do("choosing options", chromedp.Click(chromedp.CSS(".new-options summary")),
		chromedp.SetValue(chromedp.ID("workspace"), ws),
		chromedp.Click(chromedp.CSS(`#presets input[value="read-only"]`)),
		chromedp.Click(chromedp.CSS(`#new-session button[type=submit]`)))
	b.wait("the new session", `document.getElementById("conn").textContent === "live"`)
	e.mu.Lock()
	opened := e.opened[len(e.opened)-1]
	e.mu.Unlock()
	if want := `{"agent":"main","workspace":"` + ws + `","presets":["read-only"]}`; opened != want {
		t.Fatalf("the page asked for %s, want %s", opened, want)
	}
	if errs := b.pageErrors(); len(errs) > 0 {
		t.Fatalf("the page logged errors:\n%s", strings.Join(errs, "\n"))
	}
}

// Enter sends, Shift+Enter breaks the line, Escape cancels the running
// turn and keeps what it had answered, and ? lists the shortcuts.
func TestPageKeyboard(t *testing.T) {
	e := newEnv(t, envOpts{replies: []scripted.Reply{{Text: strings.Repeat("word ", 400)}}, pluginYAML: ""})
	b := newBrowser(t)
	b.do("a desktop window", chromedp.EmulateViewport(1280, 800))
	openPage(t, e, b)
	b.do("typing two lines", chromedp.Click(chromedp.ID("prompt")), chromedp.KeyEvent("first"), chromedp.KeyEvent("\r", chromedp.KeyModifiers(chromedp.ModifierShift)), chromedp.KeyEvent("second"))
	if got := eval[string](b, `document.getElementById("prompt").value`); got != "first\nsecond" {
		t.Fatalf("Shift+Enter gave %q", got)
	}
	if n := count(b, "#log .msg.user"); n != 0 {
		t.Fatal("Shift+Enter sent the message")
	}
	b.do("pressing Enter", chromedp.KeyEvent("\r"))
	b.wait("the message sent", `[...document.querySelectorAll("#log .msg.user .content")].some(c => c.textContent === "first\nsecond") && document.getElementById("prompt").value === ""`)
	b.wait("the answer streaming", `document.querySelector("#log .msg.streaming .content") && document.querySelector("#log .msg.streaming .content").textContent.length > 20`)
	b.do("pressing Escape", chromedp.KeyEvent("\x1b"))
	b.wait("the cut answer kept", `[...document.querySelectorAll("#log .msg.assistant")].some(m => m.querySelector(".cut-note") && m.querySelector(".content").textContent.startsWith("word word"))`)
	b.wait("the turn ended", `document.getElementById("cancel").disabled && [...document.querySelectorAll("#log .turn-end")].some(p => p.textContent.includes("aborted"))`)

	b.do("focusing the page", chromedp.Click(chromedp.ID("chat-title")))
	b.do("pressing ?", chromedp.KeyEvent("?"))
	b.wait("the shortcuts", `document.getElementById("shortcuts").open && document.getElementById("shortcuts").innerText.includes("Shift+Enter")`)
	b.do("closing them", chromedp.KeyEvent("\x1b"))
	b.wait("the shortcuts closed", `!document.getElementById("shortcuts").open`)
	b.do("pressing /", chromedp.KeyEvent("/"))
	b.wait("the search focused", `document.activeElement === document.getElementById("search")`)
	if errs := b.pageErrors(); len(errs) > 0 {
		t.Fatalf("the page logged errors:\n%s", strings.Join(errs, "\n"))
	}
}
