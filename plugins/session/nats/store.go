package nats

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
	"github.com/hashicorp/go-hclog"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Unreachable: the NATS server cannot be reached, or JetStream refused to
// set up or serve the session store.
const Unreachable errs.Code = "SESSION_NATS_UNREACHABLE"

// agentHeader names, on every message, the agent that wrote it: a listing
// reads it from the first message of a log.
const agentHeader = "Dsh-Agent"

// OpenHeader marks the first message of a session's log, its open record:
// it holds no event, and makes the session exist in the stream from its
// open, so that another host can resume a session that was opened and
// never prompted. Readers of the stream skip it (IsOpenRecord).
const OpenHeader = "Dsh-Open"

// IsOpenRecord reports whether a message with header h is a session's
// open record rather than an event.
func IsOpenRecord(h natsgo.Header) bool { return h.Get(OpenHeader) != "" }

// store is the plugin's state: the connection, the stream of logs, the
// lease bucket and the writers of the sessions it holds.
type store struct {
	cfg    Config
	log    hclog.Logger
	nc     *natsgo.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	leases jetstream.KeyValue
	holder string // who this process is, as a lease names it

	// writers are the sessions this process holds, and those it adopted
	// (opened without its lease; they lock on first use).
	writers session.Writers[*writer]
}

var (
	_ session.Locker  = (*store)(nil)
	_ session.Lister  = (*store)(nil)
	_ session.Deleter = (*store)(nil)
)

// connect reaches the server and makes sure the stream and the lease
// bucket exist with this config.
func connect(log hclog.Logger, cfg Config) (*store, error) {
	opts := []natsgo.Option{natsgo.Name("dsh session.nats"), natsgo.Timeout(cfg.ConnectTimeout)}
	if cfg.CredentialsFile != "" {
		opts = append(opts, natsgo.UserCredentials(cfg.CredentialsFile))
	}
	nc, err := natsgo.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, errs.Wrap(Unreachable, err, fmt.Sprintf(
			"session.nats: cannot connect to the NATS server at %s; start it (nats-server -js) or fix url/credentials_file in the plugin's config", cfg.URL))
	}
	s := &store{cfg: cfg, log: log, nc: nc, holder: holderName(cfg.HostID)}
	if err := s.setUp(); err != nil {
		nc.Close()
		return nil, err
	}
	return s, nil
}

func (s *store) setUp() error {
	var err error
	if s.js, err = jetstream.New(s.nc); err != nil {
		return errs.Wrap(Unreachable, err, "session.nats: cannot use JetStream on "+s.cfg.URL)
	}
	ctx, cancel := s.timeout(stdctx.Background())
	defer cancel()
	s.stream, err = s.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        s.cfg.Stream,
		Description: "dsh session logs, one subject per session",
		Subjects:    []string{s.cfg.SubjectPrefix + ".>"},
		Storage:     jetstream.FileStorage,
		Replicas:    s.cfg.Replicas,
		// Reads go to the stream's leader. A direct get may be answered by
		// a replica that has not applied the last acked append yet, and a
		// log end read there is stale: a host taking a session over would
		// be fenced on its first write, and a load could miss the last turn.
		AllowDirect: false,
	})
	if err != nil {
		return errs.Wrap(Unreachable, err, fmt.Sprintf(
			"session.nats: cannot create or update the stream %q on %s; is JetStream enabled on the server (nats-server -js), and does the stream's config conflict with another one?", s.cfg.Stream, s.cfg.URL))
	}
	s.leases, err = s.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      LeaseBucket(s.cfg.Stream),
		Description: "dsh session leases: who writes each session",
		TTL:         s.cfg.LeaseTTL,
		// An expired lease leaves a marker, so a cluster's hosts see a
		// host die (cluster/adopt.go) apart from a release.
		LimitMarkerTTL: s.cfg.LeaseTTL,
		Replicas:       s.cfg.Replicas,
		Storage:        jetstream.FileStorage,
	})
	if err != nil {
		return errs.Wrap(Unreachable, err, fmt.Sprintf(
			"session.nats: cannot create or update the lease bucket %q on %s", LeaseBucket(s.cfg.Stream), s.cfg.URL))
	}
	return nil
}

func (s *store) timeout(ctx stdctx.Context) (stdctx.Context, stdctx.CancelFunc) {
	return stdctx.WithTimeout(ctx, s.cfg.ConnectTimeout)
}

