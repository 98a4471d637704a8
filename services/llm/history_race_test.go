package llm_test

import (
	"sync"
	"testing"

	"github.com/dsh-go/dsh/services/llm"
)

// TestHistoryViewIsSafeWhileTheLogAppends reads a view on another goroutine
// while its log keeps appending into the same page, as an agent/request
// listener does while the session records the next chunk. Run with -race:
// the view is documented as immutable, so the reads and the appends must
// never touch the same memory.
func TestHistoryViewIsSafeWhileTheLogAppends(t *testing.T) {
	var log llm.Log
	log.Append(llm.Message{Role: llm.RoleUser, Content: "first", ToolCalls: []llm.ToolCall{{ID: "c"}}})
	v := log.View()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 200 {
			if v.Len() != 1 || v.At(0).Content != "first" || len(v.Messages()) != 1 {
				t.Error("the view changed under its reader")
				return
			}
			for _, m := range v.All() {
				_ = m.Content
			}
			if last, _ := v.Last(); last.ToolCalls[0].ID != "c" {
				t.Error("the view's last message changed")
				return
			}
		}
	}()
	// 300 appends cross a page boundary, so both the in-page append and
	// the growth of the page list race with the reader if they share memory.
	for i := range 300 {
		log.Append(llm.Message{Role: llm.RoleAssistant, Content: "more"})
		if i%50 == 0 {
			_ = log.View().Slice(1, log.Len())
		}
	}
	wg.Wait()
	if got := log.View().Len(); got != 301 {
		t.Fatalf("log length %d", got)
	}
}
