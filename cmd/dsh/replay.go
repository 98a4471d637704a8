package main

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/replay"
	"github.com/dsh-go/dsh/services/session"
	"github.com/spf13/cobra"
)

// exitChanged: dsh replay found decisions or turns that the config
// changes.
const exitChanged = 6

func replayCommand(g *globals) *cobra.Command {
	var (
		jsonOut bool
		from    string
		dir     string
		all     bool
	)
	cmd := &cobra.Command{
		Use:   "replay [SESSION...] --config NEW.yaml",
		Short: "re-run recorded sessions against a config and report every decision it changes",
		Long: `Replay re-runs recorded sessions against the config (--config): the
recorded model output stands in for the model, recorded tool results for
the tools (nothing runs), and admission, approval, hooks and policies
decide anew. It prints, per session, every decision that changed — what
is let through now that was stopped then first — and every turn that would
now be refused or end otherwise.

The sessions are read from the config's own session store, from another
config's (--from OLD.yaml, a cluster's session.nats say), or from a folder
of session.jsonl logs (--dir). --all replays every stored session.

Exit codes: 0 no changes, 6 something changed, 1 a session could not be
replayed, 2 bad usage or config, 5 no such session.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && !all {
				return &exitCode{code: exitUsage, err: fmt.Errorf("name the sessions to replay, or give --all")}
			}
			cfg, err := config.Load(g.loadOptions())
			if err != nil {
				return &exitCode{code: exitUsage, err: err}
			}
			src := cfg
			switch {
			case dir != "" && from != "":
				return &exitCode{code: exitUsage, err: fmt.Errorf("--dir and --from both name where the sessions are; give one")}
			case dir != "":
				yaml := fmt.Sprintf("plugins:\n  - use: session.jsonl\n    config: {dir: %q}\n", dir)
				if src, err = config.Parse("--dir", []byte(yaml), config.LoadOptions{IgnoreEnv: true}); err != nil {
					return &exitCode{code: exitUsage, err: err}
				}
			case from != "":
				if src, err = config.Load(config.LoadOptions{Path: from, IgnoreEnv: g.ignoreEnv}); err != nil {
					return &exitCode{code: exitUsage, err: err}
				}
			}
			ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 30*time.Minute)
			defer cancel()
			recs, err := loadRecordings(ctx, cmd, src, args, all)
			if err != nil {
				return err
			}
			h, err := host.Start(replay.Config(cfg), host.Options{LogOutput: cmd.ErrOrStderr()})
			if err != nil {
				return &exitCode{code: exitError, err: err}
			}
			defer func() {
				closing, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
				defer cancel()
				_ = h.Close(closing)
			}()
			r, err := replay.New(h)
			if err != nil {
				return &exitCode{code: exitError, err: err}
			}
			var reports []replay.Report
			failed, changed := false, false
			for _, rec := range recs {
				rep, err := r.Replay(ctx, rec)
				if err != nil {
					rep.Error = err.Error()
					failed = true
				}
				changed = changed || rep.Changed()
				reports = append(reports, rep)
			}
			if jsonOut {
				if err := json.NewEncoder(cmd.OutOrStdout()).Encode(struct {
					Changed  bool            `json:"changed"`
					Sessions []replay.Report `json:"sessions"`
				}{changed, reports}); err != nil {
					return &exitCode{code: exitError, err: err}
				}
			} else {
				replay.Write(cmd.OutOrStdout(), reports)
			}
			switch {
			case failed:
				return &exitCode{code: exitError}
			case changed:
				return &exitCode{code: exitChanged}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "write the reports as JSON (for CI)")
	cmd.Flags().StringVar(&from, "from", "", "read the sessions from this config's session store instead of --config's")
	cmd.Flags().StringVar(&dir, "dir", "", "read the sessions from this folder of session.jsonl logs")
	cmd.Flags().BoolVar(&all, "all", false, "replay every stored session")
	return cmd
}

// loadRecordings reads the sessions to replay from src's store.
func loadRecordings(ctx stdctx.Context, cmd *cobra.Command, src *config.Config, ids []string, all bool) ([]replay.Recording, error) {
	h, err := host.Start(storeOnly(src), host.Options{LogOutput: cmd.ErrOrStderr()})
	if err != nil {
		return nil, &exitCode{code: exitError, err: err}
	}
	defer func() {
		closing, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
		defer cancel()
		_ = h.Close(closing)
	}()
	list, err := h.Sessions().List(ctx)
	if err != nil {
		return nil, storeError(err)
	}
	agents := map[string]string{}
	for _, s := range list {
		agents[s.ID] = s.Agent
	}
	if all {
		ids = ids[:0]
		for _, s := range list {
			ids = append(ids, s.ID)
		}
		slices.Sort(ids) // a stable order, for reports CI compares
	}
	var recs []replay.Recording
	for _, id := range ids {
		agent, ok := agents[id]
		if !ok {
			return nil, &exitCode{code: exitNotFound, err: errs.New(session.NotFound, fmt.Sprintf("no session %q is stored; dsh sessions list shows those that are", id))}
		}
		events, err := h.Sessions().History(ctx, id, 0)
		if err != nil {
			return nil, storeError(err)
		}
		recs = append(recs, replay.Recording{Session: id, Agent: agent, Events: events})
	}
	return recs, nil
}

func storeError(err error) error {
	switch {
	case errs.HasCode(err, session.NotFound):
		return &exitCode{code: exitNotFound, err: err}
	case errs.HasCode(err, session.NoPersistence), errs.HasCode(err, session.Unsupported):
		return &exitCode{code: exitUsage, err: err}
	}
	return &exitCode{code: exitError, err: err}
}
