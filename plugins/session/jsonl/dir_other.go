//go:build !linux

package jsonl

import (
	"os"
	"strings"
)

// eachLogName calls fn with the id of every regular <id>.jsonl file of
// dir.
func eachLogName(dir string, fn func(id []byte)) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	entries, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return err
	}
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".jsonl"); ok && e.Type().IsRegular() {
			fn([]byte(id))
		}
	}
	return nil
}
