package serve_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/services/attachments"
)

// A message with more parts than attachments.max_parts is refused before
// anything is stored (20,000 tiny parts were accepted, 40,000 files and
// their syncs), and the store as a whole holds at most
// attachments.max_store_bytes.
func TestAttachmentCountAndStoreLimits(t *testing.T) {
	e := newEnv(t, envOpts{top: "attachments: {max_parts: 4, max_store_bytes: 1000}\n"})
	id := e.open(nil)
	store, _ := attachments.Key.Get(e.h.Root())
	msgs := "/v1/sessions/" + id + "/messages"
	part := func(i, size int) map[string]any {
		return map[string]any{"type": "file", "name": fmt.Sprintf("f%d.txt", i), "data": []byte(strings.Repeat(string(rune('a'+i%26)), size))}
	}

	var many []map[string]any
	for i := range 5 {
		many = append(many, part(i, 10))
	}
	r := e.call("POST", msgs, map[string]any{"parts": many})
	if r.status != http.StatusRequestEntityTooLarge || r.err(t).Code != string(attachments.TooMany) || !strings.Contains(r.err(t).Message, "attachments.max_parts") {
		t.Fatalf("5 parts over max_parts 4: %d %s", r.status, r.body)
	}
	if n := store.Written(); n != 0 {
		t.Fatalf("a refused message stored %d bytes", n)
	}

	if r := e.call("POST", msgs, map[string]any{"parts": []map[string]any{part(0, 600)}}); r.status >= 300 {
		t.Fatalf("600 bytes in an empty store of 1000: %d %s", r.status, r.body)
	}
	r = e.call("POST", msgs, map[string]any{"parts": []map[string]any{part(1, 600)}})
	if r.status != http.StatusInsufficientStorage || r.err(t).Code != string(attachments.StoreFull) || !strings.Contains(r.err(t).Message, "max_store_bytes") {
		t.Fatalf("600 more bytes in a store of 1000: %d %s", r.status, r.body)
	}
	// Bytes already stored cost nothing.
	if r := e.call("POST", msgs, map[string]any{"parts": []map[string]any{part(0, 600)}}); r.status >= 300 {
		t.Fatalf("the same 600 bytes again: %d %s", r.status, r.body)
	}
	if n := store.Written(); n != 600 {
		t.Fatalf("the store wrote %d bytes; want the one blob of 600", n)
	}
}
