package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"unicode/utf8"
)

// MaxQuoted is how much of a value the model sent an error message
// repeats: enough to recognize it, not so much that a 100,000-character
// path echoed in a message fills the model's context.
const MaxQuoted = 200

// Cut shortens s to MaxQuoted bytes on a rune boundary, saying how long it
// was, for messages that repeat a value the model sent.
func Cut(s string) string {
	if len(s) <= MaxQuoted {
		return s
	}
	return fmt.Sprintf("%s… [%d bytes in all]", head(s), len(s))
}

// Quote is the quoted (%q) form of s for an error message, cut like Cut.
func Quote(s string) string {
	if len(s) <= MaxQuoted {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q… [%d bytes in all]", head(s), len(s))
}

// head is the first MaxQuoted bytes of s, less a rune cut in half.
func head(s string) string {
	h := s[:MaxQuoted]
	for i := 0; i < utf8.UTFMax && len(h) > 0 && !utf8.ValidString(h); i++ {
		h = h[:len(h)-1]
	}
	return h
}

// Bare strips the path out of an *fs.PathError (or *os.LinkError), which
// repeats it whole, keeping the operation and the reason: the message
// around it names the path once, cut.
func Bare(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}
