// Package atomicfile replaces a file's content in one step: a reader, or
// a crash, finds the old content or the new, never a part of either. The
// stores (attachments, the session catalog, checkpoints' rewind, the
// schedules' state) all need that and had each written it out.
package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Write writes data to a temporary file beside path, sets its mode (when
// not 0), runs prepare on it (when set: to give it a time, say), syncs it
// and renames it over path. On any failure the temporary file is removed
// and path is as it was. Making the rename itself durable (syncing the
// directory) is the caller's choice.
func Write(path string, data []byte, mode fs.FileMode, prepare func(tmp string) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if err == nil && mode != 0 {
		err = tmp.Chmod(mode)
	}
	if err == nil && prepare != nil {
		err = prepare(tmp.Name())
	}
	if err == nil {
		err = tmp.Sync()
	}
	err = errors.Join(err, tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}
