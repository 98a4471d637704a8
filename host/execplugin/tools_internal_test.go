package execplugin

import (
	"testing"

	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
)

func TestToolResultFrom(t *testing.T) {
	text := func(s string) *pluginv1.ContentPart {
		return &pluginv1.ContentPart{Part: &pluginv1.ContentPart_Text{Text: s}}
	}
	img := &pluginv1.ContentPart{Part: &pluginv1.ContentPart_Image{Image: &pluginv1.Image{MediaType: "image/jpeg", Data: make([]byte, 10)}}}
	for _, tc := range []struct {
		name string
		in   *pluginv1.ToolResult
		want string
	}{
		{"content only", &pluginv1.ToolResult{Content: "c"}, "c"},
		{"content wins over text parts", &pluginv1.ToolResult{Content: "c", Parts: []*pluginv1.ContentPart{text("a")}}, "c"},
		{"text parts joined", &pluginv1.ToolResult{Parts: []*pluginv1.ContentPart{text("a"), text("b")}}, "a\nb"},
		{"an image is named", &pluginv1.ToolResult{Parts: []*pluginv1.ContentPart{img}},
			`[the tool "t" returned an image (image/jpeg, 10 bytes) that cannot be shown to the model: dsh does not pass images from tools to models yet]`},
		{"an empty part", &pluginv1.ToolResult{Content: "c", Parts: []*pluginv1.ContentPart{{}}},
			"c\n[the tool \"t\" returned a content part this dsh does not know; it was dropped]"},
		{"empty", &pluginv1.ToolResult{}, ""},
	} {
		if got := toolResultFrom("t", tc.in); got.Content != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got.Content, tc.want)
		}
	}
	if r := toolResultFrom("t", &pluginv1.ToolResult{Content: "x", IsError: true}); !r.IsError {
		t.Error("is_error was lost")
	}
}

func TestToolDiff(t *testing.T) {
	a := []*pluginv1.ToolDecl{{Name: "x"}, {Name: "y"}, {Name: "z", Description: "old"}}
	b := []*pluginv1.ToolDecl{{Name: "x"}, {Name: "w"}, {Name: "v"}, {Name: "z", Description: "new"}}
	if got := toolDiff(a, b); got != "added v, w; removed y; changed z" {
		t.Fatal(got)
	}
	if got := toolDiff(a, a); got != "" {
		t.Fatal(got)
	}
}
