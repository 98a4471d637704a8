package cluster

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/dsh-go/dsh/telemetry"
	"go.opentelemetry.io/otel/trace"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/dsh-go/dsh/errs"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// maxHops bounds how often one request is forwarded: to the owner, and
// once more when the session moved (or a claiming host lost the claim to
// another) meanwhile. Past it the request fails rather than chase a
// session around the cluster.
const maxHops = 2

// claimAttempts bounds the claims of one request: a claim lost to another
// host is followed by reading the lease again and forwarding to the winner.
const claimAttempts = 3

const (
	opPrompt = "prompt"
	opCancel = "cancel"
	opClose  = "close"
)

// request is a forwarded prompt, steer or cancel as it travels over NATS.
type request struct {
	Op        string          `json:"op"`
	Session   string          `json:"session"`
	Mode      sessions.Mode   `json:"mode,omitempty"`
	RequestID string          `json:"request_id,omitempty"`
	Content   string          `json:"content,omitempty"`
	Parts     []part          `json:"parts,omitempty"`
	Source    sessions.Source `json:"source"`
	// From is the host that forwarded it last, for the target's log.
	From string `json:"from"`
	// Hops counts the forwards so far; the target forwards again only
	// below maxHops.
	Hops int `json:"hops"`
	// Viewed: the sender forwarded by its view of the leases
	// (leasecache.go), which may lag.
	Viewed bool `json:"viewed,omitempty"`
	// Args are the arguments of the ops other than prompt, cancel and
	// close (ops.go), as JSON.
	Args json.RawMessage `json:"args,omitempty"`
	// Actor is who acts (sessions.WithActor), for the owner's records: a
	// cancel's dropped messages name it.
	Actor string `json:"actor,omitempty"`
}

// part is an attachment with its bytes: llm.Part keeps Data out of JSON
// (bytes never reach a log), but a forwarded prompt must carry them to the
// owner, whose attachments store takes them.
type part struct {
	llm.Part
	Data []byte `json:"data,omitempty"`
}

// reply is one message of the target on the request's inbox: Working while
// it still serves the request (so the sender tells a slow admission from a
// dead host), then one final message with the message id or the error as
// errs.Encode writes it, code, reason and details (presented) included.
type reply struct {
	Working bool `json:"working,omitempty"`
	answer
	Error json.RawMessage `json:"error,omitempty"`
}

