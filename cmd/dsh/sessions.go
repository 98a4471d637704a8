package main

import (
	stdctx "context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/plugins/session/sign"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/usage"
	"github.com/spf13/cobra"
)

// exitNotFound: dsh sessions show or rm named a session that is not stored.
const exitNotFound = 5

func sessionsCommand(g *globals) *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "list, show and delete the persisted sessions",
		Long: `Sessions works on the sessions the config's persistence plugin (such as
session.jsonl) stores, without starting any agent.

Exit codes: 0 done, 1 failed (a session is open elsewhere, or unreadable),
2 bad usage or config (no persistence plugin configured), 5 no such session.`,
	}
	cmd.PersistentFlags().BoolVar(&jsonOut, "json", false, "write JSON instead of text")
	var page session.ListOptions
	list := &cobra.Command{
		Use:   "list",
		Short: "list the persisted sessions, most recently updated first",
		Long: `List lists the persisted sessions, most recently updated first.

With --limit it lists one page and, when more follow, says on stderr the
--cursor that lists the next.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(g, cmd, func(ctx stdctx.Context, h *host.Host) error {
				p, err := h.Sessions().ListPage(ctx, page)
				if err != nil {
					return err
				}
				if err := writeList(cmd.OutOrStdout(), p.Sessions, jsonOut); err != nil {
					return err
				}
				if p.Next != "" {
					fmt.Fprintf(cmd.ErrOrStderr(), "more sessions follow: --cursor %s\n", p.Next)
				}
				return nil
			})
		},
	}
	list.Flags().StringVar(&page.Agent, "agent", "", "list only the sessions of this agent")
	list.Flags().IntVar(&page.Limit, "limit", 0, "list at most this many sessions (0: all)")
	list.Flags().StringVar(&page.Cursor, "cursor", "", "list the page after the one that printed this cursor")
	cmd.AddCommand(list, &cobra.Command{
		Use:   "show SESSION",
		Short: "describe a session: its state, turns and usage (tokens and cost)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(g, cmd, func(ctx stdctx.Context, h *host.Host) error {
				return showSession(ctx, h, args[0], cmd.OutOrStdout(), jsonOut)
			})
		},
	}, verifyCommand(g, &jsonOut), rewindCommand(g, &jsonOut), &cobra.Command{
		Use:     "rm SESSION...",
		Aliases: []string{"delete"},
		Short:   "delete persisted sessions with their subagents' sessions; one open anywhere is refused",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(g, cmd, func(ctx stdctx.Context, h *host.Host) error {
				list, err := h.Sessions().List(ctx)
				if err != nil {
					return err
				}
				var first error
				report := func(err error) {
					if first == nil {
						first = err
					} else {
						fmt.Fprintln(cmd.ErrOrStderr(), "dsh:", err)
					}
				}
			ids:
				for _, id := range args {
					// A subagent's session goes with its parent's, deepest
					// first; the parent stays when one of them cannot go, so
					// nothing is left pointing at a missing parent.
					for _, child := range descendants(list, id) {
						if err := h.Sessions().Delete(ctx, child); err != nil {
							report(fmt.Errorf("%s stays: its subagent session %s could not be deleted: %w", id, child, err))
							continue ids
						}
						fmt.Fprintln(cmd.OutOrStdout(), "deleted", child)
					}
					if err := h.Sessions().Delete(ctx, id); err != nil {
						report(err)
						continue
					}
					fmt.Fprintln(cmd.OutOrStdout(), "deleted", id)
				}
				return first
			})
		},
	})
	return cmd
}

// withStore starts a host with only the config's session stores (see
// storeOnly), runs run and closes it again.
func withStore(g *globals, cmd *cobra.Command, run func(stdctx.Context, *host.Host) error) error {
	return withHost(g, cmd, storeOnly, func(ctx stdctx.Context, _ *config.Config, h *host.Host) error { return run(ctx, h) })
}

// withHost loads the config, starts a host with what only keeps of it,
// runs run within a minute and closes the host again. run's error becomes
// the command's exit code: its own when it carries one, else by code
// (not found, a usage mistake, any other failure).
func withHost(g *globals, cmd *cobra.Command, only func(*config.Config) *config.Config, run func(stdctx.Context, *config.Config, *host.Host) error) (runErr error) {
	cfg, err := config.Load(g.loadOptions())
	if err != nil {
		return &exitCode{code: exitUsage, err: err}
	}
	h, err := host.Start(only(cfg), host.Options{LogOutput: cmd.ErrOrStderr()})
	if err != nil {
		return &exitCode{code: exitError, err: err}
	}
	defer func() {
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
		defer cancel()
		if err := h.Close(ctx); err != nil && runErr == nil {
			runErr = &exitCode{code: exitError, err: err}
		}
	}()
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), time.Minute)
	defer cancel()
	err = run(ctx, cfg, h)
	var ec *exitCode
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ec):
		return ec
	case errs.HasCode(err, session.NotFound):
		return &exitCode{code: exitNotFound, err: err}
	case errs.HasCode(err, session.NoPersistence), errs.HasCode(err, session.Unsupported), errs.HasCode(err, session.RewindBadPoint):
		return &exitCode{code: exitUsage, err: err}
	}
	return &exitCode{code: exitError, err: err}
}

// storeOnly is cfg with only what reading the stored sessions needs: the
// root entries of plugins that store sessions. Model providers and the
// rest are not started, so listing and showing sessions needs no API key,
// and a provider that cannot start does not stop them.
func storeOnly(cfg *config.Config) *config.Config {
	return cfg.OnlyPlugins(config.IsSessionStore)
}

func writeList(w io.Writer, list []session.Summary, jsonOut bool) error {
	if jsonOut {
		if list == nil {
			list = []session.Summary{}
		}
		return json.NewEncoder(w).Encode(list)
	}
	if len(list) == 0 {
		fmt.Fprintln(w, "no sessions")
		return nil
	}
	// A subagent's session names its parent's; the column shows only
	// when one does.
	children := slices.ContainsFunc(list, func(s session.Summary) bool { return s.Parent != "" })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "ID\tAGENT\tSTATE\tTURNS\tUPDATED\tTITLE"
	if children {
		head = "ID\tPARENT\tAGENT\tSTATE\tTURNS\tUPDATED\tTITLE"
	}
	fmt.Fprintln(tw, head)
	for _, s := range list {
		id := s.ID
		if children {
			id += "\t" + orDash(s.Parent)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", id, orDash(s.Agent), s.State, s.Turns, s.Updated.Local().Format("2006-01-02 15:04"), s.Title)
	}
	return tw.Flush()
}

// descendants lists the subagent sessions under id, deepest first.
func descendants(list []session.Summary, id string) []string {
	var out []string
	for _, s := range list {
		if s.Parent == id {
			out = append(out, descendants(list, s.ID)...)
			out = append(out, s.ID)
		}
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// sessionShown is the JSON of dsh sessions show.
type sessionShown struct {
	session.Summary
	Usage usage.Snapshot `json:"usage"`
	// Turns are the usage of each turn that called the model.
	Turns []usage.TurnCounts `json:"turn_usage"`
}

func showSession(ctx stdctx.Context, h *host.Host, id string, w io.Writer, jsonOut bool) error {
	// By key: the store describes this session without listing the others.
	sum, ok, err := h.Sessions().Find(ctx, id)
	if err != nil {
		return err
	}
	if !ok {
		// Find says "not stored" when nothing persists at all; a page of
		// one tells that usage mistake from a missing session.
		if _, err := h.Sessions().ListPage(ctx, session.ListOptions{Limit: 1}); err != nil {
			return err
		}
		return errs.New(session.NotFound, fmt.Sprintf("no session %q is stored; dsh sessions list shows the ones that are", id))
	}
	var events []session.Event
	if sum.State != session.StateCorrupt {
		st, err := session.Key.Get(h.Root())
		if err != nil {
			return err
		}
		if events, err = st.Load(ctx, id); err != nil {
			return err
		}
	}
	cfg := h.Config()
	// The agent that wrote the session prices its steps recorded without
	// a model; a session opened by the controller is "<agent>@<session>".
	ac, _ := cfg.Agent(strings.SplitN(sum.Agent, "@", 2)[0])
	out := sessionShown{Summary: sum, Usage: usageOf(cfg, ac, events), Turns: turnUsage(cfg, ac, events)}
	if jsonOut {
		return json.NewEncoder(w).Encode(out)
	}
	fmt.Fprintf(w, "session  %s\nagent    %s\nstate    %s\nturns    %d\ncreated  %s\nupdated  %s\n",
		sum.ID, orDash(sum.Agent), sum.State, sum.Turns, sum.Created.Local().Format(time.DateTime), sum.Updated.Local().Format(time.DateTime))
	if sum.Title != "" {
		fmt.Fprintf(w, "title    %s\n", sum.Title)
	}
	if sum.Holder != "" {
		fmt.Fprintf(w, "held by  %s\n", sum.Holder)
	}
	if sum.Error != "" {
		fmt.Fprintf(w, "error    %s\n", sum.Error)
	}
	if out.Usage.Session.Steps == 0 {
		fmt.Fprintln(w, "usage    no model calls recorded")
		return nil
	}
	fmt.Fprintln(w, "usage")
	for _, t := range out.Turns {
		fmt.Fprintf(w, "  turn %d (%d steps): %s\n", t.Turn, t.Steps, usage.Line(t.Counts, out.Usage.Currency))
	}
	fmt.Fprintf(w, "  session (%d steps): %s\n", out.Usage.Session.Steps, usage.Line(out.Usage.Session, out.Usage.Currency))
	return nil
}

// turnUsage returns the usage of each turn of a log that called the model.
func turnUsage(cfg *config.Config, ac config.AgentConfig, events []session.Event) []usage.TurnCounts {
	var out []usage.TurnCounts
	var acc *usage.Account
	turn := 0
	flush := func() {
		if acc != nil && acc.Session().Steps > 0 {
			out = append(out, usage.TurnCounts{Turn: turn, Counts: usage.CountsOf(acc.Session())})
		}
	}
	for _, e := range events {
		if !usage.Counted(e) {
			continue
		}
		if acc == nil || e.Turn != turn {
			flush()
			acc, turn = cfg.Account(ac), e.Turn
		}
		acc.Add(e)
	}
	flush()
	return out
}

// verified is one session's line of dsh sessions verify --json.
type verified struct {
	Session string   `json:"session"`
	OK      bool     `json:"ok"`
	Records int      `json:"records"`
	Signed  int      `json:"signed"`
	Keys    []string `json:"keys,omitempty"`
	// Seq is the first bad record's, Error what is wrong with it.
	Seq   int64  `json:"seq,omitempty"`
	Error string `json:"error,omitempty"`
}

func verifyCommand(g *globals, jsonOut *bool) *cobra.Command {
	var keyPath string
	cmd := &cobra.Command{
		Use:   "verify SESSION...",
		Short: "check the decision records of sessions: their chain and, with --key, their signatures",
		Long: `Verify checks each session's decision records offline: every record's
digest matches its content and names the record before it, so a record
changed, removed, inserted or moved is found; with --key (an ed25519 public
key, PEM or base64) every record must carry a valid signature by that key.
It reports the first bad record of a session with its seq.

Exit codes: 0 every session holds, 1 a record fails (or a session cannot
be read), 2 bad usage, 5 no such session.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var pub ed25519.PublicKey
			if keyPath != "" {
				text, err := os.ReadFile(keyPath)
				if err != nil {
					return &exitCode{code: exitUsage, err: fmt.Errorf("--key %s cannot be read: %w", keyPath, err)}
				}
				if pub, err = sign.ParsePublicKey(text); err != nil {
					return &exitCode{code: exitUsage, err: fmt.Errorf("--key %s does not hold an ed25519 public key: %w", keyPath, err)}
				}
			}
			return withStore(g, cmd, func(ctx stdctx.Context, h *host.Host) error {
				var first error
				var out []verified
				for _, id := range args {
					events, err := h.Sessions().History(ctx, id, 0)
					if err != nil {
						return err
					}
					v, err := session.VerifyDecisions(id, events, pub)
					line := verified{Session: id, OK: err == nil, Records: v.Records, Signed: v.Signed, Keys: v.Keys}
					if err != nil {
						if e, ok := errors.AsType[*errs.Error](err); ok {
							line.Seq, _ = e.Details["seq"].(int64)
						}
						line.Error = err.Error()
						if first == nil {
							first = err
						}
					}
					out = append(out, line)
				}
				w := cmd.OutOrStdout()
				if *jsonOut {
					if err := json.NewEncoder(w).Encode(out); err != nil {
						return err
					}
				} else {
					for _, v := range out {
						switch {
						case !v.OK:
							fmt.Fprintf(w, "%s: FAILED at seq %d: %s\n", v.Session, v.Seq, v.Error)
						case pub != nil:
							fmt.Fprintf(w, "%s: ok, %d decision records, all signed by key %s\n", v.Session, v.Records, session.KeyID(pub))
						case v.Signed > 0:
							fmt.Fprintf(w, "%s: ok, %d decision records chained; %d signed by key %s (give --key to check the signatures)\n", v.Session, v.Records, v.Signed, strings.Join(v.Keys, ", "))
						default:
							fmt.Fprintf(w, "%s: ok, %d decision records chained, none signed\n", v.Session, v.Records)
						}
					}
				}
				if first != nil {
					return &verifyFailed{first}
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&keyPath, "key", "", "the ed25519 public key (PEM or base64 file) every record must be signed by")
	return cmd
}

// verifyFailed is a failed verification: reported on stdout already, it
// exits 1 without repeating itself.
type verifyFailed struct{ err error }

func (v *verifyFailed) Error() string { return v.err.Error() }
func (v *verifyFailed) Unwrap() error { return v.err }
