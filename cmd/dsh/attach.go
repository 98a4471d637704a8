package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/tools/files"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/llm"
)

// Attachments from the command line: --attach FILE names files for the
// prompt of `dsh run -p`, @path mentions name workspace files in an
// interactive session's line. Both become parts with their bytes; the
// session's attachments store sniffs, limits and stores them when the
// prompt is delivered.

// attachFiles reads the --attach paths. They are the person's own
// explicit choice, so any readable regular file is taken, inside the
// workspace or not; limits.PerPart is checked before a file is read.
func attachFiles(paths []string, limits attachments.Limits) ([]llm.Part, error) {
	perPart := limits.PerPart
	if perPart <= 0 {
		perPart = attachments.DefaultPerPart
	}
	var parts []llm.Part
	for _, p := range paths {
		data, err := readAttachment(p, perPart)
		if err != nil {
			return nil, err
		}
		parts = append(parts, partOf(filepath.Base(p), data))
	}
	return parts, nil
}

func readAttachment(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, errs.Wrap(errs.InvalidArgument, err, fmt.Sprintf("--attach %s: cannot open the file", path))
	}
	defer f.Close()
	st, err := f.Stat()
	switch {
	case err != nil:
		return nil, errs.Wrap(errs.InvalidArgument, err, fmt.Sprintf("--attach %s: cannot read the file", path))
	case !st.Mode().IsRegular():
		return nil, errs.New(errs.InvalidArgument, fmt.Sprintf("--attach %s: not a regular file; attach files, not directories or devices", path))
	case st.Size() > max:
		return nil, errs.New(attachments.TooLarge, fmt.Sprintf("--attach %s: %d bytes, over the limit of %d bytes per attachment", path, st.Size(), max))
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, errs.Wrap(errs.InvalidArgument, err, fmt.Sprintf("--attach %s: cannot read the file", path))
	}
	return data, nil
}

// partOf makes a part of a file's bytes: an image when its bytes are one
// the models take, a file otherwise. The store sniffs again on delivery;
// this only picks the part's kind.
func partOf(name string, data []byte) llm.Part {
	mt, err := attachments.Sniff(data, "", name)
	if err == nil && strings.HasPrefix(mt, "image/") && mt != "image/svg+xml" {
		return llm.Part{Type: llm.PartImage, Name: name, MediaType: mt, Data: data}
	}
	return llm.Part{Type: llm.PartFile, Name: name, MediaType: mt, Data: data}
}

// mentions finds the @path mentions of an interactive line and reads them
// under the file tools' rules (relative to workspace, nothing outside it).
// A mention is "@" at the start of the line or after white space, up to
// the next white space, trailing punctuation dropped. A mention naming no
// file is left as text (an @name in prose); one naming a file outside the
// workspace, or too large, is an error. The line's text is kept whole:
// the model sees where the person mentioned each file.
func mentions(workspace, line string, limits attachments.Limits) ([]llm.Part, error) {
	perPart := limits.PerPart
	if perPart <= 0 {
		perPart = attachments.DefaultPerPart
	}
	var parts []llm.Part
	seen := map[string]bool{}
	for _, m := range mentionPaths(line) {
		if seen[m] {
			continue
		}
		seen[m] = true
		data, name, err := files.ReadInWorkspace(workspace, m, perPart)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, errs.Wrap(errs.CodeOf(err), err, fmt.Sprintf("@%s", m))
		}
		parts = append(parts, partOf(name, data))
	}
	return parts, nil
}

// mentionPaths returns the paths of the @mentions in line, in order.
func mentionPaths(line string) []string {
	var out []string
	fields := strings.FieldsFunc(line, unicode.IsSpace)
	for _, f := range fields {
		p, ok := strings.CutPrefix(f, "@")
		if !ok {
			continue
		}
		p = strings.TrimRight(p, ".,;:!?)]}'\"")
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}
