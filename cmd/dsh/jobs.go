package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/services/jobs"
)

// jobsHelp is the /help line of /jobs.
const jobsHelp = "/jobs        list the session's background jobs; /jobs kill ID ends one\n"

// jobsCommand is /jobs: the background jobs of the session's agent, or,
// with "kill ID", the end of one (its agent is told, as of any job that
// ends without its reading the end).
func jobsCommand(h *host.Host, agentID, args string, out, diag io.Writer) {
	table := jobs.Of(h.Root())
	fields := strings.Fields(args)
	switch {
	case len(fields) == 0:
		list := table.List(agentID)
		if len(list) == 0 {
			fmt.Fprint(out, "no background jobs\n")
			return
		}
		for _, in := range list {
			fmt.Fprintln(out, jobLine(in))
		}
	case len(fields) == 2 && fields[0] == "kill":
		if err := table.Kill(agentID, fields[1], "/jobs kill"); err != nil {
			fmt.Fprintf(diag, "/jobs: %v\n", err)
			return
		}
		fmt.Fprintf(diag, "(%s killed)\n", fields[1])
	default:
		fmt.Fprint(diag, "usage: /jobs, or /jobs kill ID\n")
	}
}

// jobLine is one job as /jobs prints it.
func jobLine(in jobs.Info) string {
	state := fmt.Sprintf("running %s, pid %d", time.Since(in.Started).Round(time.Second), in.Pid)
	if !in.Running {
		state = in.Status
	}
	cmd := strings.Join(strings.Fields(in.Command), " ")
	if len(cmd) > 80 {
		cmd = cmd[:77] + "..."
	}
	return fmt.Sprintf("%s  %s  %d bytes unread  %s", in.ID, state, in.Unread, cmd)
}
