package skills

import (
	"strings"
)

// render is the system prompt section listing skills: names and
// descriptions only, in the XML form the format's integration guide
// recommends, so each skill costs the prompt tens of tokens and its body
// is loaded only when used.
func render(list []Skill) string {
	if len(list) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("# Skills\n\n")
	b.WriteString("Skills are folders of instructions, scripts and resources for particular tasks. ")
	b.WriteString("When a task matches a skill's description, call the " + ToolName + " tool with the skill's name before you start, and follow the instructions it returns. ")
	b.WriteString("A skill's other files lie in its folder (location); read them with the file tools when its instructions point to them.\n\n")
	b.WriteString("<available_skills>\n")
	for _, s := range list {
		b.WriteString("<skill>\n<name>")
		b.WriteString(escape(s.Name))
		b.WriteString("</name>\n<description>")
		b.WriteString(escape(s.Description))
		b.WriteString("</description>\n<location>")
		b.WriteString(escape(s.Dir))
		b.WriteString("</location>\n</skill>\n")
	}
	b.WriteString("</available_skills>")
	return b.String()
}

var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

func escape(s string) string { return escaper.Replace(s) }
