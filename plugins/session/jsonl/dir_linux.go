package jsonl

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// eachLogName calls fn with the id of every regular <id>.jsonl file of
// dir, straight from getdents(2) into one buffer: a directory of 100,000
// sessions holds 200,000 names, and a DirEntry and a string for each
// cost a listing more than the catalog does. id is valid only during the
// call.
func eachLogName(dir string, fn func(id []byte)) error {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer syscall.Close(fd)
	bp := direntBufs.Get().(*[]byte)
	defer direntBufs.Put(bp)
	buf := *bp
	for {
		n, err := syscall.Getdents(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "getdents", Path: dir, Err: err}
		}
		if n <= 0 {
			return nil
		}
		for off := 0; off+19 <= n; {
			// linux_dirent64: d_ino, d_off (8 bytes each), d_reclen (2,
			// in the machine's byte order), d_type, d_name.
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen == 0 {
				break
			}
			typ := buf[off+18]
			name := buf[off+19 : off+reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			off += reclen
			id, ok := bytes.CutSuffix(name, []byte(".jsonl"))
			if !ok {
				continue
			}
			if typ == syscall.DT_UNKNOWN { // a file system that does not say
				fi, err := os.Lstat(filepath.Join(dir, string(name)))
				if err != nil || !fi.Mode().IsRegular() {
					continue
				}
			} else if typ != syscall.DT_REG {
				continue
			}
			fn(id)
		}
	}
}

// direntBufs keeps getdents buffers between listings: 256 KB each, which
// a listing of a changed directory would otherwise hand to the collector.
var direntBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// mapFile maps the first size bytes of f read-only: a listing reads the
// catalog where the page cache holds it, without copying it into the
// heap. release unmaps it.
func mapFile(f *os.File, size int) ([]byte, func(), error) {
	if size == 0 {
		return nil, func() {}, nil
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return b, func() { syscall.Munmap(b) }, nil
}

// statDir returns the mtime (unix ns) and inode of dir.
func statDir(dir string) (int64, uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return 0, 0, &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	return st.Mtim.Nano(), uint64(st.Ino), nil
}
