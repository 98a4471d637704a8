//go:build !linux

package jsonl

import (
	"errors"
	"io"
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

// mapFile reads the first size bytes of f.
func mapFile(f *os.File, size int) ([]byte, func(), error) {
	b := make([]byte, size)
	n, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, nil, err
	}
	return b[:n], func() {}, nil
}

// statDir returns the mtime (unix ns) of dir; no inode here.
func statDir(dir string) (int64, uint64, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return 0, 0, err
	}
	return fi.ModTime().UnixNano(), 0, nil
}
