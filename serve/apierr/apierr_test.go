package apierr_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/dsh-go/dsh/cluster"
	"github.com/dsh-go/dsh/errs"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/serve/apierr"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

func TestFrom(t *testing.T) {
	own := errs.Code("MY_OWN")
	for _, c := range []struct {
		name   string
		err    error
		status int
		code   errs.Code
		msg    string
	}{
		{"a service's code", errs.New(session.SessionLocked, "held by pid 7"), 409, session.SessionLocked, "held by pid 7"},
		{"the caller's code", errs.New(own, "mine"), 418, own, "mine"},
		{"unknown code", errs.New("WHAT", "x"), 500, "WHAT", "x"},
		{"no code", errors.New("plain"), 500, errs.Internal, "plain"},
		{"a foreign cause is kept", errs.Wrap(errs.InvalidArgument, fmt.Errorf("line 3: bad"), "the template failed"), 400, errs.InvalidArgument, "the template failed: line 3: bad"},
		{"one of ours is summarized", errs.Wrap(errs.InvalidArgument, errs.New("INNER", "inner"), "outer"), 400, errs.InvalidArgument, "outer"},
		{"a body as is", apierr.New(401, "SERVE_UNAUTHORIZED", "no token"), 401, "SERVE_UNAUTHORIZED", "no token"},
		{"no host for now", errs.New(cluster.NoHost, "no host"), 503, cluster.NoHost, "no host"},
		{"owner away", errs.New(cluster.OwnerUnreachable, "away"), 503, cluster.OwnerUnreachable, "away"},
		{"store away", errs.New(natsplugin.Unreachable, "down"), 503, natsplugin.Unreachable, "down"},
		{"locked by a host taking it over", errs.New(session.SessionLocked, "held by b").WithReason(session.ReasonOtherProcess), 503, session.SessionLocked, "held by b"},
		{"fenced while it moved", errs.New(session.SessionLocked, "lost").WithReason(session.ReasonFenced), 503, session.SessionLocked, "lost"},
		{"open here is a conflict", errs.New(session.SessionLocked, "open").WithReason(sessions.ReasonOpenHere), 409, session.SessionLocked, "open"},
		{"a shared attachments store away", errs.New(attachments.StoreFailed, "away").WithReason(attachments.ReasonUnreachable), 503, attachments.StoreFailed, "away"},
		{"an attachments directory that fails", errs.New(attachments.StoreFailed, "disk"), 500, attachments.StoreFailed, "disk"},
		{"an attachment over its limit", errs.New(attachments.TooLarge, "big"), 413, attachments.TooLarge, "big"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := apierr.From(c.err, map[errs.Code]int{own: 418})
			if b.Status != c.status || b.Code != c.code || b.Message != c.msg {
				t.Fatalf("From = %d %s %q; want %d %s %q", b.Status, b.Code, b.Message, c.status, c.code, c.msg)
			}
		})
	}
}

func TestWriteFillsTheRequestID(t *testing.T) {
	rec := httptest.NewRecorder()
	orig := apierr.New(http.StatusConflict, session.SessionLocked, "held")
	apierr.Write(rec, orig, nil, "req-1")
	var b apierr.Body
	if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || rec.Code != 409 || b.RequestID != "req-1" || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("%d %q %v: %s", rec.Code, rec.Header().Get("Content-Type"), err, rec.Body)
	}
	if orig.RequestID != "" {
		t.Fatal("Write changed the caller's body")
	}
}

// A 503, and only a 503, says when to retry.
func TestWriteSaysWhenToRetryA503(t *testing.T) {
	for _, c := range []struct {
		err   error
		retry bool
	}{
		{errs.New(cluster.NoHost, "no host"), true},
		{errs.New(session.SessionLocked, "moving").WithReason(session.ReasonOtherProcess), true},
		{apierr.New(http.StatusServiceUnavailable, apierr.ShuttingDown, "stopping"), true},
		{errs.New(session.SessionLocked, "open here").WithReason(sessions.ReasonOpenHere), false},
		{errors.New("plain"), false},
	} {
		rec := httptest.NewRecorder()
		b := apierr.Write(rec, c.err, nil, "")
		if got := rec.Header().Get("Retry-After") != ""; got != c.retry || (b.Status == 503) != c.retry {
			t.Errorf("%v: status %d, Retry-After %q; want a retry: %v", c.err, rec.Code, rec.Header().Get("Retry-After"), c.retry)
		}
	}
}
