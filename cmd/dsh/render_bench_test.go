package main

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/muesli/termenv"
)

// countingTerminal counts what a screen sends to its terminal.
type countingTerminal struct{ n atomic.Int64 }

func (c *countingTerminal) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return len(p), nil
}

// tenKBAnswer is a 10 KB answer of paragraphs, lists and code blocks.
func tenKBAnswer() string {
	var b strings.Builder
	for b.Len() < 10*1024 {
		b.WriteString("## A heading\n\nA paragraph of **prose** that goes on for a while, with `code` in it and a [link](https://example.com), long enough to wrap on a terminal of a usual width.\n\n")
		b.WriteString("- one item\n- another item\n\n```go\nfunc f(x int) int {\n\treturn x * 2\n}\n```\n\n")
	}
	return b.String()
}

// BenchmarkRichStream10KB streams a 10 KB answer word by word through the
// rich view, as the scripted model cuts it: the cost per answer, and how
// many bytes the terminal receives per byte of answer (the live region is
// redrawn at each chunk).
func BenchmarkRichStream10KB(b *testing.B) {
	answer := tenKBAnswer()
	chunks := strings.SplitAfter(answer, " ")
	term := &countingTerminal{}
	scr := newTermScreen(term, func() int { return 100 }, nil)
	defer scr.close()
	out := scr.writer(term)
	md := &markdown{profile: termenv.ANSI256}
	b.ReportAllocs()
	for b.Loop() {
		v := newTermView(scr, out, out, func() int { return 100 }, md, &toolOutputs{}, nil)
		v.event(session.Event{Type: session.TurnStart})
		for _, c := range chunks {
			v.chunk(llm.Chunk{Kind: llm.ChunkText, Text: c})
		}
		v.event(session.Event{Type: session.AssistantMessage})
		v.event(session.Event{Type: session.TurnEnd, Reason: "completed"})
	}
	b.ReportMetric(float64(term.n.Load())/float64(b.N)/float64(len(answer)), "term-bytes/answer-byte")
	b.ReportMetric(float64(len(chunks)), "chunks/answer")
}
