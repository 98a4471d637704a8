// Package nats is the session.nats plugin: it keeps every agent's session
// log in a NATS JetStream stream, so several dsh hosts can share sessions
// and a session outlives the host that wrote it.
//
// Each session's log is the subject <subject_prefix>.<session id> of one
// stream, one event per message, in order. An append publishes with the
// subject's expected last sequence, so two writers can never interleave:
// the one that loses the race is refused with session.SessionLocked,
// reason session/fenced, the code the local lock of session.jsonl uses.
// Who writes a session is decided first by a lease, an entry of a
// JetStream key-value bucket created only if absent, renewed while held and
// expiring when its holder dies.
//
// Like session.jsonl, events are buffered as they are appended and
// published at the agent loop's session/flush checkpoints (the prompt,
// each tool call's start, each step's end, the turn's end); the publish
// acks are the durability point, so a step that ended is stored (and
// replicated, with replicas > 1) before the next begins.
//
// Beside the stream: the lease bucket (<stream>_LEASES), the index bucket
// (<stream>_INDEX, one entry per session, for List and Find) and the
// catalog stream (<stream>_CATALOG, the sessions in the order they were
// last written, with open markers, for ListPage: pages.go).
package nats

import (
	stdctx "context"
	"errors"
	"fmt"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/internal/lazyregexp"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/waterfall"
)

// Config is the plugin's configuration.
type Config struct {
	// URL is the NATS server, or a comma-separated list of a cluster's
	// servers.
	URL string `koanf:"url" json:"url"`
	// CredentialsFile is a NATS .creds file (user JWT and nkey seed);
	// empty for a server without authentication.
	CredentialsFile string `koanf:"credentials_file" json:"credentials_file,omitempty"`
	// Stream is the JetStream stream holding every session's log; it is
	// created, or its config updated, at start.
	Stream string `koanf:"stream" json:"stream"`
	// SubjectPrefix: session S is logged on subject <SubjectPrefix>.S.
	SubjectPrefix string `koanf:"subject_prefix" json:"subject_prefix"`
	// Replicas is how many servers keep each message (1, 3 or 5).
	Replicas int `koanf:"replicas" json:"replicas"`
	// ConnectTimeout bounds connecting and every JetStream request.
	ConnectTimeout time.Duration `koanf:"connect_timeout" json:"connect_timeout,omitempty"`
	// LeaseTTL is how long a session stays owned by a host that stopped
	// renewing its lease (it died); a live holder renews it every third of
	// it.
	LeaseTTL time.Duration `koanf:"lease_ttl" json:"lease_ttl,omitempty"`
	// HostID names this host in the leases it takes, so the hosts of a
	// cluster can find the owner of a session; empty outside a cluster.
	HostID string `koanf:"host_id" json:"host_id,omitempty"`
}

// Defaults name a local server and the shared stream.
func (Config) Defaults() Config {
	return Config{
		URL:            "nats://127.0.0.1:4222",
		Stream:         "DSH_SESSIONS",
		SubjectPrefix:  "dsh.sessions",
		Replicas:       1,
		ConnectTimeout: 5 * time.Second,
		LeaseTTL:       30 * time.Second,
	}
}

var (
	token   = lazyregexp.New(`^[A-Za-z0-9_-]+$`)
	subject = lazyregexp.New(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)
)

// ValidToken reports whether s may be one token of a NATS subject, a key
// of a key-value bucket and a stream's name: letters, digits, '_' and
// '-'. Host ids and stream names must be.
func ValidToken(s string) bool { return token.MatchString(s) }

// Validate checks the config before anything starts.
func (c Config) Validate() error {
	switch {
	case c.URL == "":
		return errors.New("url is empty; name the NATS server, e.g. nats://127.0.0.1:4222")
	case !ValidToken(c.Stream):
		return fmt.Errorf("stream %q is not a JetStream stream name; use letters, digits, '_' and '-'", c.Stream)
	case !subject.MatchString(c.SubjectPrefix):
		return fmt.Errorf("subject_prefix %q is not a NATS subject; use dot-separated tokens of letters, digits, '_' and '-', without wildcards", c.SubjectPrefix)
	case c.Replicas != 1 && c.Replicas != 3 && c.Replicas != 5:
		return fmt.Errorf("replicas is %d; JetStream keeps 1, 3 or 5 copies", c.Replicas)
	case c.ConnectTimeout <= 0:
		return errors.New("connect_timeout must be positive, e.g. 5s")
	case c.LeaseTTL < time.Second:
		return fmt.Errorf("lease_ttl is %s; use at least 1s, e.g. 30s", c.LeaseTTL)
	case c.HostID != "" && !ValidToken(c.HostID):
		return fmt.Errorf("host_id %q cannot name a NATS subject token; use letters, digits, '_' and '-'", c.HostID)
	}
	return nil
}

// Plugin writes the sessions of every agent it hears and serves them back
// for resuming.
var Plugin = plugin.Register("session.nats", "keeps session logs in a NATS JetStream stream, so hosts can share and resume them", func(ctx *dshctx.Context, cfg Config) error {
	store, err := session.Key.Get(ctx)
	if err != nil {
		return err
	}
	b, err := connect(ctx.Logger(), cfg)
	if err != nil {
		return err
	}
	if _, err := ctx.OnDispose("close the NATS session store", b.close); err != nil {
		b.close()
		return err
	}
	// Only a root instance serves resumes, as with session.jsonl: an agent
	// resumes before its scope, and the presets in it, exist.
	if ctx.Tag() == "" {
		if err := store.SetBackend(ctx, b); err != nil {
			return err
		}
	}
	if _, err := session.EventAppended.On(ctx, func(_ stdctx.Context, a session.Appended) error {
		b.writerFor(a.Session).add(a.Session.AgentID(), a.Session.Tenant(), a.Event)
		return nil
	}); err != nil {
		return err
	}
	_, err = session.EventFlush.On(ctx, func(c stdctx.Context, f session.Flush, next waterfall.Next[session.Flush, struct{}]) (struct{}, error) {
		if err := b.writerFor(f.Session).write(c, f.Seq); err != nil {
			return struct{}{}, err
		}
		return next.Call(c, f)
	})
	return err
}, session.Key).StoresSessions()
