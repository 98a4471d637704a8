package mcp

import (
	"fmt"
	"hash/fnv"
	"strings"
)

// maxToolName is the longest name providers accept.
const maxToolName = 64

// toolName is the name the model sees for the server's tool: server__tool.
// A tool name outside [a-zA-Z0-9_-] has each other character replaced by
// '_' and, so that two such names cannot meet, a suffix made from the
// original name; a name too long is cut and gets the same suffix. The
// suffix depends on the tool's own name only, so a tool keeps its name
// whatever else the server lists.
func toolName(server, tool string) string {
	clean, changed := sanitize(tool)
	name := server + "__" + clean
	if !changed && len(name) <= maxToolName {
		return name
	}
	suffix := fmt.Sprintf("_%08x", hash32(tool))
	if len(name)+len(suffix) > maxToolName {
		name = name[:maxToolName-len(suffix)]
	}
	return name + suffix
}

func sanitize(s string) (string, bool) {
	if s == "" {
		return "_", true
	}
	var b strings.Builder
	changed := false
	for _, r := range s {
		if r < 128 && (r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			b.WriteRune(r)
			continue
		}
		b.WriteByte('_')
		changed = true
	}
	return b.String(), changed
}

func hash32(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}
