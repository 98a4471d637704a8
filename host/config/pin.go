package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
)

// checkPin validates one pin: entry: a file that exists and 64 hex digits.
// Whether the file still matches is checked at each start, where a
// mismatch refuses the plugin.
func checkPin(f PinnedFile, where, key string, p *problems) {
	if f.File == "" {
		p.add(key+".file", "the pin names no file; give file: (the script or package file) and sha256:")
	} else if st, err := os.Stat(f.File); err != nil || st.IsDir() {
		p.add(key+".file", fmt.Sprintf("pinned file %s is not a file; fix the path or remove the pin", where))
	}
	if b, err := hex.DecodeString(f.SHA256); err != nil || len(b) != sha256.Size {
		p.add(key+".sha256", "expected 64 hex digits, the output of sha256sum")
	}
}
