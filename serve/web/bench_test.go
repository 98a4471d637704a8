package web_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
)

// The page's two figures (BENCHMARKS.md), measured in Chromium; CI runs
// them once each:
//
//	go test ./serve/web -run xxx -bench Page -benchtime 1x
//
// Each iteration is one page load or one streamed answer; the figures are
// reported as metrics (the ns/op of a browser round is not one).

// BenchmarkPageFirstPaint opens a session of 2,000 messages (1,000 turns
// with Markdown answers, a tool call every 50) beside 500 others, and
// measures the time from navigation to its last message painted in view,
// and to that message's Markdown rendered.
func BenchmarkPageFirstPaint(b *testing.B) {
	e := newEnv(b, envOpts{})
	const big = "big-session"
	last := seedSessions(b, e.sessionDir, 500, 1000, big)
	if st, out := apiCall(b, e, "POST", "/v1/sessions/"+big+"/resume", `{}`); st != 200 {
		b.Fatalf("resume: %d %v", st, out)
	}
	br := newBrowser(b)
	br.do("a desktop window", chromedp.EmulateViewport(1280, 800))
	var shown, rendered []float64
	for b.Loop() {
		br.do("a blank page", chromedp.Navigate("about:blank"))
		br.do("opening the session", chromedp.Navigate(e.url+"/#token="+token+"&session="+big))
		t := br.evalAwait(firstPaintJS(last))
		s, _ := strconv.ParseFloat(t[0], 64)
		r, _ := strconv.ParseFloat(t[1], 64)
		shown, rendered = append(shown, s), append(rendered, r)
	}
	b.ReportMetric(median(shown), "ms-painted")
	b.ReportMetric(median(rendered), "ms-rendered")
	b.Logf("last message painted (ms): %v; rendered: %v", shown, rendered)
}

// BenchmarkPageStreaming streams a 10 KB Markdown answer (prose, lists,
// code, a table; about 1,700 chunks) into the page and measures the main
// thread meanwhile: the long tasks (over 50 ms, which the browser
// reports), the longest of them, and the 95th percentile of the frames.
func BenchmarkPageStreaming(b *testing.B) {
	var sb strings.Builder
	for i := 0; sb.Len() < 10_000; i++ {
		fmt.Fprintf(&sb, "## Part %d\n\nThis part explains **step %d** of the change, with `code` and a list:\n\n- first point of %d\n- second point\n\n```go\nfunc f%d(x int) int {\n\treturn x * %d\n}\n```\n\n| a | b |\n|---|---|\n| %d | %d |\n\n", i, i, i, i, i, i, i)
	}
	answer := sb.String()
	e := newEnv(b, envOpts{replies: []scripted.Reply{{Text: answer}}, delay: "1ms"})
	br := newBrowser(b)
	br.do("a desktop window", chromedp.EmulateViewport(1280, 800))
	openPage(b, e, br)
	var longest, frames95 []float64
	longTasks := 0
	for b.Loop() {
		eval[bool](br, `(() => { window.longTasks = []; window.frames = []; window.streaming = true;
			new PerformanceObserver((l) => { for (const e of l.getEntries()) window.longTasks.push(e.duration) }).observe({type: "longtask"});
			let last = performance.now();
			const tick = (now) => { window.frames.push(now - last); last = now; if (window.streaming) requestAnimationFrame(tick) };
			requestAnimationFrame(tick); return true })()`)
		n := count(br, "#log .msg.assistant:not(.streaming)")
		send(br, "explain the change")
		br.wait("the answer", `document.querySelectorAll("#log .msg.assistant:not(.streaming)").length === `+strconv.Itoa(n+1)+` && document.getElementById("cancel").disabled`)
		got := eval[[]float64](br, `(() => { window.streaming = false; const f = window.frames.slice(1).sort((a, b) => a - b);
			return [Math.max(0, ...window.longTasks), window.longTasks.length, f[Math.floor(f.length * 0.95)] || 0] })()`)
		longest, frames95 = append(longest, got[0]), append(frames95, got[2])
		longTasks += int(got[1])
		if !eval[bool](br, `document.querySelectorAll("#log .msg.assistant:not(.streaming)")[`+strconv.Itoa(n)+`].querySelectorAll(".content table").length > 5`) {
			b.Fatal("the streamed answer was not rendered")
		}
	}
	b.ReportMetric(slices.Max(longest), "ms-longest-task")
	b.ReportMetric(float64(longTasks)/float64(len(longest)), "long-tasks/op")
	b.ReportMetric(median(frames95), "ms-frame-p95")
	b.Logf("%d bytes streamed; longest task (ms) %v, long tasks %d, frame p95 (ms) %v", len(answer), longest, longTasks, frames95)
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
