package nats

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dsh-go/dsh/internal/lazyregexp"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Two kinds of read, and the stream allows both (AllowDirect).
//
// A leader read asks the stream's leader ($JS.API.STREAM.MSG.GET), which
// has applied every append it acked: where a log ends, before a writer
// takes it over, must be read there. nats.go sends its GetMsg and
// GetLastMsgForSubject to any replica once a stream allows direct gets,
// so those reads are made here instead.
//
// A direct read ($JS.API.DIRECT.GET, batch) is answered by any replica,
// a whole log in one request; a replica behind the leader answers with
// fewer messages. The caller knows from a leader read where the log ends
// and asks again from where the answer stopped, so what it gets is the
// leader's log. It replaces an ephemeral consumer per read, which on a
// clustered server is a proposal to the meta leader to create it and
// another to delete it: a host adopting a thousand sessions made the meta
// layer the bottleneck of the whole cluster.

// msgGetRequest is the JetStream API's message get request.
type msgGetRequest struct {
	Seq     uint64 `json:"seq,omitempty"`
	LastFor string `json:"last_by_subj,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`
	Batch   int    `json:"batch,omitempty"`
	// NoHeaders: a batch's messages come without their headers.
	NoHeaders bool `json:"no_hdr,omitempty"`
}

type msgGetResponse struct {
	Error   *jetstream.APIError `json:"error,omitempty"`
	Message *struct {
		Subject  string    `json:"subject"`
		Sequence uint64    `json:"seq"`
		Header   []byte    `json:"hdrs,omitempty"`
		Data     []byte    `json:"data,omitempty"`
		Time     time.Time `json:"time"`
	} `json:"message,omitempty"`
}

// LeaderReader reads single messages of one stream from its leader.
type LeaderReader struct {
	nc     *natsgo.Conn
	stream string
}

// NewLeaderReader reads stream through nc.
func NewLeaderReader(nc *natsgo.Conn, stream string) LeaderReader {
	return LeaderReader{nc: nc, stream: stream}
}

// Last is the last message on subject; jetstream.ErrMsgNotFound when
// there is none.
func (r LeaderReader) Last(ctx stdctx.Context, subject string) (*jetstream.RawStreamMsg, error) {
	return r.get(ctx, msgGetRequest{LastFor: subject})
}

// First is the first message on subject; jetstream.ErrMsgNotFound when
// there is none.
func (r LeaderReader) First(ctx stdctx.Context, subject string) (*jetstream.RawStreamMsg, error) {
	return r.Next(ctx, subject, 1)
}

// Next is the first message on subject at stream sequence from or later;
// jetstream.ErrMsgNotFound when there is none.
func (r LeaderReader) Next(ctx stdctx.Context, subject string, from uint64) (*jetstream.RawStreamMsg, error) {
	return r.get(ctx, msgGetRequest{Seq: from, NextFor: subject})
}

// leaderPatience bounds a leader read whose context has no deadline: a
// request sent while the stream elects its leader is answered by nobody.
const leaderPatience = 5 * time.Second

func (r LeaderReader) get(ctx stdctx.Context, req msgGetRequest) (*jetstream.RawStreamMsg, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel stdctx.CancelFunc
		ctx, cancel = stdctx.WithTimeout(ctx, leaderPatience)
		defer cancel()
	}
	body, _ := json.Marshal(req)
	m, err := r.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+r.stream, body)
	if err != nil {
		return nil, err
	}
	var resp msgGetResponse
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return nil, fmt.Errorf("an answer to a message get of stream %s is not JSON: %w", r.stream, err)
	}
	if resp.Error != nil {
		if resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return nil, jetstream.ErrMsgNotFound
		}
		return nil, resp.Error
	}
	if resp.Message == nil {
		return nil, jetstream.ErrInvalidJetStreamResponse
	}
	out := &jetstream.RawStreamMsg{Subject: resp.Message.Subject, Sequence: resp.Message.Sequence, Data: resp.Message.Data, Time: resp.Message.Time}
	if len(resp.Message.Header) > 0 {
		if out.Header, err = natsgo.DecodeHeadersMsg(resp.Message.Header); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// errNoDirect: the stream does not answer direct gets (a host of an
// earlier version set AllowDirect back): the log is read by a consumer.
var errNoDirect = errors.New("the stream does not allow direct gets")

// directBatch asks any replica for up to n messages on subject from stream
// sequence from on, and calls fn with each, in order: with its sequence
// and headers, or, with noHeaders, its data alone (seq 0, h nil). It
// returns the stream sequence of the last message of the answer, which
// holds fewer than the log when the replica is behind or the server
// capped the answer's bytes.
func (s *store) directBatch(ctx stdctx.Context, subject string, from uint64, n int, noHeaders bool,
	fn func(seq uint64, h natsgo.Header, data []byte) error) (uint64, error) {
	return directBatchOf(ctx, s.nc, s.cfg.Stream, subject, from, n, noHeaders, fn)
}

// directBatchOf is directBatch of any stream.
func directBatchOf(ctx stdctx.Context, nc *natsgo.Conn, stream, subject string, from uint64, n int, noHeaders bool,
	fn func(seq uint64, h natsgo.Header, data []byte) error) (uint64, error) {
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return 0, err
	}
	defer sub.Unsubscribe()
	body, _ := json.Marshal(msgGetRequest{Seq: from, NextFor: subject, Batch: n, NoHeaders: noHeaders})
	if err := nc.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, body); err != nil {
		return 0, err
	}
	var end uint64
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if errors.Is(err, natsgo.ErrNoResponders) {
			return end, errNoDirect
		}
		if err != nil {
			return end, err
		}
		if status := m.Header.Get("Status"); status != "" && len(m.Data) == 0 {
			switch status {
			case "204": // end of the batch
				if last := m.Header.Get(jetstream.LastSequenceHeader); last != "" {
					end, _ = strconv.ParseUint(last, 10, 64)
				}
				return end, nil
			case "404": // nothing from `from` on, on this replica
				return end, nil
			default:
				return end, fmt.Errorf("direct get of %s: %s %s", subject, status, m.Header.Get("Description"))
			}
		}
		var seq uint64
		h := m.Header
		if noHeaders {
			h = nil
		} else if seq, err = strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64); err != nil {
			return end, fmt.Errorf("direct get of %s: a message without its sequence: %w", subject, err)
		} else {
			end = seq
		}
		if err := fn(seq, h, m.Data); err != nil {
			return end, err
		}
	}
}

