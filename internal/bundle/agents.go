package bundle

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// agents lists the agent definitions at path (a folder of *.md, or one
// file). dsh does not mount them yet: a subagent of dsh is a configured
// agent plus presets (tools.agent), and a bundle's definition carries its
// own system prompt and tool list that tools.agent cannot take. Each is
// reported so the operator can define it by hand.
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
		fm, ok := frontMatter(f)
		name, _ := fm["name"].(string)
		a.Description, _ = fm["description"].(string)
		a.Name = name
		if a.Name == "" {
			a.Name = strings.TrimSuffix(filepath.Base(f), ".md")
		}
		l.b.Agents = append(l.b.Agents, a)
		why := "dsh cannot yet give a subagent a bundle's own system prompt and tools; define it under tools.agent (docs/subagents.md)"
		if !ok {
			why = "it has no front matter (---, name:, description:, ---) and " + why
		}
		l.note("%s: agent %q: not mounted: %s", a.File, a.Name, why)
	}
}

// frontMatter returns the YAML between the leading "---" lines of a
// Markdown file.
func frontMatter(file string) (map[string]any, bool) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, false
	}
	data = bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
	rest, ok := bytes.CutPrefix(data, []byte("---\n"))
	if !ok {
		return nil, false
	}
	head, _, ok := bytes.Cut(rest, []byte("\n---"))
	if !ok {
		return nil, false
	}
	var out map[string]any
	if yaml.Unmarshal(head, &out) != nil {
		return nil, false
	}
	return out, true
}
