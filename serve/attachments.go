package serve

import (
	"bytes"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/llm"
)

// modelImages are the image types models take; any other bytes (SVG
// included, which is markup) travel as a file.
var modelImages = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// uploadedPart is an uploaded file as a part: an image when its bytes are
// one, else a file, its media type sniffed (the declared one only names a
// text format; a declared image that is not one is refused).
func uploadedPart(data []byte, declared, name string) (llm.Part, error) {
	mt, err := attachments.Sniff(data, declared, name)
	if err != nil {
		return llm.Part{}, err
	}
	p := llm.Part{Type: llm.PartFile, MediaType: mt, Name: name, Data: data, Size: int64(len(data))}
	if modelImages[mt] {
		p.Type = llm.PartImage
	}
	return p, nil
}

// attachment serves the bytes of a part of the session's history, for a
// client showing it. Only refs the session's log names are served, so a
// hash guessed or learnt elsewhere reads nothing of another session. The
// bytes are immutable under their ref, hence the ETag and long caching;
// the headers keep a browser from running them (nosniff, a sandbox CSP,
// and a download for anything but a raster image).
func (s *Server) attachment(w http.ResponseWriter, r *http.Request) {
	id, ref := r.PathValue("id"), r.PathValue("ref")
	hex, ok := strings.CutPrefix(ref, attachments.RefPrefix)
	if !ok || len(hex) != 64 || strings.Trim(hex, "0123456789abcdef") != "" {
		s.writeError(w, r, fail(http.StatusBadRequest, BadRequest, "%q is not an attachment reference; it is \"sha256:\" and 64 lowercase hex digits, as a part's ref in the session's events", ref))
		return
	}
	if err := s.exists(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	// The session service reads only what the session's log names.
	p, data, err := s.o.Sessions.Attachment(r.Context(), id, ref)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	h := w.Header()
	mt := p.MediaType
	if mt == "" {
		mt = "application/octet-stream"
	}
	h.Set("Content-Type", mt)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox; default-src 'none'")
	h.Set("ETag", `"`+ref+`"`)
	h.Set("Cache-Control", "private, max-age=31536000, immutable")
	if !modelImages[mt] {
		cd := mime.FormatMediaType("attachment", map[string]string{"filename": downloadName(p)})
		if cd == "" { // a name mime cannot encode: download it unnamed
			cd = "attachment"
		}
		h.Set("Content-Disposition", cd)
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
}

// downloadName is the file name a download gets: the part's, or one made
// of its ref.
func downloadName(p llm.Part) string {
	if p.Name != "" {
		return p.Name
	}
	return strings.TrimPrefix(p.Ref, attachments.RefPrefix)[:12]
}
