package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The page says what became of its connection: lost while the server
// still answers (reconnecting), the server gone (nothing answers), and
// live again once it is back, with nothing lost or doubled.
func TestPageSaysWhatBecameOfTheConnection(t *testing.T) {
	e := newEnv(t, envOpts{})
	b := newBrowser(t)
	openPage(t, e, b)
	answerRound(b, "say hello web, loudly")
	before := eval[[]string](b, transcriptJS)

	e.streamDown.Store(true)
	e.cutStreams()
	b.wait("the reconnecting banner", `!document.getElementById("banner").hidden && document.getElementById("banner").dataset.state === "reconnecting" &&
		document.getElementById("banner-text").textContent.startsWith("Connection lost; reconnecting") && document.getElementById("conn").textContent === "reconnecting"`)

	e.down.Store(true)
	b.wait("the server-gone banner", `document.getElementById("banner").dataset.state === "gone" && document.getElementById("banner-text").textContent.startsWith("The server does not answer") &&
		document.getElementById("conn").textContent === "server gone"`)

	e.down.Store(false)
	e.streamDown.Store(false)
	b.do("retrying now", chromedp.Click(chromedp.ID("banner-retry")))
	b.wait("live again", `document.getElementById("conn").textContent === "live" && document.getElementById("banner").hidden`)
	if after := eval[[]string](b, transcriptJS); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("the conversation changed across the outage:\nbefore:\n%s\nafter:\n%s", strings.Join(before, "\n"), strings.Join(after, "\n"))
	}
	answerRound(b, "again")
}
