package execplugin

import (
	"bytes"
	"fmt"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/wire"
	"github.com/dsh-go/dsh/services/tools"
)

// approvalCodec is how tools/approve travels. Its rules, in EVENTS.md:
// next may change call.arguments (and a call passed on changed runs
// changed, unless a later policy rewrites it again); a refusal is a deny
// verdict, which the model reads with the plugin's reason; and a policy
// plugin that does not answer — down, crashed, too slow, broken — denies
// the call naming itself, unless its entry says on_unavailable: skip.
var approvalCodec = codec[tools.Approval, tools.Verdict]{
	encode: wire.Approval, decode: wire.ApplyApproval,
	encodeResult: wire.Verdict, decodeResult: wire.VerdictFrom,
	scope: func(a tools.Approval) string { return a.Call.AgentID },
	failClosed: func(plugin string, err error) (tools.Verdict, bool) {
		if errs.HasCode(err, errs.NextMisuse) {
			return tools.Verdict{}, false
		}
		return tools.Verdict{Decision: tools.Deny, Source: plugin,
			Reason: fmt.Sprintf("the approval policy plugin %s did not answer usably, and an approval policy that cannot decide does not allow (%v)", plugin, err)}, true
	},
	attribute: func(v tools.Verdict, plugin string) tools.Verdict {
		if v.Source == "" {
			v.Source = plugin
		}
		return v
	},
	passedOn: func(orig, passed tools.Approval, v tools.Verdict) tools.Verdict {
		if len(v.Arguments) == 0 && v.Decision != tools.Deny && !bytes.Equal(orig.Call.Arguments, passed.Call.Arguments) {
			v.Arguments = passed.Call.Arguments
		}
		return v
	},
}
