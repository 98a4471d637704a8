package celpolicy

import (
	"sync/atomic"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// Reading a string field of a rule's variables boxes a types.String into
// an interface: one allocation per field read per message, most of a
// policy's allocations. Yet the fields naming who and where — an entry
// point, a principal's kind, id and tenant, an agent, a mode, a tool —
// take the same few values message after message. fastFields keeps, per
// place a rule reads such a field, the last value it returned, and hands
// it back while the field still holds the same string: the check is a
// string comparison, the value is the very one the boxing would have
// made, so no rule can tell. Fields that differ per message (content,
// paths, commands, names) are boxed as before: caching them would add a
// store to every read and save nothing.

// fastFields wraps the provider ext.NativeTypes installs: it answers
// every question as that provider does (types, field names, so the type
// checking and its messages are unchanged), and gives the interned
// fields a getter of its own.
type fastFields struct {
	types.Provider
}

// withFastFields installs fastFields over the environment's provider; it
// goes after ext.NativeTypes.
func withFastFields() cel.EnvOption {
	return func(env *cel.Env) (*cel.Env, error) {
		return cel.CustomTypeProvider(&fastFields{Provider: env.CELTypeProvider()})(env)
	}
}

// interned are the fields fastFields caches, by CEL type name and field
// name: each reads the field from a pointer to its struct, as the
// interpreter hands it (the activation gives pointers, and a struct
// field of a pointer is read as a pointer into it).
var interned = map[string]map[string]func(any) (string, bool){
	typeName[Principal](): {
		"kind":   fieldOf(func(p *Principal) string { return p.Kind }),
		"id":     fieldOf(func(p *Principal) string { return p.ID }),
		"tenant": fieldOf(func(p *Principal) string { return p.Tenant }),
	},
	typeName[Source](): {
		"entry": fieldOf(func(s *Source) string { return s.Entry }),
	},
	typeName[Request](): {
		"agent": fieldOf(func(r *Request) string { return r.Agent }),
		"mode":  fieldOf(func(r *Request) string { return r.Mode }),
	},
	typeName[Call](): {
		"tool":  fieldOf(func(c *Call) string { return c.Tool }),
		"agent": fieldOf(func(c *Call) string { return c.Agent }),
	},
}

// fieldOf reads a string field from a *T or a T; false for anything else
// (then the wrapped provider's getter reads it).
func fieldOf[T any](get func(*T) string) func(any) (string, bool) {
	return func(obj any) (string, bool) {
		switch x := obj.(type) {
		case *T:
			if x != nil {
				return get(x), true
			}
		case T:
			return get(&x), true
		}
		return "", false
	}
}

// FindStructFieldType implements types.Provider: the wrapped provider's
// answer, with an interning getter for the fields in interned. It is
// called once per field a rule names, when the rule is planned, so each
// place a rule reads a field has its own cache.
func (p *fastFields) FindStructFieldType(structType, fieldName string) (*types.FieldType, bool) {
	ft, ok := p.Provider.FindStructFieldType(structType, fieldName)
	if ok && structType == typeName[Request]() && fieldName == "attachments" {
		return noAttachments(ft), true
	}
	read := interned[structType][fieldName]
	if !ok || read == nil {
		return ft, ok
	}
	out := *ft
	slow := ft.GetFrom
	// last holds a types.String as an interface value: returning it is
	// returning the boxed value itself.
	var last atomic.Value
	out.GetFrom = func(obj any) (any, error) {
		if rv, isVal := obj.(ref.Val); isVal {
			obj = rv.Value()
		}
		s, ok := read(obj)
		if !ok {
			return slow(obj)
		}
		if v := last.Load(); v != nil && string(v.(types.String)) == s {
			return v, nil
		}
		var v any = types.String(s)
		last.Store(v)
		return v, nil
	}
	return &out, true
}

// noAttachments gives request.attachments a getter that hands a message
// without attachments — most messages — one list made when the rule is
// planned, by the wrapped getter from a request without attachments: the
// same value it would make for each message (lists are immutable).
func noAttachments(ft *types.FieldType) *types.FieldType {
	out := *ft
	slow := ft.GetFrom
	none, err := slow(&Request{})
	if err != nil {
		return ft
	}
	out.GetFrom = func(obj any) (any, error) {
		if r, ok := obj.(*Request); ok && r != nil && r.Attachments == nil {
			return none, nil
		}
		return slow(obj)
	}
	return &out
}
