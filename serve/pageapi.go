package serve

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/serve/web"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/usage"
)

// TitlesUnavailable: the titles people gave sessions could not be read or
// saved (serve.state_dir's titles.json).
const TitlesUnavailable errs.Code = "SERVE_TITLES_UNAVAILABLE"

// The routes the web page needs beyond the session API: Markdown rendered
// on the server (so the page runs no Markdown code of its own), the
// config's price table (so it can price each step's usage), and titles a
// person gives sessions.

// maxRenderTexts bounds the texts of one render request; the page asks
// for the messages in view, a few dozen at a time.
const maxRenderTexts = 1000

type renderRequest struct {
	Texts []string `json:"texts"`
}

// render answers POST /v1/render: each text's sanitized HTML, in order.
func (s *Server) render(w http.ResponseWriter, r *http.Request) {
	var req renderRequest
	if err := s.decode(r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(req.Texts) > maxRenderTexts {
		s.writeError(w, r, fail(http.StatusBadRequest, BadRequest, "POST /v1/render takes at most %d texts and got %d; send them in several requests", maxRenderTexts, len(req.Texts)))
		return
	}
	out := make([]string, len(req.Texts))
	for i, t := range req.Texts {
		out[i] = web.Render(t)
	}
	writeJSON(w, http.StatusOK, map[string][]string{"html": out})
}

// pricing answers GET /v1/pricing: the config's pricing: key and the
// model each agent runs, which a step records only when the agent names
// one.
func (s *Server) pricing(w http.ResponseWriter, _ *http.Request) {
	cfg := s.o.Config
	models := map[string]string{}
	for _, ac := range cfg.Agents {
		models[ac.ID] = ac.Model
		if ac.Model == "" {
			models[ac.ID] = cfg.DefaultModel(ac.Provider)
		}
	}
	p := cfg.Pricing
	if p.Models == nil {
		p.Models = map[string]usage.Price{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"currency": p.CurrencyName(), "models": p.Models, "agent_models": models})
}

// titles keeps the titles people gave sessions, in titles.json under
// serve.state_dir: a small map read once and rewritten whole on each
// change (a person renames a session now and then).
type titles struct {
	mu   sync.Mutex
	path string
	m    map[string]string
	read bool
}

var titleStores sync.Map // state file path -> *titles

func (s *Server) titleStore() *titles {
	path := filepath.Join(s.o.Config.ServeStateDir(), "titles.json")
	t, _ := titleStores.LoadOrStore(path, &titles{path: path})
	return t.(*titles)
}

// load reads the file once; a missing file is no titles.
func (t *titles) load() error {
	if t.read {
		return nil
	}
	t.m = map[string]string{}
	b, err := os.ReadFile(t.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fail(http.StatusInternalServerError, TitlesUnavailable, "reading the session titles at %s: %v; check the file's permissions", t.path, err)
	default:
		if err := json.Unmarshal(b, &t.m); err != nil {
			return fail(http.StatusInternalServerError, TitlesUnavailable, "the session titles at %s are not a JSON object of strings (%v); fix or remove the file", t.path, err)
		}
	}
	t.read = true
	return nil
}

func (t *titles) all() (map[string]string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.load(); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(t.m))
	for k, v := range t.m {
		out[k] = v
	}
	return out, nil
}

// set stores a title; "" removes it. The file is replaced by a rename,
// so a crash leaves the old titles or the new ones.
func (t *titles) set(id, title string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.load(); err != nil {
		return err
	}
	if title == "" {
		delete(t.m, id)
	} else {
		t.m[id] = title
	}
	b, _ := json.Marshal(t.m)
	if err := os.MkdirAll(filepath.Dir(t.path), 0o700); err != nil {
		return fail(http.StatusInternalServerError, TitlesUnavailable, "saving the session titles: %v; check serve.state_dir", err)
	}
	tmp := t.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fail(http.StatusInternalServerError, TitlesUnavailable, "saving the session titles at %s: %v; check serve.state_dir", t.path, err)
	}
	if err := os.Rename(tmp, t.path); err != nil {
		return fail(http.StatusInternalServerError, TitlesUnavailable, "saving the session titles at %s: %v; check serve.state_dir", t.path, err)
	}
	return nil
}

// listTitles answers GET /v1/titles: {"titles": {session id: title}}.
func (s *Server) listTitles(w http.ResponseWriter, r *http.Request) {
	m, err := s.titleStore().all()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if tenantOf(r) != "" {
		// A tenant sees the titles of its own sessions only.
		for id := range m {
			if owner, exists, err := s.ownerOf(r.Context(), id); err != nil || !exists || !visible(r, owner) {
				delete(m, id)
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"titles": m})
}

type titleRequest struct {
	Title string `json:"title"`
}

// setTitle answers POST /v1/sessions/{id}/title; an empty title gives the
// session back its first prompt as title.
func (s *Server) setTitle(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !session.ValidID(id) {
		s.writeError(w, r, fail(http.StatusBadRequest, BadRequest, "%q is not a session id: %s", id, session.IDRule))
		return
	}
	var req titleRequest
	if err := s.decode(r, &req, false); err != nil {
		s.writeError(w, r, err)
		return
	}
	title := strings.Join(strings.Fields(req.Title), " ")
	if n := utf8.RuneCountInString(title); n > session.TitleMax {
		s.writeError(w, r, fail(http.StatusBadRequest, BadRequest, "a session title holds at most %d characters and this one has %d; shorten it", session.TitleMax, n))
		return
	}
	// Only a session that exists takes a title: made-up ids would grow
	// the file, rewritten whole on each change, without bound.
	if err := s.exists(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.titleStore().set(id, title); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": id, "title": title})
}
