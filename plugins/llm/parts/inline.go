package parts

import (
	"fmt"
	"strings"

	"github.com/dsh-go/dsh/services/llm"
)

// Inline renders a text file as text for a model that takes files only as
// text: the content between an opening line naming the file and a closing
// line, so the model can tell the file from the prompt around it and cite
// it by name.
//
//	<file name="notes.md" media_type="text/markdown">
//	…content…
//	</file>
func Inline(p llm.Part, text string) string {
	var b strings.Builder
	b.Grow(len(text) + len(p.Name) + 64)
	b.WriteString("<file")
	if p.Name != "" {
		fmt.Fprintf(&b, " name=%q", p.Name)
	}
	if p.MediaType != "" {
		fmt.Fprintf(&b, " media_type=%q", p.MediaType)
	}
	b.WriteString(">\n")
	b.WriteString(text)
	if !strings.HasSuffix(text, "\n") {
		b.WriteString("\n")
	}
	b.WriteString("</file>")
	return b.String()
}

// Omitted is the note that stands for a part a model cannot see where
// refusing would wedge the conversation (a tool's result stays in the
// history for every later request): it says what was there.
func Omitted(p llm.Part, provider, model string) string {
	what := string(p.Type)
	if p.MediaType != "" {
		what += " " + p.MediaType
	}
	if p.Name != "" {
		what += fmt.Sprintf(" %q", p.Name)
	}
	if p.Size > 0 {
		what += fmt.Sprintf(", %d bytes", p.Size)
	} else if len(p.Data) > 0 {
		what += fmt.Sprintf(", %d bytes", len(p.Data))
	}
	return fmt.Sprintf("[%s omitted: model %q of provider %q cannot take it]", what, model, provider)
}
