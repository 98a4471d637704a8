package entry

import (
	"fmt"
	"os"
	"syscall"
)

// emptyFile is where hideFiles makes the empty file it mounts over each
// hidden file: beneath /proc, which the entry mounts the sandbox's own
// procfs over afterwards, so no trace of it is left in the command's view.
const emptyFile = "/proc/empty"

// hide covers each of paths so the command sees it empty: a directory by an
// empty, read-only tmpfs, anything else by an empty read-only file.
// Read-only is not enough for a secret: through the idmapped workspace the
// command reads dsh's user's files as that user. A missing path is left.
func hide(paths []string) error {
	var files []string
	for _, p := range paths {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err == syscall.ENOENT || err == syscall.ENOTDIR {
			continue
		} else if err != nil {
			return fmt.Errorf("hiding %s: %w", p, err)
		}
		if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			files = append(files, p)
			continue
		}
		const flags = syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_NOEXEC | syscall.MS_RDONLY
		if err := syscall.Mount("tmpfs", p, "tmpfs", flags, "mode=0555,size=4k,nr_inodes=1"); err != nil {
			return fmt.Errorf("hiding %s under an empty tmpfs: %w", p, err)
		}
	}
	if len(files) == 0 {
		return nil
	}
	return hideFiles(files)
}

// hideFiles mounts one empty read-only file over each of files. Not
// /dev/null: a device is writable on a read-only mount, and the command's
// writes would seem to succeed.
func hideFiles(files []string) error {
	// Mounted and filled under an id the tmpfs can record: the entry's
	// own where the namespace maps it (dsh is not root), else the
	// namespace's root (see asNamespaceRoot).
	defer syscall.Unmount("/proc", syscall.MNT_DETACH)
	if err := makeEmptyFile(); err != nil {
		_ = syscall.Unmount("/proc", syscall.MNT_DETACH)
		if err := asNamespaceRoot(makeEmptyFile); err != nil {
			return fmt.Errorf("the empty file that covers hidden files: %w", err)
		}
	}
	for _, p := range files {
		fd, err := openTree(-1, emptyFile, openTreeClone)
		if err != nil {
			return fmt.Errorf("cloning the cover of %s: %w", p, err)
		}
		err = setAttr(fd, "", atEmptyPath, mountAttrRdonly)
		if err == nil {
			err = moveMount(fd, p)
		}
		syscall.Close(fd)
		if err != nil {
			return fmt.Errorf("hiding %s under an empty file: %w", p, err)
		}
	}
	return nil
}

// makeEmptyFile mounts a small tmpfs over /proc and creates emptyFile in it.
func makeEmptyFile() error {
	const flags = syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_NOEXEC
	if err := syscall.Mount("tmpfs", "/proc", "tmpfs", flags, "mode=0755,size=4k,nr_inodes=2"); err != nil {
		return err
	}
	f, err := os.OpenFile(emptyFile, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o444)
	if err != nil {
		return err
	}
	return f.Close()
}
