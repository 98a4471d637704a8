package sessions

import (
	stdctx "context"
	"errors"
	"fmt"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
)

// prepareParts is the Prepare of a prompt with parts: it stores them when
// the delivery heads the agent's chain — after earlier deliveries settled,
// so a release of theirs cannot race it — and hands the controller the
// references and the release it calls when the message stays out.
func (s *Session) prepareParts(r PromptRequest) func(stdctx.Context) (agentcontroller.Prepared, error) {
	return func(stdctx.Context) (agentcontroller.Prepared, error) {
		store, err := s.attachments()
		if err != nil {
			return agentcontroller.Prepared{}, err
		}
		parts := r.Parts
		if r.Content != "" {
			parts = append([]llm.Part{{Type: llm.PartText, Text: r.Content}}, parts...)
		}
		stored, release, err := store.Admit(s.id, parts)
		if err != nil {
			// The store's message says which part, which limit and how to
			// fix it; entry points show only the outer one.
			why := err.Error()
			if e, ok := errors.AsType[*errs.Error](err); ok {
				why = e.Message
			}
			return agentcontroller.Prepared{}, errs.Wrap(errs.CodeOf(err), err, fmt.Sprintf("session %q: the prompt's attachments were refused: %s", s.id, why))
		}
		return agentcontroller.Prepared{Content: llm.TextOf(stored), Parts: stored, Release: release}, nil
	}
}

// attachments is the store of the session's prompts: the controller's,
// or the service in the agent's scope.
func (s *Session) attachments() (*attachments.Store, error) {
	if s.c.attach != nil {
		return s.c.attach, nil
	}
	store, err := attachments.Key.Get(s.handle.Agent.Context())
	if err != nil {
		return nil, errs.Wrap(errs.ServiceUnavailable, err, fmt.Sprintf(
			"session %q cannot take attachments: no attachments service is mounted; send text only, or mount attachments.Plugin", s.id))
	}
	return store, nil
}

// releaseAttachments drops a deleted session's references.
func (c *Controller) releaseAttachments(id string) error {
	if c.attach == nil {
		return nil
	}
	if err := c.attach.ReleaseSession(id); err != nil {
		return errs.Wrap(errs.CodeOf(err), err, fmt.Sprintf("session %q was deleted but its attachments were not all released; the next start collects what is left", id))
	}
	return nil
}

// storeOrNil is the attachments store the session uses, nil when none.
func (s *Session) storeOrNil() *attachments.Store {
	if s.c.attach != nil {
		return s.c.attach
	}
	store, _ := attachments.Key.Get(s.handle.Agent.Context())
	return store
}

// releaseUnpersisted drops the attachments of a closed session kept in
// memory: nothing can resume it, so nothing will read them again. A
// persisted session keeps them (its log names them); the store only
// forgets the session's live holds.
func releaseUnpersisted(store *attachments.Store, id string) error {
	switch {
	case store == nil:
		return nil
	case store.Persistent():
		store.Forget(id)
		return nil
	}
	return store.ReleaseSession(id)
}

// Attachment returns the part of session id's log that names ref, with its
// bytes; see Service.Attachment.
func (c *Controller) Attachment(ctx stdctx.Context, id, ref string) (llm.Part, []byte, error) {
	events, err := c.History(ctx, id, 0)
	if err != nil {
		return llm.Part{}, nil, err
	}
	p, ok := partOf(events, ref)
	if !ok {
		return llm.Part{}, nil, errs.New(attachments.NotFound, fmt.Sprintf("session %q has no attachment %s; its events list its parts with their refs", id, ref))
	}
	store := c.attach
	if store == nil {
		if s, open := c.Get(id); open {
			store = s.storeOrNil()
		}
	}
	if store == nil {
		return llm.Part{}, nil, errs.New(attachments.NotFound, fmt.Sprintf("session %q: no attachments store holds %s; give the controller one (Options.Attachments)", id, ref))
	}
	data, err := store.Get(ref)
	if err != nil {
		return llm.Part{}, nil, err
	}
	return p, data, nil
}

// partOf finds the part of the log that names ref.
func partOf(events []session.Event, ref string) (llm.Part, bool) {
	for _, ev := range events {
		if ev.Message == nil {
			continue
		}
		for _, p := range ev.Message.Parts {
			if p.Ref == ref {
				return p, true
			}
		}
	}
	return llm.Part{}, false
}
