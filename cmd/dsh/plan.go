package main

import (
	stdctx "context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/dsh-go/dsh/plugins/tools/plan"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// planHelp is the /help text of /plan and /todos.
const planHelp = "/plan        enter plan mode (only tools that read run) and show the plan\n" +
	"/plan off    leave plan mode (you approve it by saying so)\n" +
	"/plan edit FILE  replace the plan with FILE's Markdown (edit it in your editor first)\n" +
	"/todos       show the agent's todo list\n"

// isPlanCommand reports whether line is /plan or /todos.
func isPlanCommand(line string) bool {
	return line == "/plan" || strings.HasPrefix(line, "/plan ") || line == "/todos"
}

// planCommand runs /plan, /plan off, /plan show, /plan edit FILE and
// /todos for session id; workspace resolves a relative FILE.
func planCommand(svc sessions.Service, id, workspace, line string, out, diag io.Writer) {
	args := strings.Fields(line)
	req := sessions.PlanRequest{Op: sessions.PlanGet, By: "cli"}
	switch {
	case args[0] == "/todos":
	case len(args) == 1:
		req.Op = sessions.PlanEnter
	case args[1] == "off" && len(args) == 2:
		req.Op = sessions.PlanLeave
	case args[1] == "show" && len(args) == 2:
	case args[1] == "edit" && len(args) == 3:
		path := args[2]
		if !filepath.IsAbs(path) {
			path = filepath.Join(workspace, path)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(diag, "dsh: /plan edit: %v; name a Markdown file holding the whole new plan\n", err)
			return
		}
		req.Op, req.Plan = sessions.PlanEdit, string(b)
	default:
		fmt.Fprint(diag, "usage: /plan, /plan off, /plan show, /plan edit FILE, /todos\n")
		return
	}
	st, err := svc.Plan(stdctx.Background(), id, req)
	if err != nil {
		fmt.Fprintf(diag, "dsh: %s: %v\n", args[0], err)
		return
	}
	if args[0] == "/todos" {
		fmt.Fprintln(out, plan.Render(st.Todos))
		return
	}
	fmt.Fprint(out, planStatus(st))
}

// planStatus shows the plan state: the mode, then the plan.
func planStatus(st session.PlanState) string {
	var b strings.Builder
	if st.Planning {
		b.WriteString("plan mode: on — only tools that read run; the agent proposes its plan with exit_plan_mode\n")
	} else {
		b.WriteString("plan mode: off\n")
	}
	if st.Plan != "" {
		fmt.Fprintf(&b, "plan (%s):\n%s\n", st.PlanStatus, strings.TrimRight(st.Plan, "\n"))
	}
	return b.String()
}

// planEventText is what a plan/updated event shows on the terminal, ""
// for nothing.
func planEventText(p *session.PlanState) string {
	if p == nil {
		return ""
	}
	switch p.Change {
	case "todos":
		return "todos:\n" + plan.Render(p.Todos) + "\n"
	case "entered":
		return "(plan mode on: only tools that read run until you approve a plan)\n"
	case "left":
		return "(plan mode off)\n"
	case "approved":
		return "(plan approved: plan mode off)\n"
	case "rejected":
		return "(plan rejected: still in plan mode)\n"
	case "proposed", "edited":
		return fmt.Sprintf("plan (%s):\n%s\n", p.PlanStatus, strings.TrimRight(p.Plan, "\n"))
	}
	return ""
}
