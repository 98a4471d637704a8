package serve_test

import (
	stdctx "context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLoadAnIdleSessionKeepsFewAnswersWorth: the standing target is that
// a session keeps at most 5× an answer's bytes in memory for each turn
// of its history. Sessions run turns, then sit idle with no subscriber;
// the heap they grew by, per turn, is what a turn of history costs. Two
// answer sizes, 40 B and 4 KB (1 and 100 words, streamed word by word),
// split that into a part per turn whatever the answer (the turn's events
// in the session's log and in its live hub's window) and a part per
// answer byte. The target is asserted for the 4 KB answer; a closed
// session must keep none of it.
func TestLoadAnIdleSessionKeepsFewAnswersWorth(t *testing.T) {
	const word = "abcdefghijklmnopqrstuvwxyz0123456789abc " // 40 bytes
	perTurn := map[int]float64{}
	for _, words := range []int{1, 100} {
		answer := float64(words * len(word))
		kept, left := loadIdleSessionHeap(t, strings.Repeat(word, words))
		perTurn[words] = kept
		t.Logf("answers of %.0f B: an idle session keeps %.0f B a turn of history, %.2fx the answer; closed, %+.0f B a session against one with a single turn",
			answer, kept, kept/answer, left)
		if left > 4096 {
			t.Errorf("answers of %.0f B: closed sessions hold %.0f B each more than open ones with one turn: their history outlives the close", answer, left)
		}
		if words == 1 {
			continue
		}
		if kept > 5*answer {
			t.Errorf("an idle session keeps %.0f B a turn, %.1fx the answer's %.0f B: over the 5x target", kept, kept/answer, answer)
		}
		if kept < answer {
			t.Errorf("an idle session keeps %.0f B a turn of a %.0f B answer: the history cannot be in memory, so the measure is broken", kept, answer)
		}
	}
	perByte := (perTurn[100] - perTurn[1]) / float64(99*len(word))
	t.Logf("a turn of history: %.0f B whatever the answer, and %.2f B per byte of it", perTurn[1]-perByte*float64(len(word)), perByte)
}

// loadIdleSessionHeap runs sessions whose every answer is reply and
// returns the heap an idle one keeps per turn of history, and what a
// closed one keeps against an open one with a single turn.
func loadIdleSessionHeap(t *testing.T, reply string) (perTurn, closedLeft float64) {
	const sessions, turns = 6, 30
	env := startLoadEnvWith(t, loadEnvOptions{replies: []string{reply}})
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = env.newSession(t)
	}
	measure := func() loadSnapshot {
		env.api.CloseIdleConnections()
		loadSteadyGoroutines()
		return loadMeasure()
	}
	// One turn each first: what a session costs at all (its agent, hub,
	// writer, the first request's buffers) is not history.
	env.turnAll(t, ids, 1)
	h1 := measure()
	env.turnAll(t, ids, turns-1)
	hN := measure()
	for _, id := range ids {
		if _, err := env.call(t.Context(), http.MethodPost, "/v1/sessions/"+id+"/close", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	closed := measure()
	return float64(int64(hN.heap)-int64(h1.heap)) / float64(sessions*(turns-1)),
		float64(int64(closed.heap)-int64(h1.heap)) / float64(sessions)
}

// turnAll runs turns until each session of ids has had n more, each
// prompt after its session's last answer.
func (e *loadEnv) turnAll(tb testing.TB, ids []string, n int) {
	tb.Helper()
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 2*time.Minute)
	defer cancel()
	for range n {
		want := map[string]int{}
		for _, id := range ids {
			var s struct {
				Turns int `json:"turns"`
			}
			if _, err := e.call(ctx, http.MethodGet, "/v1/sessions/"+id, nil, &s); err != nil {
				tb.Fatal(err)
			}
			want[id] = s.Turns + 1
			rid := fmt.Sprintf("idle-%s-%d", id, s.Turns)
			if code, err := e.post(ctx, id, rid, "turn "+strconv.Itoa(s.Turns)); err != nil || code != http.StatusAccepted {
				tb.Fatalf("prompt %s: %d %v", rid, code, err)
			}
		}
		for _, id := range ids {
			for {
				var s struct {
					Turns   int  `json:"turns"`
					Running bool `json:"running"`
				}
				if _, err := e.call(ctx, http.MethodGet, "/v1/sessions/"+id, nil, &s); err != nil {
					tb.Fatal(err)
				}
				if s.Turns >= want[id] && !s.Running {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
}
