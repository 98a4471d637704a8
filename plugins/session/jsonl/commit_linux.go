package jsonl

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncData makes f's data durable, and the size an append changes.
func syncData(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

// syncGroup makes the appends to files durable. One file that existed at
// its last sync needs syncData. Anything more takes syncfs: one call for
// every file of the file system, new directory entries included. syncfs
// reports a failed write-back of any file of the file system since it was
// last called (errseq), not only of ours: such an error fails the group,
// whose appends are then retried.
func syncGroup(files []*os.File, fresh bool) error {
	if len(files) == 1 && !fresh {
		return syncData(files[0])
	}
	return unix.Syncfs(int(files[0].Fd()))
}
