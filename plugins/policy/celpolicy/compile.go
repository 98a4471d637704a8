package celpolicy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
	"github.com/dsh-go/dsh/errs"
)

// Stages.
const (
	stageAdmission = "admission"
	stageApproval  = "approval"
)

// Actions a rule may take, per stage.
var actions = map[string][]string{
	stageAdmission: {"admit", "hold", "refuse"},
	stageApproval:  {"allow", "deny", "ask"},
}

// envs are the two stages' CEL environments, built once: the variables a
// rule of each stage may name, typed.
var envs = sync.OnceValues(func() (map[string]*cel.Env, error) { return newEnvs(true) })

// newEnvs builds the environments; fast installs fastFields (without it,
// the tests' reference).
func newEnvs(fast bool) (map[string]*cel.Env, error) {
	base := []cel.EnvOption{
		ext.NativeTypes(reflect.TypeFor[Principal](), reflect.TypeFor[Source](), reflect.TypeFor[Attachment](),
			reflect.TypeFor[Request](), reflect.TypeFor[Call](), ext.ParseStructTags(true)),
		ext.Strings(), ext.Lists(), ext.Sets(),
		cel.Variable("source", cel.ObjectType(typeName[Source]())),
		cel.Variable("params", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("now", cel.TimestampType),
	}
	if fast {
		base = append(base, withFastFields())
	}
	adm, err := cel.NewEnv(append(base, cel.Variable("request", cel.ObjectType(typeName[Request]())))...)
	if err != nil {
		return nil, err
	}
	app, err := cel.NewEnv(append(base,
		cel.Variable("call", cel.ObjectType(typeName[Call]())),
		cel.Variable("sources", cel.ListType(cel.ObjectType(typeName[Source]()))))...)
	if err != nil {
		return nil, err
	}
	return map[string]*cel.Env{stageAdmission: adm, stageApproval: app}, nil
}

// typeName is the CEL name ext.NativeTypes gives a Go type: its package's
// name, a dot, its name.
func typeName[T any]() string {
	t := reflect.TypeFor[T]()
	pkg := t.PkgPath()
	return pkg[strings.LastIndex(pkg, "/")+1:] + "." + t.Name()
}

// rule is a compiled rule.
type rule struct {
	Rule
	when    cel.Program
	message cel.Program // nil: Message is the message
}

// ruleSet is one version of a policy: every rule compiled and checked.
// It is immutable once built; a reload builds a new one and swaps it in.
type ruleSet struct {
	admission []rule
	approval  []rule
	// firstAdmission and firstApproval evaluate a stage's rules in one
	// or two programs (see stage): one evaluation instead of one per
	// rule; when it fails (a rule could not be evaluated), the rules are
	// run one by one to tell which, under the failure policy.
	firstAdmission, firstApproval *stage
	// params are the params as CEL values, converted once: a rule's
	// "x in params.list" then compares values instead of converting the
	// list's Go elements on every evaluation.
	params ref.Val
	fail   bool // failure policy: an evaluation error refuses/denies
	// usesNow says a rule reads now: the clock is read only then.
	usesNow bool
	// version is a digest of the rules, params and failure policy.
	version string
	// origin says where the rules came from, for logs: the config, or
	// a file.
	origin string
}

// pathError is a problem at a key path inside the plugin's config, so
// dsh config check can point at its line (see config's ConfigPath).
type pathError struct {
	path string
	err  error
}

func (e *pathError) Error() string      { return e.path + ": " + e.err.Error() }
func (e *pathError) Unwrap() error      { return e.err }
func (e *pathError) ConfigPath() string { return e.path }

// compile checks and compiles rules, params and the failure policy; where
// says where each rule's key path points in errors (a config key, or a
// file and line by lineOf).
func compile(rules Rules, failurePolicy string, origin string, lineOf func(path string) string) (*ruleSet, error) {
	es, err := envs()
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "policy.cel: the CEL environment cannot be built")
	}
	rs := &ruleSet{origin: origin}
	params := rules.Params
	if params == nil {
		params = map[string]any{}
	}
	rs.params = celValue(params)
	if types.IsError(rs.params) {
		return nil, problem(lineOf, "params", fmt.Errorf("the params cannot be CEL values: %v", rs.params))
	}
	switch failurePolicy {
	case "", "fail":
		rs.fail = true
	case "ignore":
	default:
		return nil, problem(lineOf, "failure_policy", fmt.Errorf("%q is not a failure policy; use fail (the default: a rule that cannot be evaluated refuses or denies) or ignore (it is skipped)", failurePolicy))
	}
	names := map[string]string{}
	for _, st := range []struct {
		stage string
		list  []Rule
		out   *[]rule
	}{{stageAdmission, rules.Admission, &rs.admission}, {stageApproval, rules.Approval, &rs.approval}} {
		for i, r := range st.list {
			at := fmt.Sprintf("%s[%d]", st.stage, i)
			c, err := compileRule(es[st.stage], st.stage, r)
			if err != nil {
				return nil, problem(lineOf, at+"."+err.key, err.err)
			}
			if prev, dup := names[r.Name]; dup {
				return nil, problem(lineOf, at+".name", fmt.Errorf("rule name %q is also %s; names must be unique, they are the reasons decisions give", r.Name, prev))
			}
			names[r.Name] = at
			*st.out = append(*st.out, c)
		}
	}
	for _, r := range rules.Admission {
		// A rule that does not name now may still be given it: a
		// conservative test of the text is enough.
		rs.usesNow = rs.usesNow || strings.Contains(r.When, "now") || strings.Contains(r.MessageExpression, "now")
	}
	if rs.firstAdmission, err = firstOf(es[stageAdmission], rs.admission); err != nil {
		return nil, problem(lineOf, stageAdmission, err)
	}
	if rs.firstApproval, err = firstOf(es[stageApproval], rs.approval); err != nil {
		return nil, problem(lineOf, stageApproval, err)
	}
	if len(rs.admission)+len(rs.approval) == 0 {
		return nil, problem(lineOf, "", fmt.Errorf("the policy has no rules; add admission: or approval: rules (see docs/policy.md)"))
	}
	sum := sha256.New()
	json.NewEncoder(sum).Encode(struct {
		R Rules
		F bool
	}{rules, rs.fail})
	rs.version = "sha256:" + hex.EncodeToString(sum.Sum(nil))[:16]
	return rs, nil
}

