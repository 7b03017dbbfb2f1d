package gce

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/option"

	"github.com/moltproject/molt/cloud"
	"github.com/moltproject/molt/internal/clock"
)

// Config configures a Provider.
type Config struct {
	// Project is the Google Cloud project of the groups and templates.
	Project string
	// Endpoint is the Compute API's base URL, for a test server or a
	// private endpoint ("http://127.0.0.1:8080"); empty: Google's.
	Endpoint string
	// ClientOptions are given to the Compute client after the endpoint:
	// credentials (by default the application-default chain), an HTTP
	// client, option.WithoutAuthentication for a test server.
	ClientOptions []option.ClientOption
	// OperationTimeout bounds the wait for one operation; 0:
	// cloud.DefaultOperationTimeout.
	OperationTimeout time.Duration
	// PollInterval is the pause between two waits on an operation that
	// returned before it was DONE (each wait blocks on the server for up
	// to two minutes first); 0: one second.
	PollInterval time.Duration
	// Clock reads time and paces polling; nil: the wall clock.
	Clock Clock
}

// Provider is the cloud.Provider of Compute Engine's zonal managed
// instance groups in one project. It keeps no state between calls other
// than its client, so any number of values may work on one project.
type Provider struct {
	svc     *compute.Service
	project string
	timeout time.Duration
	poll    time.Duration
	clock   Clock
}

var _ cloud.Provider = (*Provider)(nil)

// New returns a Provider for cfg.Project.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	if cfg.Project == "" {
		return nil, fmt.Errorf("gce: no project: %w", cloud.ErrInvalid)
	}
	var opts []option.ClientOption
	if cfg.Endpoint != "" {
		opts = append(opts, option.WithEndpoint(strings.TrimSuffix(cfg.Endpoint, "/")+"/"))
	}
	opts = append(opts, cfg.ClientOptions...)
	svc, err := compute.NewService(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("gce: compute client: %w", err)
	}
	p := &Provider{svc: svc, project: cfg.Project, timeout: cfg.OperationTimeout, poll: cfg.PollInterval, clock: cfg.Clock}
	if p.timeout <= 0 {
		p.timeout = cloud.DefaultOperationTimeout
	}
	if p.poll <= 0 {
		p.poll = time.Second
	}
	if p.clock == nil {
		p.clock = clock.Real{}
	}
	return p, nil
}

// Name implements cloud.Provider.
func (p *Provider) Name() string { return "gce" }

// ProviderID is the spec.providerID of the Node of instance name in zone
// of project, as the GCE cloud provider of Kubernetes writes it.
func ProviderID(project, zone, name string) string {
	return "gce://" + project + "/" + zone + "/" + name
}

// Metadata keys of the templates EnsureTemplate makes.
const (
	// MetadataRelease names the molt release the instances install.
	MetadataRelease = "molt-release"
)

const (
	updatePolicyType = "OPPORTUNISTIC"
	onFailure        = "DO_NOTHING"
)

func (p *Provider) templateURL(name string) string {
	return "projects/" + p.project + "/global/instanceTemplates/" + name
}

func (p *Provider) instanceURLs(zone string, names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, "projects/"+p.project+"/zones/"+zone+"/instances/"+n)
	}
	return out
}

// lastSegment is the name at the end of a resource URL.
func lastSegment(url string) string { return url[strings.LastIndex(url, "/")+1:] }

// requestID is the requestId of one API call made for req: a hash of req,
// the API method and the call's target and arguments as the caller gave
// them (cloud.RequestID), so that repeating a Provider call repeats its
// requests and different calls under one req stay different requests.
func requestID(req, method, target string, args ...string) string {
	return cloud.RequestID(req, strings.Join(append([]string{method, target}, args...), " "))
}

func isTransient(err error) bool { return errors.Is(err, cloud.ErrTransient) }

func isNotFound(err error) bool { return errors.Is(err, cloud.ErrNotFound) }

