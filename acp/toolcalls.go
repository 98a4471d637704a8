package acp

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/services/llm"
)

// toolKinds maps dsh's tools onto the ACP kinds an editor draws icons for.
var toolKinds = map[string]acp.ToolKind{
	"read": acp.ToolKindRead, "list": acp.ToolKindSearch, "glob": acp.ToolKindSearch, "grep": acp.ToolKindSearch,
	"write": acp.ToolKindEdit, "edit": acp.ToolKindEdit, "bash": acp.ToolKindExecute, "clock": acp.ToolKindOther,
	"web_fetch": acp.ToolKindFetch, "web_search": acp.ToolKindSearch,
}

func kindOf(name string) acp.ToolKind {
	if k, ok := toolKinds[name]; ok {
		return k
	}
	return acp.ToolKindOther
}

// callArgs are the arguments of the built-in tools that say where and
// what a call touches.
type callArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	Old     string `json:"old"`
	New     string `json:"new"`
	Command string `json:"command"`
	Pattern string `json:"pattern"`
	URL     string `json:"url"`
	Query   string `json:"query"`
}

// describe returns a call's title, locations and content (diffs for
// write and edit).
func (st *conv) describe(c llm.ToolCall) (string, []acp.ToolCallLocation, []acp.ToolCallContent, any) {
	var a callArgs
	var raw any
	_ = json.Unmarshal([]byte(c.Arguments), &a)
	_ = json.Unmarshal([]byte(c.Arguments), &raw)
	title := c.Name
	var locs []acp.ToolCallLocation
	var content []acp.ToolCallContent
	path := a.Path
	if path != "" && !filepath.IsAbs(path) {
		path = filepath.Join(st.workspace(), path)
	}
	if path != "" {
		locs = []acp.ToolCallLocation{{Path: path}}
		title = fmt.Sprintf("%s %s", c.Name, a.Path)
	}
	switch {
	case c.Name == "bash" && a.Command != "":
		title = a.Command
	case c.Name == "write" && path != "":
		content = []acp.ToolCallContent{acp.ToolDiffContent(path, a.Content)}
	case c.Name == "edit" && path != "":
		content = []acp.ToolCallContent{acp.ToolDiffContent(path, a.New, a.Old)}
	case a.Pattern != "":
		title = fmt.Sprintf("%s %s", c.Name, a.Pattern)
	case c.Name == "web_fetch" && a.URL != "":
		title = "web_fetch " + a.URL
	case c.Name == "web_search" && a.Query != "":
		title = fmt.Sprintf("web_search %q", a.Query)
	}
	return title, locs, content, raw
}

func (st *conv) workspace() string { return st.cwd }

// toolCall announces a call as pending, and in progress too when it
// started already.
func (st *conv) toolCall(c llm.ToolCall) {
	title, locs, content, raw := st.describe(c)
	st.send(acp.StartToolCall(acp.ToolCallId(c.ID), title, acp.WithStartKind(kindOf(c.Name)), acp.WithStartStatus(acp.ToolCallStatusPending),
		acp.WithStartLocations(locs), acp.WithStartContent(content), acp.WithStartRawInput(raw)))
	st.mu.Lock()
	st.announced[c.ID] = true
	started := st.early[c.ID]
	delete(st.early, c.ID)
	st.mu.Unlock()
	if started {
		st.inProgress(c.ID)
	}
}

// toolStart marks a call in progress: it passed approval and runs. The
// hub sends its start after its tool/call event; a start that comes first
// all the same waits for the call to be announced, so the editor never
// sees a status for a call it does not know.
func (st *conv) toolStart(callID string) {
	st.mu.Lock()
	known := st.announced[callID]
	if !known {
		st.early[callID] = true
	}
	st.mu.Unlock()
	if known {
		st.inProgress(callID)
	}
}

func (st *conv) inProgress(callID string) {
	st.send(acp.UpdateToolCall(acp.ToolCallId(callID), acp.WithUpdateStatus(acp.ToolCallStatusInProgress)))
}

// toolResult ends a call: completed, or failed for an error result (a
// denial included).
func (st *conv) toolResult(m llm.Message) {
	status := acp.ToolCallStatusCompleted
	if m.IsError {
		status = acp.ToolCallStatusFailed
	}
	opts := []acp.ToolCallUpdateOpt{acp.WithUpdateStatus(status)}
	if m.Content != "" {
		opts = append(opts, acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(m.Content))}), acp.WithUpdateRawOutput(m.Content))
	}
	st.send(acp.UpdateToolCall(acp.ToolCallId(m.ToolCallID), opts...))
	st.mu.Lock()
	delete(st.announced, m.ToolCallID)
	delete(st.early, m.ToolCallID)
	st.mu.Unlock()
}