// celValue converts a decoded YAML or JSON value to a CEL value whole.
func celValue(v any) ref.Val {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[ref.Val]ref.Val, len(x))
		for k, e := range x {
			m[types.String(k)] = celValue(e)
		}
		return types.NewRefValMap(types.DefaultTypeAdapter, m)
	case []any:
		l := make([]ref.Val, len(x))
		for i, e := range x {
			l[i] = celValue(e)
		}
		return types.NewRefValList(types.DefaultTypeAdapter, l)
	case int:
		return types.Int(x)
	}
	return types.DefaultTypeAdapter.NativeToValue(v)
}

func problem(lineOf func(string) string, path string, err error) error {
	if lineOf != nil {
		return fmt.Errorf("%s%w", lineOf(path), err)
	}
	return &pathError{path: path, err: err}
}

type keyError struct {
	key string
	err error
}

func compileRule(env *cel.Env, stage string, r Rule) (rule, *keyError) {
	if !ruleName.MatchString(r.Name) {
		return rule{}, &keyError{"name", fmt.Errorf("rule name %q must be 1-64 letters, digits, '.', '_' or '-': it is the reason its decisions give (policy/<name>)", r.Name)}
	}
	if !contains(actions[stage], r.Action) {
		return rule{}, &keyError{"action", fmt.Errorf("rule %q: action %q is not an %s action; use one of %s", r.Name, r.Action, stage, strings.Join(actions[stage], ", "))}
	}
	if strings.TrimSpace(r.When) == "" {
		return rule{}, &keyError{"when", fmt.Errorf("rule %q has no when: expression; write the CEL condition under which it %ss (e.g. source.entry == \"webhook\")", r.Name, r.Action)}
	}
	when, err := program(env, r.When, cel.BoolType)
	if err != nil {
		return rule{}, &keyError{"when", fmt.Errorf("rule %q: when: %w", r.Name, err)}
	}
	c := rule{Rule: r, when: when}
	if r.MessageExpression != "" {
		if r.Message != "" {
			return rule{}, &keyError{"message_expression", fmt.Errorf("rule %q has both message and message_expression; keep one", r.Name)}
		}
		if c.message, err = program(env, r.MessageExpression, cel.StringType); err != nil {
			return rule{}, &keyError{"message_expression", fmt.Errorf("rule %q: message_expression: %w", r.Name, err)}
		}
	}
	if r.MaxHold < 0 {
		return rule{}, &keyError{"max_hold", fmt.Errorf("rule %q: max_hold cannot be negative", r.Name)}
	}
	return c, nil
}

// stage is a stage's rules compiled whole. any is w0 || w1 || … : most
// messages and calls match no rule, and a disjunction answers that in one
// pass, cheaper than the conditional chain which returns an index through
// a result boxed at each level. which is (w0) ? 0 : (w1) ? 1 : … : -1,
// evaluated only when any holds or fails: CEL evaluates a conditional's
// branches lazily, so rules are tried in order and none after the first
// that holds is evaluated, as in the rule-by-rule loop.
type stage struct {
	any, which cel.Program
}

// firstOf compiles a stage's rules into its two programs.
func firstOf(env *cel.Env, rules []rule) (*stage, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	var or, chain strings.Builder
	for i, r := range rules {
		if i > 0 {
			or.WriteString(" || ")
		}
		fmt.Fprintf(&or, "(%s)", r.When)
		fmt.Fprintf(&chain, "(%s) ? %d : ", r.When, i)
	}
	chain.WriteString("-1")
	st := &stage{}
	for _, c := range []struct {
		expr string
		out  *cel.Program
	}{{or.String(), &st.any}, {chain.String(), &st.which}} {
		ast, iss := env.Compile(c.expr)
		if iss.Err() != nil {
			return nil, fmt.Errorf("the rules compile one by one but not together: %v", iss.Err())
		}
		p, err := env.Program(ast, cel.EvalOptions(cel.OptOptimize))
		if err != nil {
			return nil, err
		}
		*c.out = p
	}
	return st, nil
}

// program compiles and type checks one expression, which must be of type
// want.
func program(env *cel.Env, expr string, want *cel.Type) (cel.Program, error) {
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("%s", strings.TrimSpace(iss.Err().Error()))
	}
	if !ast.OutputType().IsExactType(want) && ast.OutputType() != types.DynType {
		return nil, fmt.Errorf("%q is of type %s, and it must be a %s", expr, ast.OutputType(), want)
	}
	return env.Program(ast, cel.EvalOptions(cel.OptOptimize))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// defaultMaxHold bounds a hold rule's wait; defaultRecheck is how often
// a held message's rule is evaluated again.
const (
	defaultMaxHold = time.Minute
	defaultRecheck = time.Second
)
