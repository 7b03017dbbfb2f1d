package httpapi

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/moltproject/molt/api"
)

// TestBodyMediaTypesAndShapes: a JSON body is application/json, bare or
// with charset=utf-8, and an object; a route without parameters takes no
// body or {}. Everything else is refused with its rule, the same way on
// every route that reads a body (each decodes with decode or decodeNone).
func TestBodyMediaTypesAndShapes(t *testing.T) {
	type thing struct {
		A string `json:"a"`
	}
	for _, tc := range []struct {
		name, ctype, body string
		none              bool // decodeNone, not decode
		status            int  // 0: accepted
		rule              string
	}{
		{"json", "application/json", `{"a":"x"}`, false, 0, ""},
		{"utf-8", "application/json; charset=utf-8", `{"a":"x"}`, false, 0, ""},
		{"UTF-8 upper case", "Application/JSON; Charset=\"UTF-8\"", `{"a":"x"}`, false, 0, ""},
		{"utf-16", "application/json; charset=utf-16", `{"a":"x"}`, false, 415, "content-type"},
		{"latin-1", "application/json; charset=iso-8859-1", `{"a":"x"}`, false, 415, "content-type"},
		{"another parameter", "application/json; profile=x", `{"a":"x"}`, false, 415, "content-type"},
		{"no media type", "", `{"a":"x"}`, false, 415, "content-type"},
		{"text", "text/plain", `{"a":"x"}`, false, 415, "content-type"},
		{"unparsable", "application/json;;", `{"a":"x"}`, false, 415, "content-type"},
		{"null", "application/json", ` null `, false, 400, "request-body"},
		{"empty", "application/json", ``, false, 400, "request-body"},
		{"unknown field", "application/json", `{"b":1}`, false, 400, "request-body"},
		{"none: no body", "", ``, true, 0, ""},
		{"none: no body, declared", "application/json", ``, true, 0, ""},
		{"none: {}", "application/json", `{}`, true, 0, ""},
		{"none: {} undeclared", "", `{}`, true, 415, "content-type"},
		{"none: {} in utf-16", "application/json; charset=utf-16", `{}`, true, 415, "content-type"},
		{"none: a field", "application/json", `{"key":"k2"}`, true, 400, "request-body"},
		{"none: null", "application/json", `null`, true, 400, "request-body"},
		{"none: an array", "application/json", `[]`, true, 400, "request-body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/x", strings.NewReader(tc.body))
			if tc.ctype != "" {
				r.Header.Set("Content-Type", tc.ctype)
			}
			w := httptest.NewRecorder()
			var err error
			if tc.none {
				err = decodeNone(w, r)
			} else {
				var v thing
				err = decode(w, r, &v)
			}
			if tc.status == 0 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			p := problemFor(err)
			require.Equal(t, tc.status, p.Status, err.Error())
			require.Equal(t, tc.rule, p.Rule)
			if tc.status == 415 {
				require.Equal(t, api.ProblemTypeBase+api.ProblemUnsupportedMedia, p.Type)
			}
		})
	}
}
