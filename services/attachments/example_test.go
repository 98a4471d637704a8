package attachments_test

import (
	"fmt"

	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/llm"
)

// A prompt's parts go into the store; what comes back is what the session
// log keeps: references, sniffed types, no bytes.
func ExampleStore_Admit() {
	store := attachments.NewMemory(attachments.Limits{})
	png := []byte("\x89PNG\r\n\x1a\n...pixels...")
	parts, release, err := store.Admit("s1", []llm.Part{
		{Type: llm.PartText, Text: "what is this?"},
		{Type: llm.PartFile, Name: "/home/me/shot.png", MediaType: "application/octet-stream", Data: png},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	img := parts[1]
	fmt.Println(img.Type, img.MediaType, img.Name, img.Ref[:7], img.Data == nil)
	// The delivery was refused: release what it stored.
	release()
	fmt.Println(store.Has(img.Ref))
	// Output:
	// image image/png shot.png sha256: true
	// false
}