// EnsureTemplate implements cloud.Provider. A new template copies the
// properties of spec.Base and sets the metadata item molt-release to
// spec.Release; its name is cloud.TemplateName(spec). An existing
// template of that name is taken as it is (templates are immutable).
func (p *Provider) EnsureTemplate(ctx context.Context, spec cloud.TemplateSpec, req string) (string, error) {
	if spec.Release == "" {
		return "", fmt.Errorf("gce: template without a release: %w", cloud.ErrInvalid)
	}
	if spec.Base == "" {
		return "", fmt.Errorf("gce: template for %s without a base template: %w", spec.Release, cloud.ErrInvalid)
	}
	name := cloud.TemplateName(spec)
	_, err := p.svc.InstanceTemplates.Get(p.project, name).Context(ctx).Do()
	if err == nil {
		return name, nil
	}
	if err := classify(ctx, "instanceTemplates.get", err); !isNotFound(err) {
		return "", err
	}
	base, err := p.svc.InstanceTemplates.Get(p.project, spec.Base).Context(ctx).Do()
	if err != nil {
		return "", fmt.Errorf("gce: base template %q: %w", spec.Base, classify(ctx, "instanceTemplates.get", err))
	}
	if templateRelease(base) == spec.Release {
		return spec.Base, nil // already a template of the release
	}
	props := base.Properties
	if props == nil {
		props = &compute.InstanceProperties{}
	}
	if props.Metadata == nil {
		props.Metadata = &compute.Metadata{}
	}
	props.Metadata.Fingerprint = ""
	release := spec.Release
	items := slices.DeleteFunc(props.Metadata.Items, func(it *compute.MetadataItems) bool { return it.Key == MetadataRelease })
	props.Metadata.Items = append(items, &compute.MetadataItems{Key: MetadataRelease, Value: &release})
	tmpl := &compute.InstanceTemplate{
		Name:        name,
		Description: fmt.Sprintf("molt release %s on the machine shape of template %s", spec.Release, spec.Base),
		Properties:  props,
	}
	op, err := p.svc.InstanceTemplates.Insert(p.project, tmpl).RequestId(requestID(req, "instanceTemplates.insert", name)).Context(ctx).Do()
	if err := p.do(ctx, "instanceTemplates.insert", op, err); err != nil && !isAlreadyExists(err) {
		return "", err
	}
	return name, nil
}

// templateRelease is the molt release a template installs (its
// MetadataRelease item), "" for a template molt did not make.
func templateRelease(t *compute.InstanceTemplate) string {
	if t.Properties == nil || t.Properties.Metadata == nil {
		return ""
	}
	for _, it := range t.Properties.Metadata.Items {
		if it.Key == MetadataRelease && it.Value != nil {
			return *it.Value
		}
	}
	return ""
}

// GetGroup implements cloud.Provider. Autoscaling is the limits of the
// autoscaler that targets the group (status.autoscaler), if any.
func (p *Provider) GetGroup(ctx context.Context, g cloud.GroupRef) (cloud.Group, error) {
	igm, err := p.svc.InstanceGroupManagers.Get(p.project, g.Zone, g.Name).Context(ctx).Do()
	if err != nil {
		return cloud.Group{}, classify(ctx, "instanceGroupManagers.get", err)
	}
	out := cloud.Group{GroupRef: g, TargetSize: int(igm.TargetSize), Template: groupTemplate(igm)}
	if igm.Status != nil {
		out.Stable = igm.Status.IsStable
		if igm.Status.Autoscaler != "" {
			as, err := p.svc.Autoscalers.Get(p.project, g.Zone, lastSegment(igm.Status.Autoscaler)).Context(ctx).Do()
			if err != nil {
				if err := classify(ctx, "autoscalers.get", err); !isNotFound(err) {
					return cloud.Group{}, err
				}
			} else if pol := as.AutoscalingPolicy; pol != nil {
				out.Autoscaling = cloud.Autoscaling{Min: int(pol.MinNumReplicas), Max: int(pol.MaxNumReplicas)}
			}
		}
	}
	return out, nil
}

// groupTemplate is the template new instances of igm are made from.
func groupTemplate(igm *compute.InstanceGroupManager) string {
	if igm.InstanceTemplate != "" {
		return lastSegment(igm.InstanceTemplate)
	}
	if len(igm.Versions) == 1 {
		return lastSegment(igm.Versions[0].InstanceTemplate)
	}
	return ""
}

