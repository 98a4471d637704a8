package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"

	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/llm"
)

// bodyLimit is the most bytes r's body may hold: serve.max_body_bytes,
// except for a multipart message, which may carry a message's worth of
// attachments (attachments.max_message_bytes) beside its text.
func (s *Server) bodyLimit(r *http.Request) int64 {
	if isMultipart(r) && r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/sessions/") && strings.HasSuffix(r.URL.Path, "/messages") {
		return s.uploadLimit()
	}
	return s.cfg.MaxBodyBytes
}

// uploadLimit is the body limit of a multipart message: the attachments
// of one message, plus what a JSON body may hold for the text and the
// form's own bytes.
func (s *Server) uploadLimit() int64 {
	per := s.o.Config.Attachments.PerMessage
	if s.o.Attachments != nil {
		per = s.o.Attachments.Limits().PerMessage
	}
	if per <= 0 {
		per = attachments.DefaultPerMessage
	}
	return per + s.cfg.MaxBodyBytes
}

func isMultipart(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "multipart/form-data"
}

// readMessage reads the body of POST .../messages: JSON (its parts in
// base64) or multipart/form-data (its files as "file" parts).
func (s *Server) readMessage(r *http.Request) (messageRequest, []llm.Part, error) {
	if isMultipart(r) {
		return s.readMultipart(r)
	}
	var req messageRequest
	if err := s.decode(r, &req, false); err != nil {
		return req, nil, err
	}
	var parts []llm.Part
	for i, p := range req.Parts {
		if p.Type != llm.PartImage && p.Type != llm.PartFile {
			return req, nil, fail(http.StatusBadRequest, BadRequest, "parts[%d] has type %q; a part is an \"image\" or a \"file\" (text goes in content)", i, p.Type)
		}
		if len(p.Data) == 0 {
			return req, nil, fail(http.StatusBadRequest, BadRequest, "parts[%d] (%q) has no data; send the file's bytes in base64 in data", i, p.Name)
		}
		parts = append(parts, llm.Part{Type: p.Type, MediaType: p.MediaType, Name: p.Name, Data: p.Data, Size: int64(len(p.Data))})
	}
	return req, parts, nil
}

// formFields are the text fields of a multipart message.
const formFields = `"request_id", "content", "mode" and "file" (repeatable)`

// readMultipart reads a multipart message part by part, so nothing but
// the bytes themselves is held: the text fields, then every "file".
func (s *Server) readMultipart(r *http.Request) (messageRequest, []llm.Part, error) {
	var req messageRequest
	mr, err := r.MultipartReader()
	if err != nil {
		return req, nil, fail(http.StatusBadRequest, BadRequest, "the multipart body of POST %s cannot be read: %v; send multipart/form-data with a boundary", r.URL.Path, err)
	}
	seen := map[string]bool{}
	var parts []llm.Part
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return req, parts, nil
		}
		if err != nil {
			return req, nil, s.multipartError(r, err)
		}
		name := part.FormName()
		data, err := io.ReadAll(part)
		part.Close()
		if err != nil {
			return req, nil, s.multipartError(r, err)
		}
		switch name {
		case "file":
			if part.FileName() == "" && len(data) == 0 {
				continue // a form's file input left empty
			}
			p, err := uploadedPart(data, part.Header.Get("Content-Type"), part.FileName())
			if err != nil {
				return req, nil, err
			}
			parts = append(parts, p)
			continue
		case "request_id", "content", "mode":
		default:
			return req, nil, fail(http.StatusBadRequest, BadRequest, "POST %s takes no form field %q; its fields are %s", r.URL.Path, name, formFields)
		}
		if seen[name] {
			return req, nil, fail(http.StatusBadRequest, BadRequest, "the form field %q comes twice; send it once (only \"file\" repeats)", name)
		}
		seen[name] = true
		switch name {
		case "request_id":
			req.RequestID = string(data)
		case "content":
			req.Content = string(data)
		case "mode":
			req.Mode = string(data)
		}
	}
}

func (s *Server) multipartError(r *http.Request, err error) error {
	if mb := new(http.MaxBytesError); errors.As(err, &mb) {
		return fail(http.StatusRequestEntityTooLarge, BodyTooLarge,
			"the upload is larger than %d bytes (attachments.max_message_bytes plus serve.max_body_bytes); attach fewer or smaller files, or raise attachments.max_message_bytes", s.uploadLimit())
	}
	return fail(http.StatusBadRequest, BadRequest, "the multipart body of POST %s is malformed: %v; send multipart/form-data with fields %s", r.URL.Path, err, formFields)
}

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