// answer is what an op returns: a prompt's message id, or the result of
// another op as JSON (ops.go).
type answer struct {
	MessageID string          `json:"message_id,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
}

// Prompt delivers a prompt (mode Followup) or a steering message (Steer)
// to the session, wherever it runs: through the local session controller
// when the session is open here, else to the host its lease names, whose
// admission decides. A session nobody owns is claimed: resumed here, or on
// a live host of Options.ClaimGroup. It returns the message id; a refusal
// is the owner's, with the same code, reason and presented flag it has
// there.
func (h *Host) Prompt(ctx stdctx.Context, sessionID string, mode sessions.Mode, r sessions.PromptRequest) (string, error) {
	switch mode {
	case "":
		mode = sessions.ModeFollowup
	case sessions.ModeFollowup, sessions.ModeSteer:
	default:
		return "", errs.New(errs.InvalidArgument, fmt.Sprintf("cluster: mode %q is not a delivery mode; use %q or %q", mode, sessions.ModeFollowup, sessions.ModeSteer))
	}
	req := request{Op: opPrompt, Session: sessionID, Mode: mode, RequestID: r.RequestID, Content: r.Content, Source: r.Source}
	for _, p := range r.Parts {
		req.Parts = append(req.Parts, part{Part: p, Data: p.Data})
	}
	a, err := h.route(ctx, req)
	return a.MessageID, err
}

// Cancel cancels the session's running turn on the host that runs it and
// waits until it is idle there. A session open on no host is
// sessions.Closed, as it is for a local session that is not open.
func (h *Host) Cancel(ctx stdctx.Context, sessionID string) error {
	_, err := h.route(ctx, request{Op: opCancel, Session: sessionID, Actor: sessions.ActorOf(ctx)})
	return err
}

// CloseSession closes the session on the host that runs it (through
// Options.CloseLocal there). A session open on no host is already closed:
// nil, or sessions.NotFound when it was never stored.
func (h *Host) CloseSession(ctx stdctx.Context, sessionID string) error {
	_, err := h.route(ctx, request{Op: opClose, Session: sessionID, Actor: sessions.ActorOf(ctx)})
	return err
}

// route serves req here or sends it where the session runs.
func (h *Host) route(ctx stdctx.Context, req request) (answer, error) {
	if !session.ValidID(req.Session) {
		return answer{}, errs.New(sessions.NotFound, fmt.Sprintf("cluster: %q is not a session id (letters, digits, '.', '_' and '-'), so no host has it", req.Session))
	}
	var lost error
	for attempt := range claimAttempts {
		// A request forwarded by a view that lagged finds here a copy
		// this host's own view says is no longer its own: the lease is
		// renewed now to tell (leasecache.go).
		if ss, ok := h.o.Sessions.Get(req.Session); ok && !h.staleBy(ctx, ss, req.Hops > 0 && h.leaseView.disowns(req.Session, h.o.HostID)) {
			// Served here even once the host left the cluster: its own
			// sessions still run until the entry points close them.
			return h.local(ctx, ss, req, "")
		}
		h.mu.Lock()
		left := h.closed
		h.mu.Unlock()
		if left {
			return answer{}, errs.New(NoHost, fmt.Sprintf("cluster: host %q has left the cluster (it is shutting down); send the request to another host", h.o.HostID))
		}
		// The first hop's first try goes by the lease watch's view
		// (leasecache.go); every other reads the lease.
		lease, cached := natsplugin.LeaseRecord{}, false
		if req.Hops == 0 && attempt == 0 {
			lease, cached = h.leaseView.get(req.Session)
			cached = cached && lease.HostID != "" && lease.HostID != h.o.HostID
		}
		owned := cached
		if !cached {
			var err error
			if lease, owned, err = h.owner(ctx, req.Session); err != nil {
				return answer{}, err
			}
		}
		switch {
		case owned && lease.HostID == "":
			return answer{}, errs.New(OwnerUnreachable, fmt.Sprintf(
				"cluster: session %q is held by %s, which names no host id, so no request can reach it; give every dsh on stream %q a cluster host_id",
				req.Session, lease.Holder, h.o.Stream)).WithReason(ReasonUnnamed)
		case owned && lease.HostID != h.o.HostID:
			if req.Hops >= maxHops {
				return answer{}, errs.New(OwnerUnreachable, fmt.Sprintf(
					"cluster: session %q moved to host %q while this request was forwarded %d times; retry it (the request id makes that safe)",
					req.Session, lease.HostID, req.Hops)).WithReason(ReasonMoved)
			}
			sent := req
			sent.Viewed = cached
			a, err := h.forward(ctx, lease.HostID, sent)
			if cached && (errs.Has(err, OwnerUnreachable, ReasonNoResponders) || errs.Has(err, OwnerUnreachable, ReasonNotOwner)) {
				// The view named a host gone, or one the session left:
				// the lease says where to go.
				h.leaseView.forget(req.Session, lease.HostID)
				continue
			}
			return a, err
		case !owned:
			if done, a, err := h.unowned(ctx, req); done {
				return a, err
			}
			if req.Viewed && req.Hops == 1 {
				// Claimed where the request was sent, as without the view.
				return answer{}, errs.New(OwnerUnreachable, fmt.Sprintf(
					"cluster: host %q no longer owns session %q, and nobody does; the sender reads its lease", h.o.HostID, req.Session)).WithReason(ReasonNotOwner)
			}
		case !claimsFor(req.Op):
			// Leased to this host but not open in its controller (the
			// lease outlived a restart): answered as a session not open.
			return h.local(ctx, nil, req, "")
		}
		if !owned && !h.claims(req) {
			if req.Hops > 0 {
				return answer{}, errs.New(NoHost, fmt.Sprintf(
					"cluster: host %q was asked to claim session %q but claims no sessions (it has no session opener); give it one, or take it out of claim_group %q",
					h.o.HostID, req.Session, h.o.ClaimGroup))
			}
			return h.forwardClaim(ctx, req)
		}
		// Owned by nobody, or by this host without being open in the
		// controller (its lease outlived a restart): resume it here.
		o, err := h.claimOptions(req)
		if err != nil {
			return answer{}, err
		}
		ss, how, err := h.claimWith(ctx, req.Session, o)
		if err == nil {
			return h.local(ctx, ss, req, how)
		}
		if !errs.HasCode(err, session.SessionLocked) {
			return answer{}, err
		}
		// Another host won the claim: its lease says where to go now.
		lost = err
	}
	return answer{}, lost
}

// unowned answers req for a session whose lease nobody holds, when the
// session is not to be claimed for it; done is false when it is.
func (h *Host) unowned(ctx stdctx.Context, req request) (done bool, a answer, err error) {
	switch req.Op {
	case opEnsure:
		// Ensure opens the session here, creating it when allowed.
		return false, answer{}, nil
	case opPrompt, opCancel, opClose:
	default:
		// Open nowhere: this host's controller answers as it answers for
		// a session not open in it (the store for what it keeps).
		a, err := h.local(ctx, nil, req, "")
		return true, a, err
	}
	stored, err := h.stored(ctx, req.Session)
	switch {
	case err != nil:
		return true, answer{}, err
	case !stored:
		return true, answer{}, errs.New(sessions.NotFound, fmt.Sprintf(
			"cluster: no session %q is stored in stream %q; open one with that id first", req.Session, h.o.Stream))
	case req.Op == opClose:
		return true, answer{}, nil // open nowhere: closed already
	case req.Op == opCancel:
		return true, answer{}, errs.New(sessions.Closed, fmt.Sprintf(
			"cluster: session %q is open on no host of the cluster, so no turn of it runs; send a message to resume it", req.Session))
	}
	return false, answer{}, nil
}

// claims reports whether this host resumes an unowned session for req: a
// forwarded request was sent here to be claimed; one of this host's own
// callers is claimed here when the claim group allows it.
func (h *Host) claims(req request) bool {
	if h.o.Open == nil {
		return false
	}
	return req.Hops > 0 || h.o.ClaimGroup == "" || h.o.ClaimGroup == h.o.Group
}

// claiming is one resume of a session in flight on this host, which the
// other requests for the session wait for instead of racing it.
type claiming struct {
	done chan struct{}
	ss   *sessions.Session
	how  sessions.How
	err  error
}

// claim resumes session id in the local controller, as Options.Open says,
// once however many requests for it arrive together.
func (h *Host) claim(ctx stdctx.Context, id string) (*sessions.Session, error) {
	if h.o.Open == nil {
		return nil, errs.New(NoHost, fmt.Sprintf("cluster: session %q has a lease naming host %q but is not open in it, and the host has no session opener to resume it", id, h.o.HostID))
	}
	ss, _, err := h.claimWith(ctx, id, sessions.EnsureOptions{OpenOptions: h.o.Open(id), Mode: sessions.EnsureExisting})
	return ss, err
}

// claimWith opens session id here through the controller's Ensure with o;
// how says what the first of the requests that came together did (the
// others joined it).
func (h *Host) claimWith(ctx stdctx.Context, id string, o sessions.EnsureOptions) (*sessions.Session, sessions.How, error) {
	h.mu.Lock()
	c, running := h.inflight[id]
	if !running {
		c = &claiming{done: make(chan struct{})}
		h.inflight[id] = c
	}
	h.mu.Unlock()
	if running {
		select {
		case <-c.done:
			return c.ss, sessions.HowJoined, c.err
		case <-ctx.Done():
			return nil, "", stdctx.Cause(ctx)
		}
	}
	// The resume is every waiter's, not its first caller's: one client
	// going away must not fail the others. The host's own end (Close)
	// and a bound still stop it.
	rctx, cancel := stdctx.WithTimeout(h.ctx, h.o.LeaseTTL+h.o.ConnectTimeout)
	c.ss, c.how, c.err = h.resume(rctx, id, o, true)
	cancel()
	h.mu.Lock()
	delete(h.inflight, id)
	h.mu.Unlock()
	close(c.done)
	return c.ss, c.how, c.err
}

// resume opens session id through the controller's Ensure, which joins an
// open of it in flight here (the API's resume) rather than racing it. A
// session it resumed or created is handed to Options.Claimed and given
// the prompts its previous owner queued. A copy it joined may be this
// host's own from before a stall past its lease: that copy holds no lease
// and is not taken for resumed; it is closed (staleBy) and, when again,
// the session ensured once more, which takes the lease or finds its new
// owner.
func (h *Host) resume(ctx stdctx.Context, id string, o sessions.EnsureOptions, again bool) (*sessions.Session, sessions.How, error) {
	o.SessionID, o.KeepRunning = id, true
	in, err := h.o.Sessions.Ensure(ctx, o)
	if err != nil {
		return nil, "", err
	}
	ss, ok := h.o.Sessions.Get(id)
	if !ok {
		return nil, "", errs.New(sessions.Closed, fmt.Sprintf(
			"cluster: session %q closed on host %q as it was opened for a request; retry it (the request id makes that safe)", id, h.o.HostID))
	}
	if in.How == sessions.HowJoined {
		if !h.staleBy(ctx, ss, true) {
			return ss, in.How, nil
		}
		if !again {
			return nil, "", errs.New(session.SessionLocked, fmt.Sprintf(
				"cluster: session %q lost its lease on host %q twice while it was resumed; retry the request", id, h.o.HostID)).WithReason(session.ReasonFenced)
		}
		return h.resume(ctx, id, o, false)
	}
	if h.o.Claimed != nil {
		if cerr := h.o.Claimed(ss); cerr != nil {
			return nil, "", errors.Join(cerr, ss.Close(stdctx.WithoutCancel(ctx)))
		}
	}
	h.redeliver(ctx, ss)
	return ss, in.How, nil
}

// local serves req through this host's controller: ss is the session
// open here (nil for the ops that name it by id), claimed what a claim
// for this request did.
func (h *Host) local(ctx stdctx.Context, ss *sessions.Session, req request, claimed sessions.How) (answer, error) {
	if req.Actor != "" && sessions.ActorOf(ctx) == "" {
		ctx = sessions.WithActor(ctx, req.Actor)
	}
	switch req.Op {
	case opPrompt:
	case opCancel:
		return answer{}, ss.Cancel(ctx)
	case opClose:
		cctx, cancel := stdctx.WithTimeout(ctx, h.o.LeaseTTL+h.o.ConnectTimeout)
		defer cancel()
		return answer{}, h.closeLocal(cctx, ss)
	default:
		return h.op(ctx, req, claimed)
	}
	pr := sessions.PromptRequest{RequestID: req.RequestID, Content: req.Content, Source: req.Source}
	for _, p := range req.Parts {
		q := p.Part
		q.Data = p.Data
		pr.Parts = append(pr.Parts, q)
	}
	var id string
	var err error
	if req.Mode == sessions.ModeSteer {
		id, err = ss.Steer(ctx, pr)
	} else {
		id, err = ss.Prompt(ctx, pr)
	}
	if err == nil {
		h.enqueue(ctx, ss, req)
	}
	return answer{MessageID: id}, err
}

// closeLocal closes a session open here as the entry point closes one.
func (h *Host) closeLocal(ctx stdctx.Context, ss *sessions.Session) error {
	if h.o.CloseLocal != nil {
		return h.o.CloseLocal(ctx, ss)
	}
	return ss.Close(ctx)
}

// stale reports whether ss, open here, is no longer this host's: its
// lease ran out (this host stalled past lease_ttl) and another host may
// run the session now. The copy here is closed — its last events cannot be
// written, the writer being fenced — and the request goes by the lease.
func (h *Host) stale(ctx stdctx.Context, ss *sessions.Session) bool {
	return h.staleBy(ctx, ss, false)
}

// rechecker is session.nats's writer: it can renew its lease now rather
// than trust a recent renewal.
type rechecker interface {
	Recheck(ctx stdctx.Context) error
}

// staleBy is stale; with now, the lease is renewed whatever its last
// renewal, for a host that saw another take the session.
func (h *Host) staleBy(ctx stdctx.Context, ss *sessions.Session, now bool) bool {
	hl, ok := ss.Log().Lease().(session.Holder)
	if !ok {
		return false
	}
	var err error
	if rc, ok := hl.(rechecker); ok && now {
		err = rc.Recheck(ctx)
	} else {
		err = hl.Hold(ctx)
	}
	if !errs.Has(err, session.SessionLocked, session.ReasonFenced) {
		return false
	}
	h.log.Warn("cluster: a session open here lost its lease to another host; closing this copy", "session", ss.ID())
	cctx, cancel := stdctx.WithTimeout(stdctx.WithoutCancel(ctx), h.o.LeaseTTL+h.o.ConnectTimeout)
	defer cancel()
	if cerr := h.closeLocal(cctx, ss); cerr != nil && !errs.HasCode(cerr, session.SessionLocked) {
		h.log.Warn("cluster: closing a session whose lease was lost", "session", ss.ID(), "error", cerr)
	}
	return true
}

// stored reports whether session id has a log in the stream.
func (h *Host) stored(ctx stdctx.Context, id string) (bool, error) {
	tctx, cancel := stdctx.WithTimeout(ctx, h.o.ConnectTimeout)
	defer cancel()
	_, err := h.stream.GetLastMsgForSubject(tctx, natsplugin.Subject(h.o.SubjectPrefix, id))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	if err != nil {
		return false, errs.Wrap(Unreachable, err, fmt.Sprintf("cluster: cannot read the log of session %q in stream %q on %s", id, h.o.Stream, h.o.URL))
	}
	return true, nil
}

// owner reads the lease of session id: who owns it, if anyone.
func (h *Host) owner(ctx stdctx.Context, id string) (natsplugin.LeaseRecord, bool, error) {
	tctx, cancel := stdctx.WithTimeout(ctx, h.o.ConnectTimeout)
	defer cancel()
	e, err := h.leases.Get(tctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return natsplugin.LeaseRecord{}, false, nil
	}
	if err != nil {
		return natsplugin.LeaseRecord{}, false, errs.Wrap(Unreachable, err, fmt.Sprintf(
			"cluster: cannot read the lease of session %q in bucket %q on %s; check that the NATS server is up",
			id, natsplugin.LeaseBucket(h.o.Stream), h.o.URL))
	}
	var rec natsplugin.LeaseRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		rec = natsplugin.LeaseRecord{Holder: fmt.Sprintf("an entry that is not a lease record (%v)", err)}
	}
	return rec, true, nil
}

// forwardClaim hands an unowned session to a live host of the claim group
// (any host when there is none), trying the next one while a host turns
// out to be gone.
func (h *Host) forwardClaim(ctx stdctx.Context, req request) (answer, error) {
	hosts, err := h.liveHosts(ctx)
	if err != nil {
		return answer{}, err
	}
	var gone []error
	for _, r := range hosts {
		if r.HostID == h.o.HostID || (h.o.ClaimGroup != "" && r.Group != h.o.ClaimGroup) {
			continue
		}
		id, err := h.forward(ctx, r.HostID, req)
		if errs.Has(err, OwnerUnreachable, ReasonNoResponders) {
			gone = append(gone, err)
			continue
		}
		return id, err
	}
	who := "no other live host claims sessions"
	if h.o.ClaimGroup != "" {
		who = fmt.Sprintf("no live host of claim_group %q answers", h.o.ClaimGroup)
	}
	return answer{}, errs.Wrap(NoHost, errors.Join(gone...), fmt.Sprintf(
		"cluster: nobody owns session %q and %s (presence bucket %q); start one, or set this host's group to claim it here",
		req.Session, who, HostBucket(h.o.Stream)))
}

// liveHosts reads the presence bucket, in random order so claims spread.
func (h *Host) liveHosts(ctx stdctx.Context) ([]HostRecord, error) {
	tctx, cancel := stdctx.WithTimeout(ctx, h.o.ConnectTimeout)
	defer cancel()
	keys, err := h.hosts.Keys(tctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, errs.Wrap(Unreachable, err, fmt.Sprintf("cluster: cannot list the live hosts in bucket %q on %s", HostBucket(h.o.Stream), h.o.URL))
	}
	var out []HostRecord
	for _, k := range keys {
		e, err := h.hosts.Get(tctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // left meanwhile
		}
		if err != nil {
			return nil, errs.Wrap(Unreachable, err, fmt.Sprintf("cluster: cannot read the presence record of host %q on %s", k, h.o.URL))
		}
		var r HostRecord
		if json.Unmarshal(e.Value(), &r) == nil && r.HostID != "" {
			out = append(out, r)
		}
	}
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out, nil
}

// forward sends req to host target and waits for its final answer. The
// target says it is still working every third of RequestTimeout; a
// silence longer than RequestTimeout means the target is gone.
func (h *Host) forward(ctx stdctx.Context, target string, req request) (a answer, err error) {
	var header nats.Header
	if telemetry.Enabled() {
		var span trace.Span
		ctx, span, header = h.startForward(ctx, target, req)
		defer func() { telemetry.End(span, err) }()
	}
	req.Hops++
	req.From = h.o.HostID
	data, err := json.Marshal(req)
	if err != nil {
		return answer{}, errs.Wrap(errs.Internal, err, "cluster: cannot encode a forwarded request")
	}
	if limit := h.nc.MaxPayload(); int64(len(data)) > limit {
		attached := 0
		for _, p := range req.Parts {
			attached += len(p.Data)
		}
		return answer{}, errs.New(PayloadTooLarge, fmt.Sprintf(
			"cluster: the message for session %q must be forwarded to host %q, and with its %d bytes of attachments it makes a %d-byte NATS message, over the server's max_payload of %d bytes; send smaller attachments, or raise max_payload in the NATS server's config (at most 64MB)",
			req.Session, target, attached, len(data), limit))
	}
	subject := RouteSubject(h.o.Stream, target)
	inbox, answers, done := h.replies.await()
	defer done()
	if err := h.nc.PublishMsg(&nats.Msg{Subject: subject, Reply: inbox, Data: data, Header: header}); err != nil {
		return answer{}, h.connFailed(err, target)
	}
	silence := time.NewTimer(h.o.RequestTimeout)
	defer silence.Stop()
	for {
		select {
		case <-ctx.Done():
			return answer{}, stdctx.Cause(ctx)
		case <-silence.C:
			return answer{}, errs.New(OwnerUnreachable, fmt.Sprintf(
				"cluster: host %q took the %s for session %q but said nothing for %s; if it died, its lease expires within lease_ttl (%s) and another host then claims the session — retry with the same request id",
				target, req.Op, req.Session, h.o.RequestTimeout, h.o.LeaseTTL)).WithReason(ReasonTimeout)
		case m := <-answers:
			if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
				return answer{}, errs.New(OwnerUnreachable, fmt.Sprintf(
					"cluster: host %q, which owns session %q, does not take requests (it left the cluster or stopped); its lease expires within lease_ttl (%s) if it died, and another host then claims the session — retry with the same request id",
					target, req.Session, h.o.LeaseTTL)).WithReason(ReasonNoResponders)
			}
			var r reply
			if err := json.Unmarshal(m.Data, &r); err != nil {
				return answer{}, errs.Wrap(errs.Internal, err, fmt.Sprintf("cluster: host %q answered a forwarded request with something that is not a reply; do all hosts run the same dsh version?", target))
			}
			if r.Working {
				silence.Reset(h.o.RequestTimeout)
				continue
			}
			if len(r.Error) > 0 {
				rerr, derr := errs.Decode(r.Error)
				if derr != nil {
					return answer{}, errs.Wrap(errs.Internal, derr, fmt.Sprintf("cluster: host %q answered with an error that cannot be decoded", target))
				}
				return answer{}, rerr
			}
			return r.answer, nil
		}
	}
}

func (h *Host) connFailed(err error, target string) error {
	return errs.Wrap(Unreachable, err, fmt.Sprintf("cluster: cannot send a request to host %q over %s; check that the NATS server is up", target, h.o.URL))
}

// take starts serving a forwarded request; the subscription's own
// goroutine must not wait for an admission that holds.
func (h *Host) take(m *nats.Msg) {
	if m.Reply == "" {
		return
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		// Taken before the subscription ended: say at once that this host
		// is gone, as no subscriber would have, rather than let the sender
		// wait out its timeout.
		h.answer(m, answer{}, errs.New(OwnerUnreachable, fmt.Sprintf(
			"cluster: host %q is leaving the cluster and takes no more requests; retry with the same request id", h.o.HostID)).WithReason(ReasonNoResponders))
		return
	}
	h.work.Add(1)
	h.mu.Unlock()
	go func() {
		defer h.work.Done()
		h.serve(m)
	}()
}

// serve answers one forwarded request: every third of RequestTimeout that
// it still works on it, then the outcome. Most requests are answered well
// within the first third, with one message; the sender's silence limit is
// the whole RequestTimeout.
func (h *Host) serve(m *nats.Msg) {
	var req request
	if err := json.Unmarshal(m.Data, &req); err != nil || req.Hops < 1 {
		h.answer(m, answer{}, errs.New(errs.InvalidArgument, fmt.Sprintf("cluster: host %q got a request on %s it cannot read; do all hosts run the same dsh version?", h.o.HostID, m.Subject)))
		return
	}
	// A timer rather than a goroutine with a ticker: a request answered
	// within the first third costs neither. finished, under mu, keeps a
	// "working" from following the outcome.
	var (
		mu       sync.Mutex
		finished bool
		beat     *time.Timer
	)
	mu.Lock()
	beat = time.AfterFunc(h.o.RequestTimeout/3, func() {
		mu.Lock()
		defer mu.Unlock()
		if !finished {
			h.respond(m, reply{Working: true})
			beat.Reset(h.o.RequestTimeout / 3)
		}
	})
	mu.Unlock()
	ctx, span := h.startServe(m, req)
	a, err := h.route(ctx, req)
	telemetry.End(span, err)
	mu.Lock()
	finished = true
	beat.Stop()
	mu.Unlock()
	if err != nil {
		telemetry.Logger(ctx, h.log).Debug("cluster: a forwarded request failed", "from", req.From, "session", req.Session, "op", req.Op, "error", err)
	}
	h.answer(m, a, err)
}

func (h *Host) answer(m *nats.Msg, a answer, err error) {
	r := reply{answer: a}
	if err != nil {
		b, eerr := errs.Encode(err)
		if eerr != nil {
			b, _ = errs.Encode(errs.New(errs.Internal, fmt.Sprintf("cluster: host %q failed the request and cannot encode why: %v (the error was %s)", h.o.HostID, eerr, err)))
		}
		r.Error = b
	}
	h.respond(m, r)
}

func (h *Host) respond(m *nats.Msg, r reply) {
	b, _ := json.Marshal(r)
	if err := m.Respond(b); err != nil {
		h.log.Warn("cluster: cannot answer a forwarded request", "subject", m.Subject, "error", err)
	}
}
