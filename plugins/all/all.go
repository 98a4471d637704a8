// Package all links every built-in plugin into a binary. Import it for its
// side effect, as cmd/dsh does:
//
//	import _ "github.com/dsh-go/dsh/plugins/all"
package all

import (
	_ "github.com/dsh-go/dsh/plugins/admission/maxpending"
	_ "github.com/dsh-go/dsh/plugins/admission/ratelimit"
	_ "github.com/dsh-go/dsh/plugins/admission/readygate"
	_ "github.com/dsh-go/dsh/plugins/budget"
	_ "github.com/dsh-go/dsh/plugins/commands"
	_ "github.com/dsh-go/dsh/plugins/hooks"
	_ "github.com/dsh-go/dsh/plugins/llm/anthropic"
	_ "github.com/dsh-go/dsh/plugins/llm/openai"
	_ "github.com/dsh-go/dsh/plugins/llm/scripted"
	_ "github.com/dsh-go/dsh/plugins/lsp"
	_ "github.com/dsh-go/dsh/plugins/mcp"
	_ "github.com/dsh-go/dsh/plugins/policy/celpolicy"
	_ "github.com/dsh-go/dsh/plugins/policy/reviewer"
	_ "github.com/dsh-go/dsh/plugins/prompt/agentsmd"
	_ "github.com/dsh-go/dsh/plugins/session/checkpoints"
	_ "github.com/dsh-go/dsh/plugins/session/compact"
	_ "github.com/dsh-go/dsh/plugins/session/jsonl"
	_ "github.com/dsh-go/dsh/plugins/session/nats"
	_ "github.com/dsh-go/dsh/plugins/session/sign"
	_ "github.com/dsh-go/dsh/plugins/skills"
	_ "github.com/dsh-go/dsh/plugins/tools/bash"
	_ "github.com/dsh-go/dsh/plugins/tools/clock"
	_ "github.com/dsh-go/dsh/plugins/tools/files"
	_ "github.com/dsh-go/dsh/plugins/tools/permission"
	_ "github.com/dsh-go/dsh/plugins/tools/plan"
	_ "github.com/dsh-go/dsh/plugins/tools/subagent"
	_ "github.com/dsh-go/dsh/plugins/tools/web"
)
