package main

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/internal/slashcmd"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/spf13/cobra"
)

// rewindHelp is the /help text of /rewind and /redo.
const rewindHelp = "/rewind      list the turns and steps to rewind to; /rewind TURN[.STEP] [code|conversation|both] [--force]\n/redo        undo the last rewind\n"

// rewindCommand is `dsh sessions rewind`.
func rewindCommand(g *globals, jsonOut *bool) *cobra.Command {
	var to string
	var code, conversation, force, redo bool
	cmd := &cobra.Command{
		Use:   "rewind SESSION --to TURN[.STEP]",
		Short: "take a session's workspace and/or conversation back to before a turn or step (or --redo the last rewind)",
		Long: `Rewind opens the session (resuming it from the store), takes it back to
before turn TURN (or step STEP of it) and closes it again. --code rewinds
the workspace alone, --conversation the conversation alone; neither
rewinds both. The workspace is restored from the session's checkpoints
(the session.checkpoints plugin records them); a file changed since its
checkpoint stops the rewind, which names it, unless --force. --redo undoes
the last rewind instead. Nothing is erased: the rewind is an event in the
session's log.

Without --to and --redo it lists the turns and steps to rewind to.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r := sessions.RewindRequest{Code: code, Conversation: conversation, Force: force, Redo: redo}
			list := to == "" && !redo
			if !list && !redo {
				p, err := session.ParsePoint(to)
				if err != nil {
					return &exitCode{code: exitUsage, err: err}
				}
				r.To = p
			}
			return withAgentSession(g, cmd, args[0], func(ctx stdctx.Context, svc sessions.Service, id string) error {
				if list {
					events, err := svc.History(ctx, id, 0)
					if err != nil {
						return err
					}
					fmt.Fprint(cmd.OutOrStdout(), rewindPoints(events))
					return nil
				}
				res, err := svc.Rewind(sessions.WithActor(ctx, cliSource.Principal.ID), id, r)
				if err != nil {
					return err
				}
				if *jsonOut {
					return json.NewEncoder(cmd.OutOrStdout()).Encode(res.Event)
				}
				fmt.Fprintln(cmd.OutOrStdout(), rewound(res.Event))
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the turn (3) or step (3.2) to go back to before")
	cmd.Flags().BoolVar(&code, "code", false, "rewind the workspace only")
	cmd.Flags().BoolVar(&conversation, "conversation", false, "rewind the conversation only")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite what changed in the workspace since the checkpoint")
	cmd.Flags().BoolVar(&redo, "redo", false, "undo the last rewind")
	return cmd
}

// withAgentSession starts the host with the config's agents, opens stored
// session id with the agent that wrote it, runs fn and closes it again.
func withAgentSession(g *globals, cmd *cobra.Command, id string, fn func(stdctx.Context, sessions.Service, string) error) error {
	all := func(cfg *config.Config) *config.Config { return cfg }
	return withHost(g, cmd, all, func(ctx stdctx.Context, cfg *config.Config, h *host.Host) error {
		svc := h.Sessions()
		// Only this session's agent is needed: Find asks the store for
		// the one id instead of listing every stored session.
		sum, found, err := svc.Find(ctx, id)
		if err != nil {
			return err
		}
		var list []session.Summary
		if found {
			list = append(list, sum)
		}
		ac, err := agentOfSession(cfg, list, id, "")
		if err != nil {
			return err
		}
		if _, err := svc.Ensure(ctx, sessions.EnsureOptions{Mode: sessions.EnsureExisting,
			OpenOptions: sessions.OpenOptions{Agent: ac.ID, AgentID: ac.ID, SessionID: id, Source: cliSource}}); err != nil {
			return err
		}
		defer svc.Close(ctx, id)
		return fn(ctx, svc, id)
	})
}

// slashRewind runs /rewind and /redo of the interactive session id.
func slashRewind(svc sessions.Service, id, line string, out, diag io.Writer) {
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), time.Minute)
	defer cancel()
	ctx = sessions.WithActor(ctx, cliSource.Principal.ID)
	fields := strings.Fields(line)
	r, list, err := slashcmd.ParseRewind(fields[1:], fields[0] == "/redo")
	if err != nil {
		fmt.Fprintln(diag, bareError(err))
		return
	}
	if list {
		events, err := svc.History(ctx, id, 0)
		if err != nil {
			fmt.Fprintf(diag, "/rewind: %v\n", err)
			return
		}
		fmt.Fprint(out, rewindPoints(events))
		return
	}
	res, err := svc.Rewind(ctx, id, r)
	if err != nil {
		fmt.Fprintf(diag, "%s: %v\n", fields[0], err)
		return
	}
	fmt.Fprintln(diag, rewound(res.Event))
}

// rewound says what a rewind or redo event did (slashcmd.Rewound).
func rewound(e session.Event) string { return slashcmd.Rewound(e) }

// rewindPoints lists the turns and steps to rewind to, for /rewind and
// `dsh sessions rewind` without --to.
func rewindPoints(events []session.Event) string {
	return slashcmd.RewindPoints(events, "rewind with /rewind TURN[.STEP] [code|conversation|both] (dsh sessions rewind ID --to TURN[.STEP])")
}
