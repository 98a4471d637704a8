package bundle

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// modelAliases are Claude Code's names for Anthropic's model families;
// they name no model id a provider of dsh accepts.
var modelAliases = []string{"sonnet", "opus", "haiku"}

// agents reads the agent definitions at path (a folder of *.md, or one
// file) as Claude Code writes them: front matter with name, description,
// tools and model; the body is the agent's system prompt. What dsh cannot
// apply of one is a Note.
func (l *loader) agents(path string) {
	var files []string
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		entries, _ := os.ReadDir(path)
		for _, e := range entries {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".md") {
				files = append(files, filepath.Join(path, e.Name()))
			}
		}
	} else {
		files = []string{path}
	}
	slices.Sort(files)
	for _, f := range files {
		a := Agent{File: show(l.b.Root, f)}
		fm, body, ok := frontMatter(f)
		a.Name, _ = fm["name"].(string)
		a.Description, _ = fm["description"].(string)
		if a.Name == "" {
			a.Name = strings.TrimSuffix(filepath.Base(f), ".md")
		}
		if !ok {
			l.note("%s: agent %q: not mounted: it has no front matter (---, name:, description:, ---); Claude Code needs one too", a.File, a.Name)
			continue
		}
		if slices.ContainsFunc(l.b.Agents, func(o Agent) bool { return o.Name == a.Name }) {
			l.note("%s: agent %q: not mounted: another agent file of the bundle has that name", a.File, a.Name)
			continue
		}
		a.SystemPrompt = strings.TrimSpace(body)
		a.Tools = toolList(fm["tools"])
		if len(a.Tools) > 0 {
			l.note("%s: agent %q: tools: not applied: the subagent gets the calling agent's provider and the tools of its presets, not a list of its own (docs/subagents.md)", a.File, a.Name)
		}
		model, _ := fm["model"].(string)
		switch {
		case model == "" || model == "inherit":
		case slices.Contains(modelAliases, model):
			l.note("%s: agent %q: model %q: not applied: it is Claude Code's alias, not a model id; the subagent runs on the calling agent's model", a.File, a.Name, model)
		default:
			a.Model = model
			l.note("%s: agent %q: model %q is run with the calling agent's provider; it must be a model of that provider", a.File, a.Name, model)
		}
		l.b.Agents = append(l.b.Agents, a)
	}
}

// toolList reads tools: as Claude Code writes it, "Read, Grep" or a list.
func toolList(v any) []string {
	var out []string
	switch x := v.(type) {
	case string:
		for _, t := range strings.Split(x, ",") {
			if t = strings.TrimSpace(t); t != "" {
				out = append(out, t)
			}
		}
	case []any:
		for _, t := range x {
			out = append(out, strings.TrimSpace(fmt.Sprint(t)))
		}
	}
	return out
}

// frontMatter returns the YAML between the leading "---" lines of a
// Markdown file, and the text after it.
func frontMatter(file string) (map[string]any, string, bool) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, "", false
	}
	data = bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
	rest, ok := bytes.CutPrefix(data, []byte("---\n"))
	if !ok {
		return nil, string(data), false
	}
	head, body, ok := bytes.Cut(rest, []byte("\n---"))
	if !ok {
		return nil, string(data), false
	}
	// The closing line may carry trailing spaces before its newline.
	if i := bytes.IndexByte(body, '\n'); i >= 0 {
		body = body[i+1:]
	} else {
		body = nil
	}
	var out map[string]any
	if yaml.Unmarshal(head, &out) != nil {
		return nil, "", false
	}
	return out, string(body), true
}
