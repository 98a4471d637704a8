package attachments_test

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/dsh-go/dsh/services/attachments"
)

// pngBytes encodes a w×h image whose pixels depend on seed, so different
// seeds give different blobs.
func pngBytes(t testing.TB, w, h int, seed byte) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = byte(i) ^ seed
	}
	img.Set(0, 0, color.NRGBA{seed, seed, seed, 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func openStore(t testing.TB, dir string) *attachments.Store {
	t.Helper()
	s, err := attachments.Open(dir, attachments.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// blobFiles lists the files of the store's blob directory, temp files
// included.
func blobFiles(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func markers(t testing.TB, dir, ref string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "refs", ref[len(attachments.RefPrefix):]))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
