package web_test

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// pngSized is a real PNG of the given size, so the page's <img> shows
// that the bytes arrived whole (naturalWidth).
func pngSized(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// imagesShown lists the message images the page shows, as
// "<alt> <naturalWidth> <src scheme>"; an image not loaded yet has width 0.
const imagesShown = `[...document.querySelectorAll("#log .msg.user img.part-image")].map(i => i.alt + " " + i.naturalWidth + " " + i.src.split(":")[0])`

// An image chosen in the file input and one pasted into the message box
// go with the message as a multipart upload; the conversation shows both
// (fetched with the token, shown from blob: URLs the page's policy allows),
// and so does the history after a reload.
func TestPageSendsImagesAndShowsThemAfterAReload(t *testing.T) {
	e := newEnv(t, envOpts{})
	b := newBrowser(t)
	openPage(t, e, b)

	shot := filepath.Join(t.TempDir(), "shot.png")
	if err := os.WriteFile(shot, pngSized(t, 8, 6), 0o600); err != nil {
		t.Fatal(err)
	}
	b.do("choosing a file", chromedp.SetUploadFiles(chromedp.ID("attach"), []string{shot}))
	pasted := base64.StdEncoding.EncodeToString(pngSized(t, 5, 3))
	eval[bool](b, `(() => {
		const bytes = Uint8Array.from(atob("`+pasted+`"), c => c.charCodeAt(0));
		const dt = new DataTransfer();
		dt.items.add(new File([bytes], "pasted.png", {type: "image/png"}));
		document.getElementById("prompt").dispatchEvent(new ClipboardEvent("paste", {clipboardData: dt, bubbles: true, cancelable: true}));
		return true })()`)
	b.wait("both files listed", `document.querySelectorAll("#attached .attached-file").length === 2`)
	if got := eval[string](b, `document.getElementById("attached").innerText`); !strings.Contains(got, "shot.png") || !strings.Contains(got, "pasted.png") {
		t.Fatalf("the files to send read %q", got)
	}

	answerRound(b, "what is in these pictures?")
	want := []string{"shot.png 8 blob", "pasted.png 5 blob"}
	b.wait("the images shown", imagesShown+`.join("|") === `+strconv.Quote(strings.Join(want, "|")))
	if n := count(b, "#attached .attached-file"); n != 0 {
		t.Fatalf("%d files still listed after the message was sent", n)
	}
	if got := eval[string](b, `document.querySelector("#log .msg.user .content").textContent`); got != "what is in these pictures?" {
		t.Fatalf("the message reads %q", got)
	}
	before := eval[[]string](b, transcriptJS)

	b.do("reloading the page", chromedp.Reload())
	b.wait("the images after the reload", `document.getElementById("conn").textContent === "live" && `+
		imagesShown+`.join("|") === `+strconv.Quote(strings.Join(want, "|")))
	if after := eval[[]string](b, transcriptJS); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("the history changed with the reload:\nbefore:\n%s\nafter:\n%s", strings.Join(before, "\n"), strings.Join(after, "\n"))
	}
	if errs := b.pageErrors(); len(errs) > 0 {
		t.Fatalf("the page logged errors:\n%s", strings.Join(errs, "\n"))
	}
}
