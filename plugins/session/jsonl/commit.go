package jsonl

import (
	"os"
	"path/filepath"
	"sync"
)

// committer makes appends durable in groups: every session of the
// directory writes its lines into its own file, then waits here, and one
// sync covers every file written while the sync before it ran. Agents
// checkpoint at every step, and a sync costs about as much for ten files
// as for one when it is syncfs(2), so the cost per step falls as the
// number of agents grows instead of adding up.
//
// How a group is synced is the platform's (syncGroup).
type committer struct {
	// alone makes every caller sync its own file, sharing nothing.
	alone bool

	mu   sync.Mutex
	cond sync.Cond
	// busy is set while a leader syncs a group.
	busy bool
	// forming is the group that the next sync will cover; nil when
	// nobody waits.
	forming *group

	// syncs counts the sync calls made, for the benchmarks.
	syncs int64
}

// group is the files one sync covers and its outcome.
type group struct {
	files map[*os.File]struct{}
	fresh bool // a file was created, so its directory entry must be synced
	done  bool
	err   error
}

func newCommitter(alone bool) *committer {
	c := &committer{alone: alone}
	c.cond.L = &c.mu
	return c
}

// sync returns once f's data written before the call is durable. fresh
// says f was created since its last sync.
func (c *committer) sync(f *os.File, fresh bool) error {
	if c.alone {
		c.mu.Lock()
		c.syncs++
		c.mu.Unlock()
		return syncAlone(f, fresh)
	}
	c.mu.Lock()
	g := c.forming
	if g == nil {
		g = &group{files: map[*os.File]struct{}{}}
		c.forming = g
	}
	g.files[f] = struct{}{}
	g.fresh = g.fresh || fresh
	// While a sync runs, more appends join the forming group; the first
	// of them to see the sync done leads the group's own sync.
	for c.busy && !g.done {
		c.cond.Wait()
	}
	if g.done {
		err := g.err
		c.mu.Unlock()
		return err
	}
	c.busy = true
	c.forming = nil
	c.syncs++
	c.mu.Unlock()

	err := g.run()

	c.mu.Lock()
	g.err, g.done = err, true
	c.busy = false
	c.cond.Broadcast()
	c.mu.Unlock()
	return err
}

// run syncs what the group covers.
func (g *group) run() error {
	files := make([]*os.File, 0, len(g.files))
	for f := range g.files {
		files = append(files, f)
	}
	return syncGroup(files, g.fresh)
}

// syncAlone makes f's appends durable by itself: its data, and its
// directory's entry when it is new.
func syncAlone(f *os.File, fresh bool) error {
	if err := syncData(f); err != nil {
		return err
	}
	if !fresh {
		return nil
	}
	return syncDir(f)
}

// syncDir makes the entry of f in its directory durable.
func syncDir(f *os.File) error {
	d, err := os.Open(filepath.Dir(f.Name()))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// count returns the syncs made so far.
func (c *committer) count() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.syncs
}
