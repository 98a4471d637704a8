package celpolicy

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// loadFile reads and compiles a rules file; its errors start with
// file:line, the line of the key at fault.
func loadFile(file, failurePolicy string) (*ruleSet, []byte, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, fmt.Errorf("the rules file cannot be read: %w; point file: at a YAML file with admission: and approval: rules", err)
	}
	rs, err := parseFile(file, data, failurePolicy)
	return rs, data, err
}

func parseFile(file string, data []byte, failurePolicy string) (*ruleSet, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: not YAML: %v", file, err)
	}
	var rules Rules
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		return nil, fmt.Errorf("%s: %v; the file holds the keys admission, approval and params", file, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	lines := lineIndex(&doc)
	lineOf := func(path string) string {
		for p := path; ; {
			if n, ok := lines[p]; ok {
				return fmt.Sprintf("%s:%d: %s: ", file, n, path)
			}
			i := strings.LastIndexAny(p, ".[")
			if i <= 0 {
				break
			}
			p = p[:i]
		}
		if path == "" {
			return file + ": "
		}
		return fmt.Sprintf("%s: %s: ", file, path)
	}
	return compile(rules, failurePolicy, file, lineOf)
}

// lineIndex maps each key path of a YAML document (admission[1].when) to
// its line.
func lineIndex(doc *yaml.Node) map[string]int {
	idx := map[string]int{}
	if len(doc.Content) == 0 {
		return idx
	}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				key := n.Content[i].Value
				if path != "" {
					key = path + "." + key
				}
				idx[key] = n.Content[i].Line
				walk(n.Content[i+1], key)
			}
		case yaml.SequenceNode:
			for i, el := range n.Content {
				key := fmt.Sprintf("%s[%d]", path, i)
				idx[key] = el.Line
				walk(el, key)
			}
		}
	}
	walk(doc.Content[0], "")
	return idx
}

// watch polls the rules file every interval and swaps a changed version
// in once it compiles: deciders load the rule set once per decision, so
// each decision sees one whole version, and no decision ever goes without
// one. A change is applied when two reads an interval apart agree (an
// editor saving in place is seen half-written in between); a version that
// does not compile is logged, and the running one stays.
func (p *Policy) watch(file, failurePolicy string, every time.Duration) (stop func()) {
	last, _ := os.ReadFile(file)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(every)
		defer tick.Stop()
		var pending []byte
		var rejected []byte
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			cur, err := os.ReadFile(file)
			if err != nil || bytes.Equal(cur, last) || (rejected != nil && bytes.Equal(cur, rejected)) {
				pending = nil
				continue
			}
			if pending == nil || !bytes.Equal(cur, pending) {
				pending = cur
				continue
			}
			pending = nil
			rs, err := parseFile(file, cur, failurePolicy)
			if err != nil {
				rejected = cur
				p.log.Error("policy.cel: the rules file changed but does not compile; the running version keeps deciding",
					"file", file, "version", p.Version(), "error", err)
				continue
			}
			last, rejected = cur, nil
			old := p.rules.Swap(rs)
			p.log.Info("policy.cel: rules reloaded", "file", file, "version", rs.version, "previous", old.version)
		}
	}()
	return func() { close(done); <-finished }
}
