package acp

import (
	"testing"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/services/llm"
)

// An editor shows web_fetch as a fetch of its URL and web_search as a
// search for its query.
func TestWebToolsHaveTheirKindsAndTitles(t *testing.T) {
	st := &conv{cwd: "/w"}
	for _, c := range []struct {
		call  llm.ToolCall
		kind  acp.ToolKind
		title string
	}{
		{llm.ToolCall{Name: "web_fetch", Arguments: `{"url":"https://go.dev/doc/"}`}, acp.ToolKindFetch, "web_fetch https://go.dev/doc/"},
		{llm.ToolCall{Name: "web_search", Arguments: `{"query":"acp spec"}`}, acp.ToolKindSearch, `web_search "acp spec"`},
	} {
		title, _, _, _ := st.describe(c.call)
		if kindOf(c.call.Name) != c.kind || title != c.title {
			t.Errorf("%s: kind %s, title %q; want %s, %q", c.call.Name, kindOf(c.call.Name), title, c.kind, c.title)
		}
	}
}
