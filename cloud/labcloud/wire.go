package labcloud

import (
	"errors"
	"fmt"

	"github.com/moltproject/molt/cloud"
)

// The wire: every Provider method is POST /v1/<method> with a JSON call
// body, answered by a JSON result. A refusal carries the sentinel it wraps
// by name (errorBody.Kind), so errors.Is works on the client's side as it
// does on the server's.

// Methods, as the last path element.
const (
	mEnsureTemplate    = "ensureTemplate"
	mGetGroup          = "getGroup"
	mCreateGroup       = "createGroup"
	mDeleteGroup       = "deleteGroup"
	mSetTemplate       = "setTemplate"
	mResize            = "resize"
	mSetAutoscaling    = "setAutoscaling"
	mListInstances     = "listInstances"
	mCreateInstances   = "createInstances"
	mDeleteInstances   = "deleteInstances"
	mRecreateInstances = "recreateInstances"
	mQuota             = "quota"
)

// call is the body of every request; each method reads the fields it
// needs.
type call struct {
	Zone        string       `json:"zone,omitempty"`
	Group       string       `json:"group,omitempty"`
	Release     string       `json:"release,omitempty"`
	Base        string       `json:"base,omitempty"`
	Template    string       `json:"template,omitempty"`
	Size        int          `json:"size,omitempty"`
	Names       []string     `json:"names,omitempty"`
	Autoscaling *autoscaling `json:"autoscaling,omitempty"`
	Req         string       `json:"req,omitempty"`
}

func (c call) group() cloud.GroupRef { return cloud.GroupRef{Zone: c.Zone, Name: c.Group} }

// result is the body of every answer.
type result struct {
	Template  string     `json:"template,omitempty"`
	Group     *group     `json:"group,omitempty"`
	Instances []instance `json:"instances,omitempty"`
	Quota     *quota     `json:"quota,omitempty"`
	Error     *errorBody `json:"error,omitempty"`
}

type group struct {
	Zone        string      `json:"zone"`
	Name        string      `json:"name"`
	TargetSize  int         `json:"targetSize"`
	Template    string      `json:"template"`
	Stable      bool        `json:"stable"`
	Autoscaling autoscaling `json:"autoscaling"`
}

type autoscaling struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

type instance struct {
	Name       string               `json:"name"`
	ProviderID string               `json:"providerID"`
	Template   string               `json:"template"`
	Status     cloud.InstanceStatus `json:"status"`
	LastError  *errorBody           `json:"lastError,omitempty"`
}

type quota struct {
	Limit int `json:"limit"`
	Usage int `json:"usage"`
}

// errorBody is an error on the wire: the sentinel's name and the message.
type errorBody struct {
	Kind    string `json:"kind,omitempty"`
	Message string `json:"message"`
}

// kinds names the sentinels on the wire.
var kinds = []struct {
	name string
	err  error
}{
	{"quota", cloud.ErrQuota},
	{"stockout", cloud.ErrStockout},
	{"notFound", cloud.ErrNotFound},
	{"conflict", cloud.ErrConflict},
	{"transient", cloud.ErrTransient},
	{"invalid", cloud.ErrInvalid},
}

func toBody(err error) *errorBody {
	if err == nil {
		return nil
	}
	b := &errorBody{Message: err.Error()}
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			b.Kind = k.name
			break
		}
	}
	return b
}

// remoteError is an error the server reported: its message as the server
// wrote it, wrapping the sentinel it named (nil for none).
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

func fromBody(b *errorBody) error {
	if b == nil {
		return nil
	}
	e := &remoteError{msg: "lab: " + b.Message}
	for _, k := range kinds {
		if k.name == b.Kind {
			e.sentinel = k.err
		}
	}
	if b.Kind != "" && e.sentinel == nil {
		e.msg = fmt.Sprintf("%s (kind %q)", e.msg, b.Kind)
	}
	return e
}

func toGroup(g cloud.Group) *group {
	return &group{Zone: g.Zone, Name: g.Name, TargetSize: g.TargetSize, Template: g.Template, Stable: g.Stable,
		Autoscaling: autoscaling{Min: g.Autoscaling.Min, Max: g.Autoscaling.Max}}
}

func fromGroup(g *group) cloud.Group {
	return cloud.Group{GroupRef: cloud.GroupRef{Zone: g.Zone, Name: g.Name}, TargetSize: g.TargetSize, Template: g.Template,
		Stable: g.Stable, Autoscaling: cloud.Autoscaling{Min: g.Autoscaling.Min, Max: g.Autoscaling.Max}}
}

func toInstances(in []cloud.Instance) []instance {
	out := make([]instance, 0, len(in))
	for _, i := range in {
		out = append(out, instance{Name: i.Name, ProviderID: i.ProviderID, Template: i.Template, Status: i.Status, LastError: toBody(i.LastError)})
	}
	return out
}

func fromInstances(in []instance) []cloud.Instance {
	out := make([]cloud.Instance, 0, len(in))
	for _, i := range in {
		out = append(out, cloud.Instance{Name: i.Name, ProviderID: i.ProviderID, Template: i.Template, Status: i.Status, LastError: fromBody(i.LastError)})
	}
	return out
}
