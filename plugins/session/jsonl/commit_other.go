//go:build !linux

package jsonl

import (
	"os"
	"path/filepath"
)

// syncGroup makes the appends to files durable. Without syncfs each file
// is synced on its own, and the directory when a file is new: a group
// costs what its files would alone.
func syncGroup(files []*os.File, fresh bool) error {
	for _, f := range files {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	if !fresh {
		return nil
	}
	d, err := os.Open(filepath.Dir(files[0].Name()))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