// baseInstanceName is the prefix GCE gives the instances it names (at
// most 58 characters).
func baseInstanceName(group string) string {
	if len(group) > 58 {
		group = strings.TrimRight(group[:58], "-")
	}
	return group
}

// CreateGroup implements cloud.Provider. The group is created with update
// policy OPPORTUNISTIC (a new template reaches only new instances) and
// defaultActionOnFailure DO_NOTHING (a failed instance is not repaired):
// molt replaces instances itself. A group that exists is left as it is.
func (p *Provider) CreateGroup(ctx context.Context, g cloud.GroupRef, template string, size int, req string) error {
	if size < 0 {
		return fmt.Errorf("gce: group size %d: %w", size, cloud.ErrInvalid)
	}
	igm := &compute.InstanceGroupManager{
		Name:                    g.Name,
		BaseInstanceName:        baseInstanceName(g.Name),
		InstanceTemplate:        p.templateURL(template),
		TargetSize:              int64(size),
		UpdatePolicy:            &compute.InstanceGroupManagerUpdatePolicy{Type: updatePolicyType},
		InstanceLifecyclePolicy: &compute.InstanceGroupManagerInstanceLifecyclePolicy{DefaultActionOnFailure: onFailure},
		ForceSendFields:         []string{"TargetSize"},
	}
	op, err := p.svc.InstanceGroupManagers.Insert(p.project, g.Zone, igm).RequestId(requestID(req, "instanceGroupManagers.insert", g.String(), template, strconv.Itoa(size))).Context(ctx).Do()
	if err := p.do(ctx, "instanceGroupManagers.insert", op, err); err != nil && !isAlreadyExists(err) {
		return err
	}
	return nil
}

// DeleteGroup implements cloud.Provider. The group's autoscaler, if it has
// one, is deleted first (GCE refuses to delete a group an autoscaler
// targets).
func (p *Provider) DeleteGroup(ctx context.Context, g cloud.GroupRef, req string) error {
	igm, err := p.svc.InstanceGroupManagers.Get(p.project, g.Zone, g.Name).Context(ctx).Do()
	if err != nil {
		if err := classify(ctx, "instanceGroupManagers.get", err); !isNotFound(err) {
			return err
		}
		return nil
	}
	if igm.Status != nil && igm.Status.Autoscaler != "" {
		if err := p.deleteAutoscaler(ctx, g, lastSegment(igm.Status.Autoscaler), requestID(req, "autoscalers.delete", g.String())); err != nil {
			return err
		}
	}
	op, err := p.svc.InstanceGroupManagers.Delete(p.project, g.Zone, g.Name).RequestId(requestID(req, "instanceGroupManagers.delete", g.String())).Context(ctx).Do()
	if err := p.do(ctx, "instanceGroupManagers.delete", op, err); err != nil && !isNotFound(err) {
		return err
	}
	return nil
}

func (p *Provider) deleteAutoscaler(ctx context.Context, g cloud.GroupRef, name, id string) error {
	op, err := p.svc.Autoscalers.Delete(p.project, g.Zone, name).RequestId(id).Context(ctx).Do()
	if err := p.do(ctx, "autoscalers.delete", op, err); err != nil && !isNotFound(err) {
		return err
	}
	return nil
}

