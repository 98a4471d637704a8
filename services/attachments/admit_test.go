package attachments_test

import (
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/llm"
)

func TestSniffTrustsTheBytesNotTheDeclaredType(t *testing.T) {
	png := pngBytes(t, 4, 4, 1)
	webp := append([]byte("RIFF\x10\x00\x00\x00WEBPVP8 "), make([]byte, 16)...)
	cases := []struct {
		name, declared string
		data           []byte
		want           string
		code           errs.Code
	}{
		{"png as png", "image/png", png, "image/png", ""},
		{"png sent as bytes", "application/octet-stream", png, "image/png", ""},
		{"png declared jpeg", "image/jpeg", png, "image/png", ""},
		{"text declared png", "image/png", []byte("hello, not an image"), "", attachments.MediaMismatch},
		{"webp", "", webp, "image/webp", ""},
		{"markdown keeps its subtype", "text/markdown; charset=utf-8", []byte("# Title\n"), "text/markdown", ""},
		{"json keeps its type", "application/json", []byte(`{"a":1}`), "application/json", ""},
		{"text declared pdf", "application/pdf", []byte("plain words"), "text/plain", ""},
		{"invalid utf-8 is not text", "text/plain", []byte{0xff, 0xfe, 0x41, 0x80}, "application/octet-stream", ""},
		{"svg", "", []byte(`<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"></svg>`), "image/svg+xml", ""},
	}
	for _, c := range cases {
		got, err := attachments.Sniff(c.data, c.declared, "x")
		if c.code != "" {
			if !errs.HasCode(err, c.code) {
				t.Errorf("%s: got %q, %v; want %s", c.name, got, err, c.code)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}

func TestAdmitStoresBytesAndReturnsReferences(t *testing.T) {
	s := attachments.NewMemory(attachments.Limits{})
	img := pngBytes(t, 8, 8, 1)
	in := []llm.Part{
		{Type: llm.PartText, Text: "what is in "},
		{Type: llm.PartImage, MediaType: "image/jpeg", Name: "/home/me/shot.png", Data: img},
		{Type: llm.PartFile, Name: "notes.md", MediaType: "text/markdown", Data: []byte("# notes\n")},
	}
	out, release, err := s.Admit("s1", in)
	if err != nil {
		t.Fatal(err)
	}
	im := out[1]
	if im.Data != nil || im.Ref != attachments.RefOf(img) || im.MediaType != "image/png" || im.Size != int64(len(img)) || im.Name != "shot.png" {
		t.Fatalf("admitted image part %+v", im)
	}
	if in[1].Data == nil || in[1].Ref != "" {
		t.Fatal("Admit changed the caller's parts")
	}
	resolved, err := s.Resolve(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(resolved[1].Data) != string(img) || resolved[2].Text != "# notes\n" || out[1].Data != nil {
		t.Fatal("Resolve did not fill a copy with the bytes and the text file's text")
	}
	release()
	if s.Has(im.Ref) || s.Has(out[2].Ref) {
		t.Fatal("release left the admitted blobs")
	}
}

// A file the sender calls a file but which is an image goes to the model
// as an image; a declared image that is not one is refused.
func TestAdmitTakesPartsForWhatTheyAre(t *testing.T) {
	s := attachments.NewMemory(attachments.Limits{})
	out, _, err := s.Admit("s1", []llm.Part{{Type: llm.PartFile, Name: "a.bin", Data: pngBytes(t, 2, 2, 1)}})
	if err != nil || out[0].Type != llm.PartImage {
		t.Fatalf("an undeclared PNG file became %+v, %v; want an image part", out, err)
	}
	_, _, err = s.Admit("s1", []llm.Part{{Type: llm.PartImage, Name: "t.txt", Data: []byte("words")}})
	if !errs.HasCode(err, attachments.MediaMismatch) {
		t.Fatalf("an image part holding text: %v; want %s", err, attachments.MediaMismatch)
	}
}

func TestLimitsNameThePartAndTheLimit(t *testing.T) {
	s := attachments.NewMemory(attachments.Limits{PerPart: 100, PerMessage: 150})
	big := make([]byte, 101)
	_, _, err := s.Admit("s1", []llm.Part{{Type: llm.PartFile, Name: "big.bin", Data: big}})
	if !errs.HasCode(err, attachments.TooLarge) || !strings.Contains(err.Error(), `"big.bin"`) || !strings.Contains(err.Error(), "100 bytes per attachment") {
		t.Fatalf("over the part limit: %v", err)
	}
	_, _, err = s.Admit("s1", []llm.Part{
		{Type: llm.PartFile, Name: "a", Data: make([]byte, 80)},
		{Type: llm.PartFile, Name: "b", Data: make([]byte, 80)},
	})
	if !errs.HasCode(err, attachments.TooLarge) || !strings.Contains(err.Error(), `part 1 ("b")`) || !strings.Contains(err.Error(), "150 bytes per message") {
		t.Fatalf("over the message limit: %v", err)
	}
	if s.Written() != 0 {
		t.Fatalf("a refused message wrote %d bytes", s.Written())
	}
}

// A part refused half-way through a message releases the ones already
// stored.
func TestAFailedAdmitLeavesNothingStored(t *testing.T) {
	eachBackend(t, testAFailedAdmitLeavesNothing)
}

func testAFailedAdmitLeavesNothing(t *testing.T, b backend) {
	s := b.open(t, attachments.Limits{})
	good := pngBytes(t, 8, 8, 2)
	_, _, err := s.Admit("s1", []llm.Part{
		{Type: llm.PartImage, Data: good},
		{Type: llm.PartImage, MediaType: "image/png", Data: []byte("not a png")},
	})
	if !errs.HasCode(err, attachments.MediaMismatch) {
		t.Fatalf("got %v", err)
	}
	if b.dir != "" {
		if got := blobFiles(t, b.dir); len(got) != 0 {
			t.Fatalf("a refused message left %v", got)
		}
	}
	if ref := attachments.RefOf(good); s.Has(ref) || len(referrers(t, s, ref)) != 0 {
		t.Fatal("a refused message left the part stored before the refused one")
	}
}

func TestAdmitHoldsAPartGivenByReference(t *testing.T) {
	s := attachments.NewMemory(attachments.Limits{})
	img := pngBytes(t, 8, 8, 3)
	ref, _, _ := s.Put("s1", img)
	out, release, err := s.Admit("s2", []llm.Part{{Type: llm.PartImage, MediaType: "image/png", Ref: ref}})
	if err != nil || out[0].Ref != ref {
		t.Fatalf("%+v, %v", out, err)
	}
	release()
	if !s.Has(ref) {
		t.Fatal("releasing s2's hold removed s1's blob")
	}
	_, _, err = s.Admit("s2", []llm.Part{{Type: llm.PartImage, Ref: attachments.RefOf([]byte("x"))}})
	if !errs.HasCode(err, attachments.NotFound) {
		t.Fatalf("a reference to nothing: %v", err)
	}
}
