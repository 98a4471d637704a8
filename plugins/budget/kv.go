package budget

import (
	stdctx "context"
	"errors"
	"fmt"
	"time"

	"github.com/dsh-go/dsh/errs"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Unavailable is the code of a counter the store could not read or write.
const Unavailable errs.Code = "BUDGET_STORE_UNAVAILABLE"

// kvStore keeps the counters in a JetStream key-value bucket, one entry
// per counter, so every host using the bucket counts against the same
// ceilings. A write is a compare-and-set on the entry's revision (Create
// for a new entry, Update for an existing one): two hosts adding at once
// cannot lose either's count, and a prompt or a slot is taken only if it
// fits when it is written.
type kvStore struct {
	nc      *nats.Conn
	kv      jetstream.KeyValue
	timeout time.Duration
}

func openKV(cfg NATSConfig) (*kvStore, error) {
	opts := []nats.Option{nats.Name("dsh budget"), nats.Timeout(cfg.ConnectTimeout)}
	if cfg.CredentialsFile != "" {
		opts = append(opts, nats.UserCredentials(cfg.CredentialsFile))
	}
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, errs.Wrap(Unavailable, err, fmt.Sprintf(
			"budget: cannot connect to the NATS server at %s; start it (nats-server -js) or fix nats.url/credentials_file in the plugin's config", cfg.URL))
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, errs.Wrap(Unavailable, err, "budget: cannot use JetStream on "+cfg.URL)
	}
	// Hosts started together create the same bucket at once: each creates
	// or binds it, retried while a fresh cluster elects its leaders.
	kv, err := natsplugin.Ensure(stdctx.Background(), cfg.ConnectTimeout, func(ctx stdctx.Context) (jetstream.KeyValue, error) {
		return natsplugin.BindOrCreateKV(ctx, js, jetstream.KeyValueConfig{
			Bucket:      cfg.Bucket,
			Description: "dsh budgets: tokens, cost, prompts and turn slots per principal, tenant, agent and session",
			Replicas:    cfg.Replicas,
			Storage:     jetstream.FileStorage,
		})
	})
	if err != nil {
		nc.Close()
		return nil, errs.Wrap(Unavailable, err, fmt.Sprintf(
			"budget: cannot create or bind the bucket %q on %s; is JetStream enabled, and are replicas (%d) at most the cluster's size?", cfg.Bucket, cfg.URL, cfg.Replicas))
	}
	return &kvStore{nc: nc, kv: kv, timeout: cfg.ConnectTimeout}, nil
}

// settleFor bounds how long a request waits out a bucket electing its
// leader (no responders meanwhile).
const settleFor = 5 * time.Second

func (s *kvStore) get(ctx stdctx.Context, key string) (value, error) {
	settle := time.Now().Add(settleFor)
	for {
		rctx, cancel := stdctx.WithTimeout(ctx, s.timeout)
		e, err := s.kv.Get(rctx, key)
		cancel()
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			return value{}, nil
		case err == nil:
			return decode(e.Value()), nil
		case s.electing(ctx, err, settle):
			continue
		}
		return value{}, s.failed(err, key)
	}
}

func (s *kvStore) update(ctx stdctx.Context, key string, fn func(value) (value, bool, error)) error {
	settle := time.Now().Add(settleFor)
	for {
		rctx, cancel := stdctx.WithTimeout(ctx, s.timeout)
		err := s.try(rctx, key, fn)
		cancel()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, errRaced):
			continue // another host wrote first: apply fn to its value
		case s.electing(ctx, err, settle):
			continue
		}
		var e *errs.Error
		if errors.As(err, &e) && e.Code != Unavailable {
			return err // fn's own error
		}
		return s.failed(err, key)
	}
}

var errRaced = errors.New("the entry changed since it was read")

func (s *kvStore) try(ctx stdctx.Context, key string, fn func(value) (value, bool, error)) error {
	var old []byte
	var rev uint64
	e, err := s.kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return err
	default:
		old, rev = e.Value(), e.Revision()
	}
	v, write, err := fn(decode(old))
	if err != nil || !write {
		return err
	}
	val := encodeValue(v)
	if rev == 0 {
		_, err = s.kv.Create(ctx, key, val)
		if errors.Is(err, jetstream.ErrKeyExists) {
			return errRaced
		}
		return err
	}
	_, err = s.kv.Update(ctx, key, val, rev)
	if natsplugin.RevisionConflict(err) {
		return errRaced
	}
	return err
}

// electing reports, after a pause, whether err is a replicated bucket
// answering no one while it elects a leader, within settle.
func (s *kvStore) electing(ctx stdctx.Context, err error, settle time.Time) bool {
	if !errors.Is(err, nats.ErrNoResponders) || time.Now().After(settle) {
		return false
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(50 * time.Millisecond):
		return true
	}
}

func (s *kvStore) failed(err error, key string) error {
	return errs.Wrap(Unavailable, err, fmt.Sprintf(
		"budget: cannot read or write the counter %q in the bucket %s; check that the NATS servers are reachable", key, s.kv.Bucket()))
}

func (s *kvStore) close() { s.nc.Close() }
