package host

import (
	stdctx "context"
	"errors"
	"sort"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/session"
)

// A session store mounted in a preset writes the sessions of that
// preset's agents, but only from inside each agent's scope: it serves no
// listing, deletion or resume, for a session is resumed before its agent's
// scope exists. So the host mounts each such store once more, on a tree
// of its own that runs no agent and hears no event (catalog-only), and
// lists, deletes and resumes through those copies too. Without a root
// store they also serve the root's session service, so `dsh run
// --session` resumes what a preset wrote; with one, a preset store in
// another directory is listed and deleted but not resumed (the root's
// backend is the one resumes read). The copies are mounted when first
// needed (ensurePresetCatalog) and disposed with the host or by a reload.

// presetCatalog is the plugin, mounted at the root, that holds the
// catalog copies of cfg's preset stores; disposing it disposes them.
type presetCatalog struct {
	h   *Host
	cfg *config.Config
}

func (presetCatalog) Name() string { return "host: preset session stores" }

func (p presetCatalog) Apply(ctx *dshctx.Context, _ any) error {
	var stores []*session.Store
	for _, ps := range p.cfg.PresetStores() {
		st, err := p.mount(ctx, ps)
		if err != nil {
			return err
		}
		stores = append(stores, st)
	}
	if len(stores) == 0 {
		return nil
	}
	root, err := session.Key.Get(p.h.root)
	if err != nil {
		return err
	}
	union := storeUnion(stores)
	if !p.cfg.Persists("") { // "": no agent, so the root's stores alone
		// No root store: the union is the root's backend, so resumes and
		// the root's listing reach the presets' sessions.
		if err := root.SetBackend(ctx, union); err != nil {
			return err
		}
		p.h.setPresetStores(nil)
	} else {
		p.h.setPresetStores(union)
	}
	_, err = ctx.OnDispose("forget the preset session stores", func() error {
		p.h.setPresetStores(nil)
		return nil
	})
	return err
}

// mount starts one preset store on a tree of its own, whose root tag is
// empty, so the store serves its session service as the backend, and
// whose events are its own (none), so it writes nothing an agent does.
func (p presetCatalog) mount(ctx *dshctx.Context, ps config.PresetStore) (*session.Store, error) {
	tree := dshctx.New(dshctx.WithLogger(p.h.log.Named("catalog")))
	if _, err := ctx.OnDispose("dispose the catalog copy of "+ps.At, func() error { return tree.Dispose(stdctx.Background()) }); err != nil {
		return nil, errors.Join(err, tree.Dispose(stdctx.Background()))
	}
	f, err := tree.Plugin(session.Plugin, nil)
	if err == nil {
		err = f.Await(stdctx.Background())
	}
	if err != nil {
		return nil, err
	}
	if _, err := p.h.apply(tree, p.cfg, ps.Entry, ps.At+" (catalog)"); err != nil {
		return nil, err
	}
	return session.Key.Get(tree)
}

// ensurePresetCatalog mounts the catalog of the running config's preset
// stores, once, when a listing, a deletion or a resume first needs it: a
// host that never looks at stored sessions starts none of it, and a store
// that cannot start fails the look, not the host. It waits for a reload
// in progress, which disposes the catalog (stopPresetCatalog), so it
// mounts the config that reload leaves. Callers must not hold the reload
// lock.
func (h *Host) ensurePresetCatalog() error {
	h.reloading.RLock()
	defer h.reloading.RUnlock()
	h.catalogMu.Lock()
	defer h.catalogMu.Unlock()
	h.mu.Lock()
	mounted, closed, cfg := h.presetCatalog != nil, h.closed, h.cfg
	h.mu.Unlock()
	if mounted || closed || len(cfg.PresetStores()) == 0 {
		return nil
	}
	f, err := h.mountPresetCatalog(cfg)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.presetCatalog = f
	h.mu.Unlock()
	return nil
}

// mountPresetCatalog mounts the catalog of cfg's preset stores at the root
// and returns its fiber.
func (h *Host) mountPresetCatalog(cfg *config.Config) (*dshctx.Fiber, error) {
	f, err := h.root.Plugin(presetCatalog{h: h, cfg: cfg}, nil)
	if err == nil {
		err = f.Await(stdctx.Background())
	}
	if err != nil {
		if f != nil {
			err = errors.Join(err, f.Dispose(stdctx.Background()))
		}
		return nil, errs.Wrap(StartFailed, err, "the stored sessions of the presets' session stores cannot be read: a store failed to start; fix its entry (the error names it)")
	}
	return f, nil
}

func (h *Host) setPresetStores(u storeUnion) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.presetStores = u
}

// extraStores returns the preset stores the root's backend does not
// already answer for.
func (h *Host) extraStores() storeUnion {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.presetStores
}

// storeUnion answers as one backend for several session services: a
// session is in the first that holds it.
type storeUnion []*session.Store

func (u storeUnion) Load(ctx stdctx.Context, id string) ([]session.Event, error) {
	var err error
	for _, st := range u {
		var events []session.Event
		if events, err = st.Load(ctx, id); !errs.HasCode(err, session.NotFound) {
			return events, err
		}
	}
	return nil, err
}

func (u storeUnion) List(ctx stdctx.Context) ([]session.Summary, error) {
	var all []session.Summary
	for _, st := range u {
		list, err := st.List(ctx)
		if err != nil {
			return nil, err
		}
		all = append(all, list...)
	}
	return all, nil
}

// Delete removes the session from every store that holds it: two presets
// in different directories may both record an agent that mounts both.
func (u storeUnion) Delete(ctx stdctx.Context, id string) error {
	var notFound error
	deleted := false
	for _, st := range u {
		err := st.Delete(ctx, id)
		switch {
		case err == nil:
			deleted = true
		case errs.HasCode(err, session.NotFound):
			notFound = err
		default:
			return err
		}
	}
	if deleted {
		return nil
	}
	return notFound
}

// merged joins listings newest first, each session once.
func merged(lists ...[]session.Summary) []session.Summary {
	var out []session.Summary
	seen := map[string]bool{}
	for _, list := range lists {
		for _, s := range list {
			if !seen[s.ID] {
				seen[s.ID] = true
				out = append(out, s)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Updated.Equal(out[j].Updated) {
			return out[i].Updated.After(out[j].Updated)
		}
		return out[i].ID < out[j].ID
	})
	return out
}
