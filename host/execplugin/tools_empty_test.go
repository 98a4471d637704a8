package execplugin_test

import (
	"strings"
	"testing"
)

// TestAnEmptyResultIsAnErrorUnlessChosen: a handler that returns
// (nil, nil) most likely forgot its result; the model gets an error naming
// the plugin and the tool, and the operator a warning. sdk.Empty() is the
// way to answer nothing on purpose.
func TestAnEmptyResultIsAnErrorUnlessChosen(t *testing.T) {
	bin := toolPlugin(t)
	h, logs := startExec(t, toolConfig(bin, "{}", "", ""))
	r := callTool(t, h, "main", "absent", "")
	if !r.IsError || !strings.Contains(r.Content, `"absent"`) || !strings.Contains(r.Content, `"tools"`) || !strings.Contains(r.Content, "PLUGIN_EMPTY_RESULT") || !strings.Contains(r.Content, "sdk.Empty()") {
		t.Fatalf("a forgotten result: %+v", r)
	}
	if !strings.Contains(logs.String(), "[WARN]") || !strings.Contains(logs.String(), "PLUGIN_EMPTY_RESULT") {
		t.Fatalf("a forgotten result was not logged:\n%s", logs.String())
	}
	r = callTool(t, h, "main", "blank", "")
	if r.IsError || r.Content != "" {
		t.Fatalf("a deliberately empty result: %+v", r)
	}
}