// LeaderReads returns st with its GetLastMsgForSubject sent to the
// stream's leader through r, whatever the stream's AllowDirect says.
func LeaderReads(st jetstream.Stream, r LeaderReader) jetstream.Stream {
	return leaderStream{Stream: st, r: r}
}

type leaderStream struct {
	jetstream.Stream
	r LeaderReader
}

func (l leaderStream) GetLastMsgForSubject(ctx stdctx.Context, subject string) (*jetstream.RawStreamMsg, error) {
	return l.r.Last(ctx, subject)
}

// LeaderKV returns kv with its Get sent to the leader of the bucket's
// stream through nc. A bucket allows direct gets (nats.go creates them so),
// and a direct get may be answered by a replica that has not applied the
// last acked write: it would report a lease just taken as absent, or one
// just released as held. Every read that decides who owns a session — a
// lease, an index entry, a schedule's claim — is made here instead.
func LeaderKV(kv jetstream.KeyValue, nc *natsgo.Conn) jetstream.KeyValue {
	return leaderKV{KeyValue: kv, r: NewLeaderReader(nc, KVStream(kv.Bucket()))}
}

// The names nats.go gives a bucket's stream and its keys' subjects, and
// the header that marks a delete or a purge.
const (
	kvStreamPrefix  = "KV_"
	kvSubjectPrefix = "$KV."
	kvOperation     = "KV-Operation"
)

// KVStream is the stream that holds bucket's entries.
func KVStream(bucket string) string { return kvStreamPrefix + bucket }

// KVSubject is the subject key's writes in bucket are published on: a
// plain subscription to it hears every put, delete and purge of the key.
func KVSubject(bucket, key string) string { return kvSubjectPrefix + bucket + "." + key }

// KVRemoved reports whether a message of a bucket's stream with header h
// removes its key rather than puts a value: a delete or purge (its
// KV-Operation), or the server's marker of an entry that expired (its
// Nats-Marker-Reason).
func KVRemoved(h natsgo.Header) (deleted, expired bool) {
	if op := h.Get(kvOperation); op != "" {
		return true, false
	}
	return false, h.Get(jetstream.MarkerReasonHeader) != ""
}

// validKey is a key nats.go accepts.
var validKey = lazyregexp.New(`^[-/_=.a-zA-Z0-9]+$`)

type leaderKV struct {
	jetstream.KeyValue
	r LeaderReader
}

// Get reads key's latest entry from the leader, as nats.go reads it
// otherwise: a delete, a purge or a limit marker (an expired entry) is
// jetstream.ErrKeyNotFound.
func (l leaderKV) Get(ctx stdctx.Context, key string) (jetstream.KeyValueEntry, error) {
	if !validKey.MatchString(key) || strings.Contains(key, "..") || key[0] == '.' || key[len(key)-1] == '.' {
		return nil, jetstream.ErrInvalidKey
	}
	m, err := l.r.Last(ctx, KVSubject(l.Bucket(), key))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, jetstream.ErrKeyNotFound
	}
	if err != nil {
		return nil, err
	}
	if deleted, expired := KVRemoved(m.Header); deleted || expired {
		return nil, jetstream.ErrKeyNotFound
	}
	return leaderEntry{bucket: l.Bucket(), key: key, m: m}, nil
}

// leaderEntry is an entry read from the leader.
type leaderEntry struct {
	bucket, key string
	m           *jetstream.RawStreamMsg
}

func (e leaderEntry) Bucket() string                  { return e.bucket }
func (e leaderEntry) Key() string                     { return e.key }
func (e leaderEntry) Value() []byte                   { return e.m.Data }
func (e leaderEntry) Revision() uint64                { return e.m.Sequence }
func (e leaderEntry) Created() time.Time              { return e.m.Time }
func (e leaderEntry) Delta() uint64                   { return 0 }
func (e leaderEntry) Operation() jetstream.KeyValueOp { return jetstream.KeyValuePut }
