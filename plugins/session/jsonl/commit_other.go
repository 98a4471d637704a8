//go:build !linux

package jsonl

import "os"

// syncData makes f's data durable.
func syncData(f *os.File) error { return f.Sync() }

// syncGroup makes the appends to files durable. Without syncfs each file
// is synced on its own, and the directory when a file is new: a group
// costs what its files would alone.
func syncGroup(files []*os.File, fresh bool) error {
	for _, f := range files {
		if err := syncData(f); err != nil {
			return err
		}
	}
	if !fresh {
		return nil
	}
	return syncDir(files[0])
}
