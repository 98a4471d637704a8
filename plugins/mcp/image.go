package mcp

import (
	"fmt"

	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/llm"
)

// images collects the images of one result as parts for the attachments
// store, within the store's limits: an image is attached only when its
// bytes are one a model can look at and it fits, and is described in the
// text otherwise, so the model always learns what it did not get.
type images struct {
	limits attachments.Limits
	parts  []llm.Part
	total  int64
}

// add attaches data, declared as declared by the server, or describes why
// not; it returns the line the text holds in its place. what names the
// content ("image", "resource file:///a.png") in that line.
func (im *images) add(what string, data []byte, declared string) (line string, attached bool) {
	n := int64(len(data))
	mt, err := attachments.Sniff(data, declared, "")
	switch {
	case err != nil:
		return fmt.Sprintf("[%s: declared %s but its bytes are not an image (%d bytes); not attached]", what, orUnknown(declared), n), false
	case !modelImage(mt):
		return fmt.Sprintf("[%s: %s, %d bytes; not attached: models take PNG, JPEG, GIF or WebP images]", what, mt, n), false
	case n > im.limits.PerPart:
		return fmt.Sprintf("[%s: %s, %d bytes; not attached: over the limit of %d bytes per attachment (attachments.max_part_bytes)]", what, mt, n, im.limits.PerPart), false
	case im.total+n > im.limits.PerMessage:
		return fmt.Sprintf("[%s: %s, %d bytes; not attached: the images of this result would pass the limit of %d bytes per message (attachments.max_message_bytes)]", what, mt, n, im.limits.PerMessage), false
	}
	im.total += n
	im.parts = append(im.parts, llm.Part{Type: llm.PartImage, MediaType: mt, Data: data})
	return fmt.Sprintf("[%s: %s, %d bytes; attached to this result as image %d]", what, mt, n, len(im.parts)), true
}

// modelImage reports whether providers take images of media type mt.
func modelImage(mt string) bool {
	switch mt {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}
