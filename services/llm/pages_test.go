package llm

import (
	"fmt"
	"testing"
)

// TestPagesGrowThenStayFull checks the page layout: every message has one
// slot, pages fill in order, they grow from firstPage to pageSize, and a
// view reads back every message, also across page boundaries.
func TestPagesGrowThenStayFull(t *testing.T) {
	// Long enough to pass the page index at which firstPage<<page would
	// overflow an int.
	const n = 10_000
	for j, page := 0, 0; j < n; page++ {
		if pageLen(page) < 1 {
			t.Fatalf("page %d has length %d", page, pageLen(page))
		}
		for slot := range pageLen(page) {
			if p, s := locate(j); p != page || s != slot {
				t.Fatalf("locate(%d) = page %d slot %d; want page %d slot %d", j, p, s, page, slot)
			}
			j++
		}
	}
	if got := []int{pageLen(0), pageLen(3), pageLen(4), pageLen(9)}; fmt.Sprint(got) != "[8 64 128 128]" {
		t.Fatalf("page lengths %v", got)
	}

	var l Log
	for i := range n {
		l.Append(Message{Role: RoleUser, Content: fmt.Sprint(i)})
	}
	h := l.View()
	for i, m := range h.All() {
		if m.Content != fmt.Sprint(i) {
			t.Fatalf("message %d reads %q", i, m.Content)
		}
	}
	s := h.Slice(5, 300)
	if s.Len() != 295 || s.At(0).Content != "5" || s.At(294).Content != "299" {
		t.Fatalf("slice across pages: len %d, first %q, last %q", s.Len(), s.At(0).Content, s.At(294).Content)
	}
	// A fresh log holds one small page, not a full one.
	var small Log
	small.Append(Message{Content: "hi"})
	if len(small.pages) != 1 || len(small.pages[0]) != firstPage {
		t.Fatalf("a one-message log holds %d pages, the first of %d", len(small.pages), len(small.pages[0]))
	}
}
