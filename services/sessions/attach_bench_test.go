package sessions_test

import (
	stdctx "context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/sessions"
)

func cpuNow(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// freshImage is a PNG-signed image of n bytes, different on every call.
func freshImage(n int) []byte {
	img := make([]byte, n)
	rand.Read(img)
	copy(img, "\x89PNG\r\n\x1a\n")
	return img
}

// BenchmarkImagePromptTurn is one prompt and its turn through the session
// controller, persisted with session.jsonl and the attachments store, the
// scripted model answering: a text prompt (the floor) against the same
// prompt with a fresh 256 KB image. A session lasts 10 turns, so the
// history an image turn resolves stays short and both variants pay the
// same open and close.
func BenchmarkImagePromptTurn(b *testing.B) {
	const turns = 10
	for _, withImage := range []bool{false, true} {
		name := "text"
		if withImage {
			name = "image=256KB"
		}
		b.Run(name, func(b *testing.B) {
			e, store, _ := attachEnv(b)
			var s *sessions.Session
			b.ReportAllocs()
			cpu := cpuNow(b)
			for i := 0; b.Loop(); i++ {
				if i%turns == 0 {
					if s != nil {
						s.Detach(stdctx.Background())
					}
					s = e.open(sessions.OpenOptions{SessionID: fmt.Sprintf("s%d", i)})
				}
				r := sessions.PromptRequest{RequestID: fmt.Sprint(i), Content: "what is in the picture?"}
				if withImage {
					r.Parts = []llm.Part{{Type: llm.PartImage, Data: freshImage(256 << 10)}}
				}
				if _, err := s.Prompt(stdctx.Background(), r); err != nil {
					b.Fatal(err)
				}
				e.ctl.Idle(stdctx.Background(), s.ID())
			}
			b.ReportMetric(float64(cpuNow(b)-cpu)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(store.Written())/float64(b.N), "stored-B/op")
			s.Detach(stdctx.Background())
		})
	}
}

// BenchmarkLogSizeOf100ImageTurns reports the size of a session log of
// 100 turns, each prompt with a fresh 64 KB image, against the same
// session with text prompts: the log holds references, not bytes. One op
// runs both sessions.
func BenchmarkLogSizeOf100ImageTurns(b *testing.B) {
	e, store, dir := attachEnv(b)
	sizes := map[bool]int64{}
	run := func(i int, withImage bool) {
		id := fmt.Sprintf("log%v%d", withImage, i)
		s := e.open(sessions.OpenOptions{SessionID: id})
		for turn := range 100 {
			r := sessions.PromptRequest{RequestID: fmt.Sprint(turn), Content: "what is in the picture?"}
			if withImage {
				r.Parts = []llm.Part{{Type: llm.PartImage, Data: freshImage(64 << 10)}}
			}
			if _, err := s.Prompt(stdctx.Background(), r); err != nil {
				b.Fatal(err)
			}
			e.ctl.Idle(stdctx.Background(), s.ID())
		}
		s.Detach(stdctx.Background())
		st, err := os.Stat(filepath.Join(dir, id+".jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		sizes[withImage] = st.Size()
	}
	for i := 0; b.Loop(); i++ {
		run(i, false)
		run(i, true)
	}
	b.ReportMetric(float64(store.Written())/float64(b.N), "blob-B/op")
	b.ReportMetric(float64(sizes[false]), "text-log-B")
	b.ReportMetric(float64(sizes[true]), "image-log-B")
	b.ReportMetric(float64(sizes[true])/float64(sizes[false]), "image/text")
}
