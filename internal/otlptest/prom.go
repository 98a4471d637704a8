package otlptest

import (
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape reads a Prometheus endpoint with the Prometheus text parser, as
// a Prometheus server would; a page it cannot parse fails the test.
func Scrape(t testing.TB, req *http.Request) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", req.URL, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s does not parse as the Prometheus text format: %v", req.URL, err)
	}
	return fams
}

// Counter sums the counter name over the series whose labels include
// every pair of labels (name, value, name, value…).
func Counter(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	sum := 0.0
	for _, m := range f.GetMetric() {
		if matches(m, labels) && m.GetCounter() != nil {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

func matches(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}
