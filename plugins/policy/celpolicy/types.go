package celpolicy

import (
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/tools"
)

// The types below are what rules see: CEL object types (registered with
// ext.NativeTypes), so a rule that names a field they lack, or compares a
// string with a number, fails its type check when the config loads, not
// when a message arrives. Field names are the cel tags.

// Principal is who sent an input.
type Principal struct {
	// Kind: token, jwt, user, editor, webhook, schedule, agent; "" when
	// the entry point established none.
	Kind   string `cel:"kind"`
	ID     string `cel:"id"`
	Tenant string `cel:"tenant"`
}

// Source is the provenance of an input.
type Source struct {
	// Entry is the entry point: cli, serve, acp, webhook, schedule,
	// subagent; "" when unknown.
	Entry     string    `cel:"entry"`
	Principal Principal `cel:"principal"`
	// OnBehalfOf is whom a delegate acts for (a subagent's person, an
	// editor's user); zero when the sender acts for itself.
	OnBehalfOf Principal `cel:"on_behalf_of"`
	// Unattended: nobody waits behind the input (webhooks, schedules).
	Unattended bool `cel:"unattended"`
}

// Attachment is a part of a message beyond its text.
type Attachment struct {
	Type      string `cel:"type"`
	MediaType string `cel:"media_type"`
	Name      string `cel:"name"`
	Size      int64  `cel:"size"`
}

// Request is a message at admission.
type Request struct {
	Agent string `cel:"agent"`
	// Mode is followup or steer.
	Mode        string       `cel:"mode"`
	Content     string       `cel:"content"`
	Attachments []Attachment `cel:"attachments"`
}

// Call is a tool call at approval.
type Call struct {
	Tool  string `cel:"tool"`
	Agent string `cel:"agent"`
	// Arguments are the call's arguments, decoded from JSON.
	Arguments map[string]any `cel:"arguments"`
	// Path is the call's path argument (path, file_path, dir, directory),
	// relative to the workspace when it is inside it, cleaned, with
	// forward slashes; "" when the call has none.
	Path string `cel:"path"`
	// InWorkspace: Path is inside the workspace (true when there is no
	// path).
	InWorkspace bool `cel:"in_workspace"`
	// Command is a bash call's command line.
	Command string `cel:"command"`
	// Unattended: the turn came from a source nobody watches.
	Unattended bool `cel:"unattended"`
}

func principalOf(p llm.Principal) Principal {
	return Principal{Kind: p.Kind, ID: p.ID, Tenant: p.Tenant}
}

func sourceOfAdmission(s agentcontroller.Source) Source {
	out := Source{Entry: s.Entry, Principal: principalOf(s.Principal), Unattended: s.IsUnattended()}
	if s.OnBehalfOf != nil {
		out.OnBehalfOf = principalOf(*s.OnBehalfOf)
	}
	return out
}

func sourceOfProvenance(p llm.Provenance, unattended bool) Source {
	out := Source{Entry: p.Entry, Principal: principalOf(p.Principal), Unattended: unattended}
	if p.OnBehalfOf != nil {
		out.OnBehalfOf = principalOf(*p.OnBehalfOf)
	}
	return out
}

func requestOf(a agentcontroller.Admission) Request {
	r := Request{Mode: string(a.Mode), Content: a.Message.Content}
	if a.Agent != nil {
		r.Agent = a.Agent.ID()
	}
	if r.Mode == "" {
		r.Mode = string(agentcontroller.Followup)
	}
	for _, p := range a.Message.Parts {
		if p.Type == llm.PartText {
			continue
		}
		r.Attachments = append(r.Attachments, Attachment{Type: string(p.Type), MediaType: p.MediaType, Name: p.Name, Size: p.Size})
	}
	return r
}

// pathKeys are the argument names that carry a call's path, as
// tools.permission reads them.
var pathKeys = []string{"path", "file_path", "dir", "directory"}

func callOf(c tools.Call) Call {
	out := Call{Tool: c.Name, Agent: c.AgentID, InWorkspace: true, Unattended: c.Unattended, Arguments: map[string]any{}}
	if len(c.Arguments) > 0 {
		// Arguments that are not an object stay empty: they were
		// validated against the tool's schema already.
		_ = json.Unmarshal(c.Arguments, &out.Arguments)
		if out.Arguments == nil {
			out.Arguments = map[string]any{}
		}
	}
	if cmd, ok := out.Arguments["command"].(string); ok {
		out.Command = cmd
	}
	for _, k := range pathKeys {
		if p, ok := out.Arguments[k].(string); ok && p != "" {
			out.Path, out.InWorkspace = relPath(c.Workspace, p)
			break
		}
	}
	return out
}

// relPath makes p relative to the workspace when it is inside it, so a
// rule can say startsWith('src/') whatever form the model wrote.
func relPath(workspace, p string) (string, bool) {
	abs := p
	if !filepath.IsAbs(abs) {
		if workspace == "" {
			return filepath.ToSlash(filepath.Clean(p)), !strings.HasPrefix(filepath.Clean(p), "..")
		}
		abs = filepath.Join(workspace, p)
	}
	abs = filepath.Clean(abs)
	if workspace == "" {
		return filepath.ToSlash(abs), false
	}
	rel, err := filepath.Rel(workspace, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return filepath.ToSlash(abs), false
	}
	return filepath.ToSlash(rel), true
}
