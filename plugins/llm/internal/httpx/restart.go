package httpx

import (
	stdctx "context"
	"fmt"
	"io"
	"net/http"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/llm"
)

// Decoder turns a stream body into chunks; it owns the body.
type Decoder func(body io.ReadCloser) llm.Stream

// Stream opens a stream and decodes it. A stream that stalls before it has
// handed out a single chunk is opened anew, up to Retries times: the caller
// has seen nothing, so a second try is invisible to it. Once a chunk is out
// a stall is final, as a retry would repeat what the caller already has.
func (c *Client) Stream(ctx stdctx.Context, url string, header http.Header, body []byte, decode Decoder) (llm.Stream, error) {
	resp, err := c.Open(ctx, url, header, body)
	if err != nil {
		return nil, err
	}
	return &restarting{c: c, ctx: ctx, url: url, header: header, body: body, decode: decode, cur: decode(resp.Body)}, nil
}

type restarting struct {
	c       *Client
	ctx     stdctx.Context
	url     string
	header  http.Header
	body    []byte
	decode  Decoder
	cur     llm.Stream // nil after a failed reopen
	err     error      // the failed reopen's error
	started bool
	retries int
}

func (r *restarting) Recv() (llm.Chunk, error) {
	for {
		if r.cur == nil {
			return llm.Chunk{}, r.err
		}
		c, err := r.cur.Recv()
		if err == nil {
			r.started = true
			return c, nil
		}
		if r.started || r.retries >= r.c.Retries || r.ctx.Err() != nil || !errs.Has(err, llm.ProviderFailed, ReasonStalled) {
			return c, err
		}
		r.retries++
		r.c.log().Info("retrying the model request", "provider", r.c.Provider, "status", "stalled before the first chunk",
			"idle_timeout", r.c.IdleTimeout, "retry", fmt.Sprintf("%d/%d", r.retries, r.c.Retries))
		r.cur.Close()
		r.cur = nil
		resp, err := r.c.Open(r.ctx, r.url, r.header, r.body)
		if err != nil {
			r.err = err
			return llm.Chunk{}, err
		}
		r.cur = r.decode(resp.Body)
	}
}

func (r *restarting) Close() error {
	if r.cur == nil {
		return nil
	}
	return r.cur.Close()
}