func (s *store) subject(sessionID string) (string, error) {
	if !session.ValidID(sessionID) {
		return "", errs.New(errs.InvalidArgument, fmt.Sprintf(
			"session.nats: session id %q cannot name a subject; use letters, digits, '.', '_' and '-', starting with a letter or digit", sessionID))
	}
	return Subject(s.cfg.SubjectPrefix, sessionID), nil
}

// Subject is the subject of session sessionID's log under prefix; the id
// should be valid (session.ValidID). Exported so that readers of the
// stream, like a cluster's followers, name the log as its writer does.
func Subject(prefix, sessionID string) string {
	// A '.' separates subject tokens; the id's dots stay in one token.
	return prefix + "." + strings.ReplaceAll(sessionID, ".", "%2E")
}

// lastSeq is the stream sequence of the last message on subject, 0 when
// there is none.
func (s *store) lastSeq(ctx stdctx.Context, subject string) (uint64, error) {
	m, err := s.stream.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, s.failed(err, "read the end of "+subject)
	}
	return m.Sequence, nil
}

func (s *store) failed(err error, what string) error {
	return errs.Wrap(Unreachable, err, fmt.Sprintf("session.nats: cannot %s in stream %q on %s; check that the server is up and JetStream is enabled", what, s.cfg.Stream, s.cfg.URL))
}

// Load reads a session's log back in order. Messages are whole or absent,
// so there is no cut line to repair; a log that ends inside a turn is
// closed by the sessions service on resume.
func (s *store) Load(ctx stdctx.Context, sessionID string) ([]session.Event, error) {
	events, _, err := s.read(ctx, sessionID)
	return events, err
}

// read returns the log and the agent named by its first message.
func (s *store) read(ctx stdctx.Context, sessionID string) ([]session.Event, string, error) {
	subject, err := s.subject(sessionID)
	if err != nil {
		return nil, "", err
	}
	ctx, cancel := s.timeout(ctx)
	defer cancel()
	last, err := s.lastSeq(ctx, subject)
	if err != nil {
		return nil, "", err
	}
	if last == 0 {
		return nil, "", s.notFound(sessionID)
	}
	var events []session.Event
	var agent string
	for next := uint64(1); next <= last; {
		m, err := s.stream.GetMsg(ctx, next, jetstream.WithGetMsgSubject(subject))
		if err != nil {
			return nil, "", s.failed(err, fmt.Sprintf("read session %q", sessionID))
		}
		next = m.Sequence + 1
		if IsOpenRecord(m.Header) {
			continue
		}
		var e session.Event
		jerr := json.Unmarshal(m.Data, &e)
		if jerr == nil && e.Seq == 0 {
			jerr = errors.New("it has no seq")
		}
		if jerr != nil {
			return nil, "", errs.New(session.BadLog, fmt.Sprintf("session.nats: message %d of %s is not a session event: %v; purge the session with `dsh sessions delete %s`", m.Sequence, subject, jerr, sessionID))
		}
		if !e.Type.Known() {
			return nil, "", errs.New(session.BadLog, fmt.Sprintf(
				"session.nats: message %d of %s has the unknown event type %q; it was written by another version of dsh, and skipping it could drop a message", m.Sequence, subject, e.Type))
		}
		if want := int64(len(events)) + 1; e.Seq != want {
			return nil, "", errs.New(session.BadLog, fmt.Sprintf(
				"session.nats: message %d of %s is event %d where %d was expected; the log lost or repeats events", m.Sequence, subject, e.Seq, want))
		}
		if len(events) == 0 {
			agent = m.Header.Get(agentHeader)
		}
		events = append(events, e)
	}
	return events, agent, nil
}

func (s *store) notFound(sessionID string) error {
	return errs.New(session.NotFound, fmt.Sprintf("session.nats: no session %q in stream %q on %s; `dsh sessions list` shows the stored ones", sessionID, s.cfg.Stream, s.cfg.URL))
}

// close publishes every pending event, releases every lease and closes the
// connection; it runs when the plugin goes away.
func (s *store) close() error {
	var failed []error
	for _, wr := range s.writers.All() {
		if err := wr.write(stdctx.Background(), 1<<62); err != nil && !errs.HasCode(err, session.SessionLocked) {
			failed = append(failed, err)
		}
		wr.Release()
	}
	s.nc.Close()
	return errors.Join(failed...)
}
