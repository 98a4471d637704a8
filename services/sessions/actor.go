package sessions

import stdctx "context"

type actorKey struct{}

// WithActor names who acts through ctx — "an HTTP client (127.0.0.1:5123)",
// "the ACP client", "Ctrl-C in dsh run" — for the records that say who did
// something to a session: a cancel's dropped messages carry it.
func WithActor(ctx stdctx.Context, who string) stdctx.Context {
	return stdctx.WithValue(ctx, actorKey{}, who)
}

// ActorOf returns the name WithActor gave ctx, or "".
func ActorOf(ctx stdctx.Context) string {
	who, _ := ctx.Value(actorKey{}).(string)
	return who
}
