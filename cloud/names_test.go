package cloud

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

var nameRE = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)

func TestTemplateName(t *testing.T) {
	a := TemplateName(TemplateSpec{Release: "1.34.4", Base: "base"})
	assert.Regexp(t, `^molt-1-34-4-[0-9a-f]{8}$`, a)
	assert.Equal(t, a, TemplateName(TemplateSpec{Release: "1.34.4", Base: "base"}))
	assert.NotEqual(t, a, TemplateName(TemplateSpec{Release: "1.34.5", Base: "base"}))
	assert.NotEqual(t, a, TemplateName(TemplateSpec{Release: "1.34.4", Base: "other"}))
	assert.NotEqual(t, a, TemplateName(TemplateSpec{Release: "1.34.4"}))
	for _, r := range []string{"", "V1.34.4+Build.7", "--", strings.Repeat("9.", 80)} {
		n := TemplateName(TemplateSpec{Release: r})
		assert.Regexp(t, nameRE, n, "release %q", r)
	}
}

func TestRequestID(t *testing.T) {
	id := RequestID("u1/start/s1", "createInstances")
	assert.Regexp(t, `^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, id)
	assert.Equal(t, id, RequestID("u1/start/s1", "createInstances"))
	assert.NotEqual(t, id, RequestID("u1/start/s1", "deleteInstances"))
}
