package files

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/tools"
)

// readImage returns an image file as an image part the model can look at,
// instead of refusing it as binary; ok is false for any other binary file.
// Images over the attachments store's default part limit are described,
// not sent.
func readImage(f *os.File, size int64, arg string) (r tools.Result, ok bool, err error) {
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	mt, serr := attachments.Sniff(head[:n], "", arg)
	if serr != nil || !isModelImage(mt) {
		return tools.Result{}, false, nil
	}
	if size > attachments.DefaultPerPart {
		r, err = failf("%q is an image (%s, %d bytes), too large to attach (limit %d bytes); make a smaller copy first", arg, mt, size, int64(attachments.DefaultPerPart))
		return r, true, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		r, err = fail(err)
		return r, true, err
	}
	data, err := io.ReadAll(io.LimitReader(f, attachments.DefaultPerPart+1))
	if err != nil {
		r, err = fail(err)
		return r, true, err
	}
	name := filepath.Base(arg)
	return tools.Result{
		Content: fmt.Sprintf("%q is an image (%s, %d bytes), attached to this result.", arg, mt, len(data)),
		Parts:   []llm.Part{{Type: llm.PartImage, Name: name, MediaType: mt, Data: data}},
	}, true, nil
}

func isModelImage(mt string) bool {
	switch mt {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}