// SetTemplate implements cloud.Provider. A group whose update policy is
// not OPPORTUNISTIC, or that repairs failed instances, is patched first:
// with a PROACTIVE policy GCE itself would replace the running instances
// with ones from the new template, without the drain molt does.
func (p *Provider) SetTemplate(ctx context.Context, g cloud.GroupRef, template string, req string) error {
	igm, err := p.svc.InstanceGroupManagers.Get(p.project, g.Zone, g.Name).Context(ctx).Do()
	if err != nil {
		return classify(ctx, "instanceGroupManagers.get", err)
	}
	if igm.UpdatePolicy == nil || igm.UpdatePolicy.Type != updatePolicyType ||
		igm.InstanceLifecyclePolicy == nil || igm.InstanceLifecyclePolicy.DefaultActionOnFailure != onFailure {
		patch := &compute.InstanceGroupManager{
			UpdatePolicy:            &compute.InstanceGroupManagerUpdatePolicy{Type: updatePolicyType},
			InstanceLifecyclePolicy: &compute.InstanceGroupManagerInstanceLifecyclePolicy{DefaultActionOnFailure: onFailure},
		}
		op, err := p.svc.InstanceGroupManagers.Patch(p.project, g.Zone, g.Name, patch).RequestId(requestID(req, "instanceGroupManagers.patch", g.String(), template)).Context(ctx).Do()
		if err := p.do(ctx, "instanceGroupManagers.patch", op, err); err != nil {
			return err
		}
	}
	if groupTemplate(igm) == template {
		return nil
	}
	op, err := p.svc.InstanceGroupManagers.SetInstanceTemplate(p.project, g.Zone, g.Name,
		&compute.InstanceGroupManagersSetInstanceTemplateRequest{InstanceTemplate: p.templateURL(template)}).
		RequestId(requestID(req, "instanceGroupManagers.setInstanceTemplate", g.String(), template)).Context(ctx).Do()
	return p.do(ctx, "instanceGroupManagers.setInstanceTemplate", op, err)
}

// Resize implements cloud.Provider.
func (p *Provider) Resize(ctx context.Context, g cloud.GroupRef, size int, req string) error {
	if size < 0 {
		return fmt.Errorf("gce: group size %d: %w", size, cloud.ErrInvalid)
	}
	op, err := p.svc.InstanceGroupManagers.Resize(p.project, g.Zone, g.Name, int64(size)).RequestId(requestID(req, "instanceGroupManagers.resize", g.String(), strconv.Itoa(size))).Context(ctx).Do()
	return p.do(ctx, "instanceGroupManagers.resize", op, err)
}

// SetAutoscaling implements cloud.Provider on the zonal autoscaler that
// targets the group: its minNumReplicas and maxNumReplicas are patched,
// its mode kept. A group without an autoscaler gets one named after the
// group in mode OFF, which scales nothing and holds the limits for
// GetGroup to read back. The zero Autoscaling deletes the group's
// autoscaler, whoever made it. Limits that are set already are not
// written again.
func (p *Provider) SetAutoscaling(ctx context.Context, g cloud.GroupRef, a cloud.Autoscaling, req string) error {
	if err := a.Validate(); err != nil {
		return fmt.Errorf("gce: %w", err)
	}
	igm, err := p.svc.InstanceGroupManagers.Get(p.project, g.Zone, g.Name).Context(ctx).Do()
	if err != nil {
		return classify(ctx, "instanceGroupManagers.get", err)
	}
	var name string
	if igm.Status != nil && igm.Status.Autoscaler != "" {
		name = lastSegment(igm.Status.Autoscaler)
	}
	if a == (cloud.Autoscaling{}) {
		if name == "" {
			return nil
		}
		return p.deleteAutoscaler(ctx, g, name, requestID(req, "autoscalers.delete", g.String(), "limits", "0", "0"))
	}
	limits := []string{"limits", strconv.Itoa(a.Min), strconv.Itoa(a.Max)}
	policy := &compute.AutoscalingPolicy{MinNumReplicas: int64(a.Min), MaxNumReplicas: int64(a.Max), ForceSendFields: []string{"MinNumReplicas"}}
	if name != "" {
		as, err := p.svc.Autoscalers.Get(p.project, g.Zone, name).Context(ctx).Do()
		if err != nil {
			return classify(ctx, "autoscalers.get", err)
		}
		if pol := as.AutoscalingPolicy; pol != nil && pol.MinNumReplicas == policy.MinNumReplicas && pol.MaxNumReplicas == policy.MaxNumReplicas {
			return nil
		}
		return p.patchAutoscaler(ctx, g.Zone, name, policy, requestID(req, "autoscalers.patch", g.String(), limits...))
	}
	policy.Mode = "OFF"
	as := &compute.Autoscaler{
		Name:              g.Name,
		Description:       "autoscaling limits of the group, recorded by molt (mode OFF: scales nothing)",
		Target:            igm.SelfLink,
		AutoscalingPolicy: policy,
	}
	op, err := p.svc.Autoscalers.Insert(p.project, g.Zone, as).RequestId(requestID(req, "autoscalers.insert", g.String(), limits...)).Context(ctx).Do()
	err = p.do(ctx, "autoscalers.insert", op, err)
	if isAlreadyExists(err) {
		policy.Mode = ""
		return p.patchAutoscaler(ctx, g.Zone, g.Name, policy, requestID(req, "autoscalers.patch", g.String(), limits...))
	}
	return err
}

