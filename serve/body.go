package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
)

// decode reads r's body into v, a pointer to a struct whose json tags are
// the fields the route takes. An empty body is allowed when every field
// is optional. A body that is not that JSON object is refused with a
// message that names the fault and the fields the route takes.
func (s *Server) decode(r *http.Request, v any, emptyOK bool) error {
	route := r.Method + " " + r.URL.Path
	fields := fieldNames(v)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		return fail(http.StatusBadRequest, BadRequest, "the body of %s holds more than one JSON value; send one object", route)
	}
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			if mb := new(http.MaxBytesError); errors.As(terr, &mb) {
				return s.tooLarge()
			}
			return fail(http.StatusBadRequest, BadRequest, "the body of %s has text after its JSON object; send one object", route)
		}
		return nil
	}
	var (
		mb     *http.MaxBytesError
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &mb):
		return s.tooLarge()
	case errors.Is(err, io.EOF):
		if emptyOK {
			return nil
		}
		return fail(http.StatusBadRequest, BadRequest, "the body of %s is empty; send a JSON object with %s", route, fields)
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
		return fail(http.StatusBadRequest, BadRequest, "the body of %s is not valid JSON (%v); send a JSON object with %s", route, err, fields)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return fail(http.StatusBadRequest, BadRequest, "the body of %s is a JSON %s; send a JSON object with %s", route, typ.Value, fields)
		}
		return fail(http.StatusBadRequest, BadRequest, "field %q of %s is a JSON %s; it must be a %s", typ.Field, route, typ.Value, jsonKind(typ.Type))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.TrimPrefix(err.Error(), "json: unknown field ")
		return fail(http.StatusBadRequest, BadRequest, "%s takes no field %s; its fields are %s", route, name, fields)
	}
	return fail(http.StatusBadRequest, BadRequest, "the body of %s cannot be read: %v", route, err)
}

func (s *Server) tooLarge() error {
	return fail(http.StatusRequestEntityTooLarge, BodyTooLarge,
		"the request body is larger than %d bytes (serve.max_body_bytes); send less, or raise serve.max_body_bytes", s.cfg.MaxBodyBytes)
}

// fieldNames lists the json names of the struct v points to.
func fieldNames(v any) string {
	t := reflect.TypeOf(v).Elem()
	var names []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names = append(names, fmt.Sprintf("%q", name))
		}
	}
	if len(names) == 0 {
		return "no fields"
	}
	return strings.Join(names, ", ")
}

func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Bool:
		return "boolean"
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Float64, reflect.Uint, reflect.Uint64:
		return "number"
	}
	return t.String()
}
