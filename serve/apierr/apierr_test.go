package apierr_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/serve/apierr"
	"github.com/dsh-go/dsh/services/session"
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
