package attachments

import (
	"fmt"
	"path/filepath"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/llm"
)

// Admit checks and stores the parts of one message for sessionID. It
// returns the parts as the session log keeps them — bytes replaced by Ref,
// media types sniffed, names without directories — and a release that
// undoes what this call took (see Put). On error nothing is left stored.
//
// Text parts pass as they are. An image or file part with Data is sniffed
// and stored; one with only a Ref must name a blob the store holds; a file
// part with only Text passes (its text goes in the log, as a prompt's
// would).
func (s *Store) Admit(sessionID string, parts []llm.Part) ([]llm.Part, func(), error) {
	if err := s.check(parts); err != nil {
		return nil, nil, err
	}
	out := make([]llm.Part, len(parts))
	var releases []func()
	release := func() {
		for _, r := range releases {
			r()
		}
	}
	for i, p := range parts {
		p, r, err := s.admitPart(sessionID, i, p)
		if err != nil {
			release()
			return nil, nil, err
		}
		if r != nil {
			releases = append(releases, r)
		}
		out[i] = p
	}
	return out, release, nil
}

// check enforces the limits and the shape of every part before anything
// is stored.
func (s *Store) check(parts []llm.Part) error {
	if len(parts) > s.limits.Parts {
		return errs.New(TooMany, fmt.Sprintf("the message carries %d parts, over the limit of %d per message; send fewer files in one message or raise attachments.max_parts",
			len(parts), s.limits.Parts))
	}
	var total int64
	for i, p := range parts {
		switch p.Type {
		case llm.PartText:
			continue
		case llm.PartImage, llm.PartFile:
		default:
			return errs.New(BadPart, fmt.Sprintf("part %d has type %q; use %q, %q or %q", i, p.Type, llm.PartText, llm.PartImage, llm.PartFile))
		}
		n := int64(len(p.Data))
		if n > s.limits.PerPart {
			return errs.New(TooLarge, fmt.Sprintf("part %d (%s, %d bytes) is over the limit of %d bytes per attachment; send a smaller file or raise attachments.max_part_bytes",
				i, label(p.Name), n, s.limits.PerPart))
		}
		if total += n; total > s.limits.PerMessage {
			return errs.New(TooLarge, fmt.Sprintf("the attachments of this message reach %d bytes at part %d (%s), over the limit of %d bytes per message; send fewer or smaller files or raise attachments.max_message_bytes",
				total, i, label(p.Name), s.limits.PerMessage))
		}
		if n == 0 && p.Ref == "" && (p.Type == llm.PartImage || p.Text == "") {
			return errs.New(BadPart, fmt.Sprintf("part %d (%s) is an empty %s: it has no bytes and no reference", i, label(p.Name), p.Type))
		}
	}
	return nil
}

func (s *Store) admitPart(sessionID string, i int, p llm.Part) (llm.Part, func(), error) {
	if p.Type == llm.PartText {
		return p, nil, nil
	}
	p.Name = filepath.Base(filepath.Clean("/" + p.Name))
	if p.Name == "/" {
		p.Name = ""
	}
	if p.Data == nil {
		if p.Ref == "" { // a text file given as text
			return p, nil, nil
		}
		r, err := s.Hold(sessionID, p.Ref)
		if err != nil {
			return llm.Part{}, nil, errs.Wrap(errs.CodeOf(err), err, fmt.Sprintf("part %d (%s) names %s", i, label(p.Name), p.Ref))
		}
		return p, r, nil
	}
	mt, err := Sniff(p.Data, p.MediaType, p.Name)
	if err != nil {
		return llm.Part{}, nil, err
	}
	// A file of unknown kind that is an image is sent as one; a file the
	// sender typed (an image kept as a document) stays a file.
	if p.Type == llm.PartFile && isImage(mt) && (p.MediaType == "" || baseType(p.MediaType) == "application/octet-stream") {
		p.Type = llm.PartImage
	}
	if p.Type == llm.PartImage && !isImage(mt) {
		return llm.Part{}, nil, errs.New(MediaMismatch, fmt.Sprintf("part %d (%s) is sent as an image but its bytes are %s; send it as a file", i, label(p.Name), mt))
	}
	ref, release, err := s.Put(sessionID, p.Data)
	if err != nil {
		return llm.Part{}, nil, err
	}
	p.MediaType, p.Ref, p.Size, p.Data, p.Text = mt, ref, int64(len(p.Data)), nil, ""
	return p, release, nil
}

func isImage(mt string) bool {
	switch mt {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}

// Resolve returns parts with the bytes of every referenced part read from
// the store, and the text of text files in Text; parts is not changed.
// It returns parts itself when nothing needs reading.
func (s *Store) Resolve(parts []llm.Part) ([]llm.Part, error) {
	var out []llm.Part
	for i, p := range parts {
		if p.Ref == "" || p.Data != nil {
			continue
		}
		data, err := s.Get(p.Ref)
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = append([]llm.Part(nil), parts...)
		}
		out[i].Data = data
		if p.Type == llm.PartFile && p.Text == "" && IsText(p.MediaType) {
			out[i].Text = string(data)
		}
	}
	if out == nil {
		return parts, nil
	}
	return out, nil
}
