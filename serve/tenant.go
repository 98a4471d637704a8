package serve

import (
	stdctx "context"
	"net/http"
	"slices"
	"strings"

	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// tenantOf is the tenant of the caller of r: empty for an operator, who
// sees every session (a principal with no tenant, or a server without
// auth).
func tenantOf(r *http.Request) string { return principalOf(r).Tenant }

// ownerOf is the tenant session id belongs to, and whether it exists
// (sessions.Owner).
func (s *Server) ownerOf(ctx stdctx.Context, id string) (string, bool, error) {
	return sessions.Owner(ctx, s.o.Sessions, id)
}

// scoped lets a tenant's request for session {id} through only when the
// session is the tenant's. Any other — another tenant's, an operator's,
// one that does not exist, an id that cannot name one — gets the very 404
// of a missing session, decided here before the handler reads the body or
// looks at anything else, so no answer tells a foreign session from a
// missing one. Every route with an {id} is wrapped in it (build), so a new
// route cannot forget the check.
func (s *Server) scoped(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant := tenantOf(r)
		if tenant == "" {
			next.ServeHTTP(w, r)
			return
		}
		id := r.PathValue("id")
		owner, exists, err := s.ownerOf(r.Context(), id)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if !exists || owner != tenant {
			s.writeError(w, r, notFound(id))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// operatorOnly answers a tenant's request as if the route did not exist:
// /metrics counts every tenant's sessions and tokens.
func (s *Server) operatorOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tenantOf(r) != "" {
			writeJSON(w, http.StatusNotFound, fail(0, RouteNotFound, "no route %s %s; GET /openapi.json lists the routes", r.Method, r.URL.Path))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// visible reports whether a session of tenant owner is listed to the
// caller of r.
func visible(r *http.Request, owner string) bool {
	t := tenantOf(r)
	return t == "" || t == owner
}

// statePrincipals logs, at start, who sees what once tenants are in use:
// the principals without a tenant are operators and see every tenant's
// sessions, which must be meant. A mix of named tokens with and without
// tenants is warned about, since a token merely left without one would
// see everything.
func (s *Server) statePrincipals(tokens []Token) {
	var tenants, operators []string
	for _, t := range tokens {
		if t.Tenant != "" {
			tenants = append(tenants, t.Name)
		} else {
			operators = append(operators, t.Name)
		}
	}
	j := s.o.Config.Serve.JWT
	jwtTenants := j.Enabled() && (j.TenantClaim != "" || j.Tenant != "")
	if len(tenants) == 0 && !jwtTenants {
		return
	}
	slices.Sort(operators)
	if j.Enabled() && !jwtTenants {
		operators = append(operators, "every JWT (serve.jwt sets neither tenant_claim nor tenant)")
	}
	if len(operators) == 0 {
		s.log.Info("tenants are in use; every caller has a tenant and sees only its tenant's sessions")
		return
	}
	s.log.Warn("tenants are in use, and these principals have none: they are operators, who see, drive and delete every tenant's sessions and read /metrics; give them a tenant unless that is meant",
		"operators", strings.Join(operators, ", "))
}

// listed reports whether a stored session is listed to the caller of r. A
// session with nothing stored yet has no tenant in its summary: the copy
// that is open says.
func (s *Server) listed(r *http.Request, sum session.Summary) bool {
	if tenantOf(r) == "" {
		return true
	}
	owner := sum.Tenant
	if owner == "" && sum.State == session.StateOpen {
		if in, open := s.info(r.Context(), sum.ID); open {
			owner = in.Tenant
		}
	}
	return visible(r, owner)
}

// tenantPage is one page of the sessions the caller of r sees. A tenant's page
// is filled from as many of the store's pages as it takes, and its cursor
// is made from the last session it shows: the store's own would name
// whatever session ended the store's page, another tenant's perhaps.
func (s *Server) tenantPage(r *http.Request, opts session.ListOptions) (session.Page, error) {
	if tenantOf(r) == "" {
		return s.o.Sessions.ListPage(r.Context(), opts)
	}
	want := opts.Limit
	var out session.Page
	for {
		p, err := s.o.Sessions.ListPage(r.Context(), opts)
		if err != nil {
			return session.Page{}, err
		}
		for _, sum := range p.Sessions {
			if !s.listed(r, sum) {
				continue
			}
			out.Sessions = append(out.Sessions, sum)
			if want > 0 && len(out.Sessions) == want {
				// More may follow: the next page starts after this one.
				out.Next = session.Cursor(sum)
				return out, nil
			}
		}
		if p.Next == "" {
			return out, nil
		}
		opts.Cursor = p.Next
	}
}
