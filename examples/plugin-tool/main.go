// Command plugin-tool is a dsh plugin binary that gives the model a tool:
// word_count counts the lines, words and bytes of a text, or of a file in
// the agent's workspace. Build it and mount it from config.yaml:
//
//	go build -o bin/dsh-word-count ./examples/plugin-tool
//
//	plugins:
//	  - id: word-count
//	    exec: ./bin/dsh-word-count
package main

import (
	stdctx "context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dsh-go/dsh/sdk"
)

// schema is what the host checks every call against before it reaches
// count: the handler never sees arguments of the wrong shape.
const schema = `{
  "type": "object",
  "properties": {
    "text": {"type": "string", "description": "The text to count."},
    "path": {"type": "string", "description": "A file to count instead, relative to the workspace."}
  },
  "additionalProperties": false
}`

func main() { newPlugin().Serve() }

// newPlugin builds the plugin; main serves it to dsh, and main_test.go
// drives it with sdktest.
func newPlugin() *sdk.Plugin {
	p := sdk.New("word-count", "1.0.0")
	p.Tool(&sdk.ToolDecl{
		Name:         "word_count",
		Description:  "Counts the lines, words and bytes of a text, or of a file in the workspace (like wc).",
		Parameters:   schema,
		ParallelSafe: true, // it only reads
	}, count)
	return p
}

func count(_ stdctx.Context, inv *sdk.ToolInvocation) (*sdk.ToolResult, error) {
	var args struct {
		Text string `json:"text"`
		Path string `json:"path"`
	}
	if err := sdk.Arguments(inv, &args); err != nil {
		return nil, err
	}
	text, what := args.Text, "the text"
	switch {
	case args.Path != "" && args.Text != "":
		return sdk.Failed("pass either text or path, not both"), nil
	case args.Path != "":
		file, err := inWorkspace(inv.Workspace, args.Path)
		if err != nil {
			return sdk.Failed("%v", err), nil
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return sdk.Failed("cannot read %s: %v", args.Path, err), nil
		}
		text, what = string(b), args.Path
	}
	return sdk.Text(fmt.Sprintf("%s: %d lines, %d words, %d bytes", what, strings.Count(text, "\n"), len(strings.Fields(text)), len(text))), nil
}

// inWorkspace resolves path against the workspace and refuses one that
// leaves it: a tool confines what it touches to the agent's workspace.
func inWorkspace(workspace, path string) (string, error) {
	if workspace == "" {
		return "", fmt.Errorf("the agent has no workspace; pass text instead of path")
	}
	file := filepath.Join(workspace, path)
	if rel, err := filepath.Rel(workspace, file); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%s is outside the workspace; pass a path inside it", path)
	}
	return file, nil
}
