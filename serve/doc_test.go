package serve_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/serve"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// docURL is where the tests register the OpenAPI document with the schema
// compiler; its schemas refer to each other by fragments of it.
const docURL = "https://dsh.invalid/openapi.json"

// apiDoc checks responses against the OpenAPI document.
type apiDoc struct {
	raw   map[string]any
	paths []docPath
	mu    sync.Mutex
	c     *jsonschema.Compiler
	cache map[string]*jsonschema.Schema
}

type docPath struct {
	template string
	re       *regexp.Regexp
}

func loadDoc(t testing.TB) *apiDoc {
	t.Helper()
	d := &apiDoc{cache: map[string]*jsonschema.Schema{}, c: jsonschema.NewCompiler()}
	if err := json.Unmarshal(serve.OpenAPI, &d.raw); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(serve.OpenAPI))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.c.AddResource(docURL, inst); err != nil {
		t.Fatal(err)
	}
	for tmpl := range d.raw["paths"].(map[string]any) {
		re := regexp.QuoteMeta(tmpl)
		re = regexp.MustCompile(`\\\{[a-z]+\\\}`).ReplaceAllString(re, `[^/]+`)
		if strings.HasSuffix(tmpl, "{path}") {
			re = strings.TrimSuffix(re, `[^/]+`) + `.+`
		}
		d.paths = append(d.paths, docPath{tmpl, regexp.MustCompile("^" + re + "$")})
	}
	return d
}

// template returns the documented path that path is an instance of.
func (d *apiDoc) template(path string) (string, bool) {
	for _, p := range d.paths {
		if p.re.MatchString(path) {
			return p.template, true
		}
	}
	return "", false
}

func (d *apiDoc) operation(tmpl, method string) (map[string]any, bool) {
	item, _ := d.raw["paths"].(map[string]any)[tmpl].(map[string]any)
	op, ok := item[strings.ToLower(method)].(map[string]any)
	return op, ok
}

// schema compiles the schema at ref (a fragment of the document).
func (d *apiDoc) schema(t testing.TB, ref string) *jsonschema.Schema {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.cache[ref]; ok {
		return s
	}
	s, err := d.c.Compile(docURL + ref)
	if err != nil {
		t.Fatalf("compiling %s: %v", ref, err)
	}
	d.cache[ref] = s
	return s
}

// validate checks body against the schema at ref.
func (d *apiDoc) validate(t testing.TB, ref string, body []byte, what string) {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Errorf("%s: the body is not JSON: %v: %q", what, err, body)
		return
	}
	if err := d.schema(t, ref).Validate(inst); err != nil {
		t.Errorf("%s does not match %s: %v\nbody: %s", what, ref, err, body)
	}
}

// check validates one response: its status must be documented for the
// route, and a JSON body must match the documented schema.
func (d *apiDoc) check(t testing.TB, method, path string, r response) {
	t.Helper()
	what := method + " " + path + " → " + strconv.Itoa(r.status)
	tmpl, ok := d.template(path)
	if !ok {
		if r.status != http.StatusNotFound {
			t.Errorf("%s: an undocumented path answered", what)
		}
		d.validate(t, "#/components/schemas/Error", r.body, what)
		return
	}
	op, ok := d.operation(tmpl, method)
	if !ok {
		if r.status != http.StatusMethodNotAllowed && r.status != http.StatusForbidden && r.status != http.StatusNoContent {
			t.Errorf("%s: an undocumented method answered", what)
		}
		if r.status != http.StatusNoContent {
			d.validate(t, "#/components/schemas/Error", r.body, what)
		}
		return
	}
	resp, ok := op["responses"].(map[string]any)[strconv.Itoa(r.status)].(map[string]any)
	if !ok {
		t.Errorf("%s: the status is not documented for %s %s", what, method, tmpl)
		return
	}
	ref := ""
	if rr, isRef := resp["$ref"].(string); isRef {
		ref = rr + "/content/application~1json/schema"
		resp = d.resolve(rr)
	}
	content, _ := resp["content"].(map[string]any)
	js, isJSON := content["application/json"].(map[string]any)
	if !isJSON {
		if r.status == http.StatusNoContent && len(r.body) > 0 {
			t.Errorf("%s: a body on 204", what)
		}
		return
	}
	if ref == "" {
		sch, _ := js["schema"].(map[string]any)
		sref, isRef := sch["$ref"].(string)
		if !isRef {
			// Inline schemas are plain objects (the document, a hook's
			// answer): JSON is all they say.
			if !json.Valid(r.body) {
				t.Errorf("%s: not JSON: %q", what, r.body)
			}
			return
		}
		ref = sref
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: content type %q, documented application/json", what, ct)
	}
	d.validate(t, ref, r.body, what)
}

func (d *apiDoc) resolve(ref string) map[string]any {
	var cur any = d.raw
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		cur = cur.(map[string]any)[part]
	}
	m, _ := cur.(map[string]any)
	return m
}
