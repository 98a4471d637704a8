package openai

import (
	"crypto/rand"
	"encoding/base64"
	"testing"
	"time"

	"github.com/dsh-go/dsh/plugins/llm/internal/httpx"
	"github.com/dsh-go/dsh/services/llm"
)

// BenchmarkBodyWithImage renders a request with a 5 MB image. The floor
// is base64-encoding the image alone, which no encoding can skip; the
// figure to watch is body/floor. A text-only request is measured beside
// it, so the cost parts add to a plain conversation shows too.
func BenchmarkBodyWithImage(b *testing.B) {
	img := make([]byte, 5<<20)
	rand.Read(img)
	copy(img, "\x89PNG\r\n\x1a\n")
	p, err := New(openAI, Config{Common: httpx.Common{Model: "m", RetryBackoff: time.Millisecond}}, func(string) string { return "k" })
	if err != nil {
		b.Fatal(err)
	}
	text := llm.Request{History: llm.NewHistory(llm.Message{Role: llm.RoleUser, Content: "what is this?"})}
	withImage := llm.Request{History: llm.NewHistory(llm.Message{Role: llm.RoleUser, Content: "what is this?", Parts: []llm.Part{
		{Type: llm.PartText, Text: "what is this?"}, {Type: llm.PartImage, MediaType: "image/png", Data: img},
	}})}
	run := func(b *testing.B, f func()) {
		b.ReportAllocs()
		cpu0 := cpuTime(b)
		for b.Loop() {
			f()
		}
		b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	}
	b.Run("floor-base64", func(b *testing.B) {
		b.SetBytes(int64(len(img)))
		run(b, func() { _ = base64.StdEncoding.EncodeToString(img) })
	})
	b.Run("body-image", func(b *testing.B) {
		b.SetBytes(int64(len(img)))
		run(b, func() {
			if _, err := p.body(withImage); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("body-text", func(b *testing.B) {
		run(b, func() {
			if _, err := p.body(text); err != nil {
				b.Fatal(err)
			}
		})
	})
}
