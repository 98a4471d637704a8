package nats

import (
	stdctx "context"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A checkpoint's events are published as one JetStream atomic batch
// (nats-server 2.12 and later, on a stream with allow_atomic): every
// message but the last is sent without waiting, the last commits the batch
// and its ack is the only one awaited. One round trip per step, where one
// message each cost one per event — and on a replicated stream one
// consensus round per event, as the server refuses a message expecting a
// subject's last sequence while that subject has another in flight.
//
// Pipelining plain publishes could not keep the writer's fence: only the
// first message of a step can expect a known sequence, and if another
// writer's append made it fail, the rest would land after that writer's
// messages. An atomic batch is checked and stored whole or not at all, so
// the first message's expectation covers the step, and a refused batch
// leaves nothing of it in the log for a reader to misread.

// Headers of atomic batch publishing (nats-server's JSBatchId, JSBatchSeq,
// JSBatchCommit); nats.go has no API for it.
const (
	batchIDHeader     = "Nats-Batch-Id"
	batchSeqHeader    = "Nats-Batch-Sequence"
	batchCommitHeader = "Nats-Batch-Commit"
)

// maxBatch bounds the messages of one atomic batch, under the server's
// default limit of 1000; a longer checkpoint goes as several batches, each
// expecting the one before.
const maxBatch = 500

// Error codes of atomic batches (nats-server errors.json). Most say the
// batch was refused as a batch, not for its content: it is published
// again one message at a time. An incomplete batch is not: one of its
// messages was refused (too large, say) or lost on the way, and one at a
// time would store the step up to that message, a half step; it fails
// the flush instead, the whole step still pending.
const (
	errAtomicDisabled      jetstream.ErrorCode = 10174 // the stream lost allow_atomic
	errAtomicMissingSeq    jetstream.ErrorCode = 10175
	errAtomicIncomplete    jetstream.ErrorCode = 10176 // a message of it was lost, or refused
	errAtomicHeader        jetstream.ErrorCode = 10177
	errAtomicBatchID       jetstream.ErrorCode = 10179
	errAtomicTooLarge      jetstream.ErrorCode = 10199
	errAtomicCommit        jetstream.ErrorCode = 10200
	errAtomicTooMany       jetstream.ErrorCode = 10210 // too many batches in flight on the stream
	errAtomicDuplicateInIt jetstream.ErrorCode = 10201 // a message id already stored
)

// apiCode is the JetStream error code of err, 0 for another error.
func apiCode(err error) jetstream.ErrorCode {
	var je jetstream.JetStreamError
	if errors.As(err, &je) && je.APIError() != nil {
		return je.APIError().ErrorCode
	}
	return 0
}

// publishAtomic publishes out as one atomic batch whose first message
// expects last as the subject's last sequence. It returns how many of out
// are stored — all or, when an earlier try was, those it stored — and the
// sequence of the last of them. A batch the server will not take as a
// batch is published one message at a time instead.
func (wr *writer) publishAtomic(ctx stdctx.Context, out []outgoing, who author, last uint64) (int, uint64, error) {
	// connect_timeout bounds the waits for an append in flight, as it
	// bounds them for one message (publish).
	busy, cancel := wr.store.timeout(ctx)
	defer cancel()
	for {
		seq, err := wr.commitBatch(ctx, out, who, last)
		if err == nil {
			return len(out), seq, nil
		}
		switch code := apiCode(err); code {
		case jetstream.JSErrCodeStreamWrongLastSequenceConstant:
			// The subject's last append is still in flight (see publish).
			select {
			case <-busy.Done():
				return 0, last, err
			case <-time.After(busyRetry):
				continue
			}
		case jetstream.JSErrCodeStreamWrongLastSequence, errAtomicDuplicateInIt:
			// A try whose ack was lost may have stored the batch, or a
			// part of it when that try was another split of the events.
			n, seq, lerr := wr.landedOf(ctx, out)
			switch {
			case lerr != nil:
				return 0, last, lerr
			case n == 0:
				return 0, last, err
			case n == len(out):
				return n, seq, nil
			}
			m, seq, err := wr.publishAtomic(ctx, out[n:], who, seq)
			return n + m, seq, err
		case errAtomicDisabled, errAtomicMissingSeq, errAtomicHeader,
			errAtomicBatchID, errAtomicTooLarge, errAtomicCommit, errAtomicTooMany:
			if code == errAtomicDisabled {
				// Another host set the stream up without allow_atomic.
				wr.store.atomic.Store(false)
			}
			wr.store.log.Debug("session.nats: an atomic batch was refused; publishing its messages one at a time",
				"session", wr.id, "messages", len(out), "error", err)
			return wr.publishEach(ctx, out, who, last)
		default:
			return 0, last, err
		}
	}
}

// commitBatch sends out as one atomic batch and waits for its commit's
// ack, bounded by connect_timeout.
func (wr *writer) commitBatch(ctx stdctx.Context, out []outgoing, who author, last uint64) (uint64, error) {
	// A fresh id each try: a batch the server abandoned must not collect
	// the messages of the next.
	id := wr.lease.token + "." + strconv.FormatUint(wr.store.batches.Add(1), 36)
	for i, o := range out[:len(out)-1] {
		m := wr.message(o, who)
		m.Header.Set(jetstream.MsgIDHeader, o.id)
		m.Header.Set(batchIDHeader, id)
		m.Header.Set(batchSeqHeader, strconv.Itoa(i+1))
		if i == 0 {
			m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(last, 10))
		}
		if err := wr.store.nc.PublishMsg(m); err != nil {
			return 0, err
		}
	}
	m := wr.message(out[len(out)-1], who)
	m.Header.Set(jetstream.MsgIDHeader, out[len(out)-1].id)
	m.Header.Set(batchIDHeader, id)
	m.Header.Set(batchSeqHeader, strconv.Itoa(len(out)))
	m.Header.Set(batchCommitHeader, "1")
	if len(out) == 1 {
		// A batch of one is its own first message: it carries the
		// fence, or another writer's append since last goes unnoticed.
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(last, 10))
	}
	pctx, cancel := wr.store.timeout(ctx)
	defer cancel()
	ack, err := wr.store.js.PublishMsg(pctx, m)
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}