func (p *Provider) patchAutoscaler(ctx context.Context, zone, name string, policy *compute.AutoscalingPolicy, id string) error {
	op, err := p.svc.Autoscalers.Patch(p.project, zone, &compute.Autoscaler{Name: name, AutoscalingPolicy: policy}).
		Autoscaler(name).RequestId(id).Context(ctx).Do()
	return p.do(ctx, "autoscalers.patch", op, err)
}

// ListInstances implements cloud.Provider, from listManagedInstances:
// currentAction and instanceStatus give the status, version the
// template, lastAttempt the LastError of an instance being created.
func (p *Provider) ListInstances(ctx context.Context, g cloud.GroupRef) ([]cloud.Instance, error) {
	var out []cloud.Instance
	err := p.svc.InstanceGroupManagers.ListManagedInstances(p.project, g.Zone, g.Name).Pages(ctx,
		func(page *compute.InstanceGroupManagersListManagedInstancesResponse) error {
			for _, mi := range page.ManagedInstances {
				out = append(out, p.instance(g.Zone, mi))
			}
			return nil
		})
	if err != nil {
		return nil, classify(ctx, "instanceGroupManagers.listManagedInstances", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (p *Provider) instance(zone string, mi *compute.ManagedInstance) cloud.Instance {
	name := mi.Name
	if name == "" {
		name = lastSegment(mi.Instance)
	}
	in := cloud.Instance{Name: name, ProviderID: ProviderID(p.project, zone, name), Status: instanceStatus(mi)}
	if mi.Version != nil {
		in.Template = lastSegment(mi.Version.InstanceTemplate)
	}
	if in.Status == cloud.StatusCreating || in.Status == cloud.StatusRecreating {
		if la := mi.LastAttempt; la != nil && la.Errors != nil && len(la.Errors.Errors) > 0 {
			var codes, messages []string
			for _, e := range la.Errors.Errors {
				codes = append(codes, e.Code)
				messages = append(messages, e.Message)
			}
			in.LastError = codeError("instance "+name, 0, codes, messages)
		}
	}
	return in
}

// instanceStatus maps a managed instance's currentAction, then its
// instanceStatus, to a cloud status.
func instanceStatus(mi *compute.ManagedInstance) cloud.InstanceStatus {
	switch mi.CurrentAction {
	case "CREATING", "CREATING_WITHOUT_RETRIES", "VERIFYING":
		return cloud.StatusCreating
	case "RECREATING":
		return cloud.StatusRecreating
	case "DELETING", "ABANDONING":
		return cloud.StatusDeleting
	}
	switch mi.InstanceStatus {
	case "RUNNING":
		return cloud.StatusRunning
	case "", "PROVISIONING", "STAGING":
		return cloud.StatusCreating
	}
	return cloud.StatusStopped
}

// names lists the names of g's instances.
func (p *Provider) names(ctx context.Context, g cloud.GroupRef) (map[string]bool, error) {
	ins, err := p.ListInstances(ctx, g)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(ins))
	for _, in := range ins {
		out[in.Name] = true
	}
	return out, nil
}

// CreateInstances implements cloud.Provider with createInstances, one
// per-instance config per name. Names the group has already are left out
// of the request (and it is not sent when none is left).
func (p *Provider) CreateInstances(ctx context.Context, g cloud.GroupRef, names []string, req string) error {
	have, err := p.names(ctx, g)
	if err != nil {
		return err
	}
	var configs []*compute.PerInstanceConfig
	for _, n := range names {
		if !have[n] {
			have[n] = true
			configs = append(configs, &compute.PerInstanceConfig{Name: n})
		}
	}
	if len(configs) == 0 {
		return nil
	}
	op, err := p.svc.InstanceGroupManagers.CreateInstances(p.project, g.Zone, g.Name,
		&compute.InstanceGroupManagersCreateInstancesRequest{Instances: configs}).
		RequestId(requestID(req, "instanceGroupManagers.createInstances", g.String(), names...)).Context(ctx).Do()
	err = p.do(ctx, "instanceGroupManagers.createInstances", op, err)
	if isAlreadyExists(err) {
		// Created meanwhile (by an earlier attempt or another caller):
		// done if every name is there now.
		if now, lerr := p.names(ctx, g); lerr == nil && allIn(now, names) {
			return nil
		}
	}
	return err
}

func allIn(have map[string]bool, names []string) bool {
	for _, n := range names {
		if !have[n] {
			return false
		}
	}
	return true
}

// DeleteInstances implements cloud.Provider with deleteInstances and
// skipInstancesOnValidationError, so names the group does not have are
// skipped by GCE itself. A missing group is not an error.
func (p *Provider) DeleteInstances(ctx context.Context, g cloud.GroupRef, names []string, req string) error {
	if len(names) == 0 {
		return nil
	}
	op, err := p.svc.InstanceGroupManagers.DeleteInstances(p.project, g.Zone, g.Name,
		&compute.InstanceGroupManagersDeleteInstancesRequest{Instances: p.instanceURLs(g.Zone, names), SkipInstancesOnValidationError: true}).
		RequestId(requestID(req, "instanceGroupManagers.deleteInstances", g.String(), names...)).Context(ctx).Do()
	if err := p.do(ctx, "instanceGroupManagers.deleteInstances", op, err); err != nil && !isNotFound(err) {
		return err
	}
	return nil
}

// RecreateInstances implements cloud.Provider with recreateInstances for
// the names the group has (GCE refuses names it does not know).
func (p *Provider) RecreateInstances(ctx context.Context, g cloud.GroupRef, names []string, req string) error {
	have, err := p.names(ctx, g)
	if err != nil {
		return err
	}
	var keep []string
	for _, n := range names {
		if have[n] && !slices.Contains(keep, n) {
			keep = append(keep, n)
		}
	}
	if len(keep) == 0 {
		return nil
	}
	op, err := p.svc.InstanceGroupManagers.RecreateInstances(p.project, g.Zone, g.Name,
		&compute.InstanceGroupManagersRecreateInstancesRequest{Instances: p.instanceURLs(g.Zone, keep)}).
		RequestId(requestID(req, "instanceGroupManagers.recreateInstances", g.String(), names...)).Context(ctx).Do()
	return p.do(ctx, "instanceGroupManagers.recreateInstances", op, err)
}

// QuotaMetric is the regional quota Quota reports.
const QuotaMetric = "INSTANCES"

// Quota implements cloud.Provider with the INSTANCES quota of the zone's
// region (regions.get): VM instances, whatever their shape. A region
// that reports no INSTANCES quota is unlimited (Limit 0). CPU, disk and
// address quotas are not read; running out of one shows up as instances
// waiting with a LastError wrapping cloud.ErrQuota.
func (p *Provider) Quota(ctx context.Context, zone string) (cloud.Quota, error) {
	i := strings.LastIndex(zone, "-")
	if i <= 0 {
		return cloud.Quota{}, fmt.Errorf("gce: zone %q has no region: %w", zone, cloud.ErrInvalid)
	}
	region, err := p.svc.Regions.Get(p.project, zone[:i]).Context(ctx).Do()
	if err != nil {
		return cloud.Quota{}, classify(ctx, "regions.get", err)
	}
	for _, q := range region.Quotas {
		if q.Metric == QuotaMetric {
			return cloud.Quota{Limit: int(q.Limit), Usage: int(q.Usage)}, nil
		}
	}
	return cloud.Quota{}, nil
}
