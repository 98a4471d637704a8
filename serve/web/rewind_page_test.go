package web_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/session"
)

// visibleJS is the conversation as a reader sees it: the entries a rewind
// did not hide.
const visibleJS = `[...document.querySelectorAll("#log > [data-seq]")].filter(e => !e.hidden).map(e => e.innerText.replace(/\s+/g, " ").trim())`

// TestPageRewindsATurnAndKillsAJob: a turn's bash writes a file; the file
// is edited by hand, so the page's rewind (code and conversation) is
// refused naming it, and its Force rewinds: the file is gone, the turn is
// hidden and one line says what was undone; Redo brings both back. A
// later turn starts a background job, which the jobs panel lists and
// kills, and the process is gone. Closed, the session offers no rewind.
func TestPageRewindsATurnAndKillsAJob(t *testing.T) {
	ws := t.TempDir()
	made := filepath.Join(ws, "made.txt")
	write, _ := json.Marshal(map[string]string{"command": "echo hi > made.txt"})
	e := newEnv(t, envOpts{
		replies: []scripted.Reply{
			{Text: "writing", ToolCalls: []scripted.Call{{Name: "bash", Arguments: string(write)}}},
			{Text: "written"},
			{ToolCalls: []scripted.Call{{Name: "bash", Arguments: `{"command": "sleep 300", "background": true}`}}},
			{Text: "started"},
		},
		pluginYAML: "  - use: tools.bash\n    config: {jobs: {enabled: true, wake: off}, sandbox: {mode: off}}\n" +
			"  - use: tools.permission\n    config: {mode: full-access}\n  - use: session.checkpoints\n",
		agentYAML: "    workspace: " + ws + "\n",
	})
	b := newBrowser(t)
	openPage(t, e, b)

	send(b, "make the file")
	b.wait("the turn's end", `document.querySelector("#log .turn-sum") && !document.querySelector("#log .streaming")`)
	if data, err := os.ReadFile(made); err != nil || string(data) != "hi\n" {
		t.Fatalf("the turn wrote %q, %v", data, err)
	}
	before := eval[[]string](b, visibleJS)

	// Changed since the checkpoint: refused, with the path and a force.
	if err := os.WriteFile(made, []byte("by hand\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b.do("asking for the rewind",
		chromedp.Click(chromedp.CSS(`#log article[data-turn="1"] .rewind-control summary`)),
		chromedp.Click(chromedp.CSS(`#log article[data-turn="1"] [data-rewind=both]`)),
	)
	b.wait("the refusal", `document.querySelector("#log .rewind-error .force")`)
	if msg := eval[string](b, `document.querySelector("#log .rewind-error").innerText`); !strings.Contains(msg, "made.txt") {
		t.Fatalf("the refusal does not name the changed file: %q", msg)
	}
	if _, err := os.Stat(made); err != nil {
		t.Fatalf("a refused rewind touched the file: %v", err)
	}
	screenshot(t, b, "rewind-refused.png")
	b.do("forcing it", chromedp.Click(chromedp.CSS(`#log .rewind-error .force`)))
	b.wait("the rewind's line", `document.querySelector("#log .rewind-line.rewind")`)
	if _, err := os.Stat(made); !os.IsNotExist(err) {
		t.Fatalf("the file is still there after the rewind: %v", err)
	}
	after := eval[[]string](b, visibleJS)
	if len(after) != 1 || !strings.HasPrefix(after[0], "Rewound code and conversation to before turn 1") || !strings.Contains(after[0], "forced") {
		t.Fatalf("after the rewind the page shows:\n%s", strings.Join(after, "\n"))
	}

	// Redo: the file and the turn come back, and a line says so.
	b.do("redoing", chromedp.Click(chromedp.CSS(`#log .redo-button`)))
	b.wait("the redo's line", `document.querySelector("#log .rewind-line.redo")`)
	if data, err := os.ReadFile(made); err != nil || string(data) != "by hand\n" {
		t.Fatalf("after the redo the file holds %q, %v", data, err)
	}
	redone := eval[[]string](b, visibleJS)
	if len(redone) != len(before)+2 || strings.Join(redone[:len(before)], "\n") != strings.Join(before, "\n") {
		t.Fatalf("after the redo the page shows:\n%s\nbefore the rewind it showed:\n%s", strings.Join(redone, "\n"), strings.Join(before, "\n"))
	}

	// A background job: listed while the panel is open, and killed.
	if !eval[bool](b, `document.getElementById("jobs").hidden`) {
		t.Fatal("the jobs panel shows before the session has a job")
	}
	send(b, "start a job")
	b.wait("the jobs panel", `!document.getElementById("jobs").hidden`)
	b.do("unfolding the jobs", chromedp.Click(chromedp.CSS(`#jobs summary`)))
	b.wait("the job listed", `document.querySelector("#job-list .job.running .kill")`)
	id := eval[string](b, `new URLSearchParams(location.hash.slice(1)).get("session")`)
	pid := jobPid(t, e, id)
	screenshot(t, b, "jobs.png")
	b.do("killing it", chromedp.Click(chromedp.CSS(`#job-list .job.running .kill`)))
	b.wait("the job ended", `document.querySelector("#job-list .job.ended") && !document.querySelector("#job-list .job.running")`)
	if st := eval[string](b, `document.querySelector("#job-list .job.ended").innerText`); !strings.Contains(st, "killed") {
		t.Fatalf("the ended job says %q", st)
	}
	// The kill answers once the group is gone; its watcher reaps it.
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(-pid, 0) != syscall.ESRCH {
		if time.Now().After(deadline) {
			t.Fatalf("the job's process group %d outlived the page's kill", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A closed session is history: it offers no rewind and no redo.
	b.do("closing the session", chromedp.Click(chromedp.ID("close")))
	b.wait("the history", `document.getElementById("composer").hidden && document.querySelectorAll("#log .rewind-control").length === 2`)
	if shown := eval[int](b, `[...document.querySelectorAll("#log :is(.rewind-control, .redo-button)")].filter((e) => e.offsetParent).length`); shown != 0 {
		t.Fatalf("a closed session shows %d rewind or redo controls", shown)
	}
	if errs := b.pageErrors(); len(errs) > 0 {
		t.Fatalf("page errors:\n%s", strings.Join(errs, "\n"))
	}
}

// TestPageShowsTheGoal: a goal set through the API shows above the
// conversation with its objective, state and what it spent of its budget
// (a Go duration read as one), and follows the goal's events until the
// model reports it complete.
func TestPageShowsTheGoal(t *testing.T) {
	e := newEnv(t, envOpts{
		extraYAML: "goals:\n  min_backoff: 5ms\n  max_backoff: 20ms\n",
		replies: []scripted.Reply{
			{Text: "looking around"},
			{ToolCalls: []scripted.Call{{Name: "goal_status", Arguments: `{"status":"complete","reason":"all done"}`}}},
			{Text: "finished"},
		},
	})
	b := newBrowser(t)
	openPage(t, e, b)
	if !eval[bool](b, `document.getElementById("goal").hidden`) {
		t.Fatal("a session without a goal shows one")
	}
	id := eval[string](b, `new URLSearchParams(location.hash.slice(1)).get("session")`)
	body := strings.NewReader(`{"objective": "tidy the repository", "budget": {"turns": 5, "time": "10m"}}`)
	req, _ := http.NewRequest("POST", e.url+"/v1/sessions/"+id+"/goal", body)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("setting the goal: %s", res.Status)
	}
	b.wait("the goal complete", `document.getElementById("goal").dataset.state === "complete"`)
	got := eval[string](b, `document.getElementById("goal").innerText`)
	for _, want := range []string{"tidy the repository", "complete (all done)", "1 of 5 turns", " of 10 min 0 s"} {
		if !strings.Contains(got, want) {
			t.Fatalf("the goal line %q lacks %q", got, want)
		}
	}
}

// jobPid returns the pid of the session's running job, read from the API.
func jobPid(t *testing.T, e *env, id string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", e.url+"/v1/sessions/"+id+"/jobs", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var list struct {
		Jobs []struct {
			Pid     int  `json:"pid"`
			Running bool `json:"running"`
		} `json:"jobs"`
	}
	if err := json.NewDecoder(res.Body).Decode(&list); err != nil || len(list.Jobs) != 1 || !list.Jobs[0].Running || list.Jobs[0].Pid == 0 {
		t.Fatalf("the jobs of %s: %+v, %v", id, list, err)
	}
	return list.Jobs[0].Pid
}

// TestPageHidesWhatSessionVisibleHides: the page's rule for what a rewind
// undid (rewind.js) agrees with session.Visible's on logs of rewinds,
// redos, a rewind of code only and a rewind undoing one before it.
func TestPageHidesWhatSessionVisibleHides(t *testing.T) {
	e := newEnv(t, envOpts{})
	b := newBrowser(t)
	b.do("opening the page", chromedp.Navigate(e.url+"/#token="+token))
	b.wait("the page", `!document.getElementById("app").hidden`)
	rw := func(seq, from, through int64, conv bool) session.Event {
		r := &session.Rewind{Code: true, Conversation: conv, To: session.Point{Turn: 1}}
		if conv {
			r.From, r.Through = from, through
		}
		return session.Event{Seq: seq, Type: session.Rewound, Rewind: r}
	}
	redo := func(seq, of int64) session.Event {
		return session.Event{Seq: seq, Type: session.Redone, Rewind: &session.Rewind{Redo: of}}
	}
	logs := map[string][]session.Event{
		"a rewind":                     {rw(5, 2, 4, true)},
		"a rewind redone":              {rw(5, 2, 4, true), redo(6, 5)},
		"code only":                    {rw(5, 2, 4, false)},
		"two, the later one redone":    {rw(5, 3, 4, true), rw(8, 1, 7, true), redo(9, 8)},
		"a redo of a rewind not there": {rw(5, 3, 4, true), redo(6, 2)},
		"rewind, redo, rewind":         {rw(5, 2, 4, true), redo(6, 5), rw(9, 6, 8, true)},
	}
	for name, marks := range logs {
		// A log of seqs 1..12 with the rewinds and redos at their seqs.
		var evs []session.Event
		for seq := int64(1); seq <= 12; seq++ {
			ev := session.Event{Seq: seq, Type: session.UserMessage}
			for _, m := range marks {
				if m.Seq == seq {
					ev = m
				}
			}
			evs = append(evs, ev)
		}
		var want []string
		for _, ev := range session.Visible(evs) {
			want = append(want, strconv.FormatInt(ev.Seq, 10))
		}
		js, _ := json.Marshal(evs)
		got := b.evalAwait(`(async () => {
			const { Undo } = await import("/assets/rewind.js");
			const u = new Undo();
			const log = document.createElement("div");
			for (const ev of ` + string(js) + `) {
				if (ev.rewind) u.add(ev);
				const n = document.createElement("p");
				n.dataset.seq = ev.seq;
				log.append(n);
			}
			u.hide(log);
			return [...log.children].filter((n) => !n.hidden).map((n) => n.dataset.seq);
		})()`)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: the page shows seqs %v, session.Visible %v", name, got, want)
		}
	}
}

// TestPageHidesOlderHistoryARewindUndid: a long session shows its tail
// first and adds the older events later; a rewind in the tail hides the
// older turns it undid once they arrive, and a redo in the tail of a
// rewind among them shows them again. Redo is offered only while no turn
// ran after the rewind.
func TestPageHidesOlderHistoryARewindUndid(t *testing.T) {
	e := newEnv(t, envOpts{})
	b := newBrowser(t)
	b.do("opening the page", chromedp.Navigate(e.url+"/#token="+token))
	b.wait("the page", `!document.getElementById("app").hidden`)
	shown := func(tail, older string) []string {
		return b.evalAwait(`(async () => {
			const { Transcript } = await import("/assets/transcript.js");
			const log = document.createElement("div");
			const tr = new Transcript({ log, approvals: document.createElement("div"), queue: document.createElement("ul") }, {
				changed() {}, attachment: async () => new Blob(), agent: () => "main",
				markdown: { show(n, s) { n.textContent = s; }, finish(n, s) { n.textContent = s; }, stream() {} },
				pricing: () => ({ currency: "EUR", cost: () => 0 }),
				rewind: async () => {}, redo: async () => {},
			});
			const turn = (n, seq) => [
				{ seq, type: "turn/start", turn: n },
				{ seq: seq + 1, type: "user/message", turn: n, message: { role: "user", content: "turn " + n } },
				{ seq: seq + 2, type: "turn/end", turn: n, reason: "completed" },
			];
			const tail = ` + tail + `, older = ` + older + `;
			tr.startAt(tail[0].seq);
			for (const ev of tail) tr.event(ev);
			tr.prepend(older);
			return [...log.children].filter((n) => !n.hidden).map((n) => n.dataset.seq + (n.querySelector(".redo-button") ? " redo" : ""));
		})()`)
	}
	rewind := `{ seq: 7, type: "rewind", rewind: { to: { turn: 1 }, conversation: true, from: 1, through: 6 } }`
	if got := shown(`[...turn(2, 4), `+rewind+`]`, `turn(1, 1)`); strings.Join(got, ",") != "7 redo" {
		t.Fatalf("a rewind in the tail of turns 1 and 2: the page shows seqs %v, want only the rewind's line (7) with Redo", got)
	}
	// A turn after a rewind makes it final: no Redo.
	if got := shown(`[...turn(2, 4), `+rewind+`, ...turn(3, 8)]`, `turn(1, 1)`); strings.Join(got, ",") != "7,9,10" {
		t.Fatalf("a turn after the rewind: the page shows seqs %v, want 7,9,10 without Redo", got)
	}
	older := `[...turn(1, 1), { seq: 4, type: "rewind", rewind: { to: { turn: 1 }, conversation: true, from: 1, through: 3 } }]`
	if got := shown(`[{ seq: 5, type: "redo", rewind: { redo: 4 } }, ...turn(2, 6)]`, older); strings.Join(got, ",") != "2,3,4,5,7,8" {
		t.Fatalf("a redo in the tail of an older rewind: the page shows seqs %v, want 2,3,4,5,7,8", got)
	}
}
