package bundle

import (
	"fmt"
	"strings"

	"github.com/dsh-go/dsh/errs"
)

// Invalid is the code of a bundle or .mcp.json that cannot be loaded.
const Invalid errs.Code = "BUNDLE_INVALID"

// problems collects every defect of one load, so an author fixes them in
// one pass rather than one per run.
type problems struct {
	list []string
}

// add records a problem in file (a path as the author knows it, relative
// to the bundle root) at field.
func (p *problems) add(file, field, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	switch {
	case field == "":
		p.list = append(p.list, fmt.Sprintf("%s: %s", file, msg))
	default:
		p.list = append(p.list, fmt.Sprintf("%s: %s: %s", file, field, msg))
	}
}

// err is nil without problems, else one BUNDLE_INVALID error whose
// Details["problems"] lists them.
func (p *problems) err(what, reason string) error {
	if len(p.list) == 0 {
		return nil
	}
	e := errs.New(Invalid, fmt.Sprintf("%s: %s", what, strings.Join(p.list, "; "))).WithReason(reason)
	e.Details = map[string]any{"problems": append([]string(nil), p.list...)}
	return e
}

// Problems returns the lines of an error from Load or ReadMCPJSON, one
// defect each; any other error is one line.
func Problems(err error) []string {
	if e, ok := err.(*errs.Error); ok {
		if list, ok := e.Details["problems"].([]string); ok {
			return list
		}
	}
	return []string{err.Error()}
}
