package entry

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
)

// mask covers dir, a directory only dsh's user may enter, with an empty
// tmpfs, creates in it the way to each mount beneath dir and to each
// directory of reach, and makes it read-only: the command passes through
// dir to what it may use and sees nothing else of it. The mount points
// belong to the command's uid; it cannot write them all the same.
func mask(dir string, mounts []detached, reach []string) error {
	return asNamespaceRoot(func() error { return buildMask(dir, mounts, reach) })
}

func buildMask(dir string, mounts []detached, reach []string) error {
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("masking %s with a tmpfs: %w", dir, err)
	}
	for _, d := range mounts {
		if !strings.HasPrefix(d.path, dir+"/") {
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(d.fd, &st); err != nil {
			return fmt.Errorf("the mount of %s: %w", d.path, err)
		}
		if err := mountPoint(d.path, st.Mode&syscall.S_IFMT == syscall.S_IFDIR); err != nil {
			return err
		}
	}
	for _, r := range reach {
		if strings.HasPrefix(r, dir+"/") || r == dir {
			if err := mountPoint(r, true); err != nil {
				return err
			}
		}
	}
	if err := setAttr(-1, dir, 0, mountAttrRdonly); err != nil {
		return fmt.Errorf("making the mask over %s read-only: %w", dir, err)
	}
	return nil
}

// asNamespaceRoot runs f on a thread whose file system ids are uid and
// gid 0 of the sandbox's user namespace. The entry keeps dsh's kernel uid
// until it becomes the command's, and a file system mounted in the
// namespace refuses to create files (EOVERFLOW) for an id it does not map.
// The ids are the thread's own, so f runs on a thread of its own, which
// ends with it rather than go back to the runtime with those ids.
func asNamespaceRoot(f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		syscall.RawSyscall(syscall.SYS_SETFSGID, 0, 0, 0)
		syscall.RawSyscall(syscall.SYS_SETFSUID, 0, 0, 0)
		// setfs*id report the previous id, never an error: ask again.
		if u, _, _ := syscall.RawSyscall(syscall.SYS_SETFSUID, 0, 0, 0); u != 0 {
			done <- fmt.Errorf("taking uid 0 of the sandbox's namespace to build a mask: setfsuid left %d", u)
			return
		}
		done <- f()
	}()
	return <-done
}

// mountPoint creates p, a directory or an empty file, and its parents.
func mountPoint(p string, dir bool) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("the way to %s in its mask: %w", p, err)
	}
	if dir {
		if err := os.Mkdir(p, 0o755); err != nil && !os.IsExist(err) {
			return fmt.Errorf("the mount point %s in its mask: %w", p, err)
		}
		return nil
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDONLY, 0o444)
	if err != nil {
		return fmt.Errorf("the mount point %s in its mask: %w", p, err)
	}
	return f.Close()
}
