package hooks

import "testing"

// TestPlainUnescapesAndKeepsOrderAndNumbers: the arguments a hook reads
// are the model's, key for key and digit for digit; only escapes change.
func TestPlainUnescapesAndKeepsOrderAndNumbers(t *testing.T) {
	cases := map[string]string{
		`{"z":"a \u003e b \u0026\u0026 c","a":[1.50,2e3,{"q":"\u003c"}],"n":null,"t":true}`: `{"z":"a > b && c","a":[1.50,2e3,{"q":"<"}],"n":null,"t":true}`,
		`{"s":"\u00e9\n\"x\""}`:  `{"s":"é\n\"x\""}`,
		`{"broken":"\u003e"`:     `{"broken":"\u003e"`,
		`{"a":"\u003e"} {"b":1}`: `{"a":"\u003e"} {"b":1}`,
		`{"plain":"no escapes"}`: `{"plain":"no escapes"}`,
	}
	for in, want := range cases {
		if got := string(plain([]byte(in))); got != want {
			t.Errorf("plain(%s) = %s, want %s", in, got, want)
		}
	}
}
