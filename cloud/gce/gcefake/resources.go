package gcefake

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	compute "google.golang.org/api/compute/v1"
)

// --- operations -----------------------------------------------------------

func (s *Server) newOperation(c *call) *operation {
	op := &operation{}
	op.op = compute.Operation{
		Kind:          "compute#operation",
		Name:          fmt.Sprintf("operation-%d", s.nextID()),
		OperationType: operationType(c),
		Status:        "PENDING",
		TargetLink:    s.link(targetPath(c)),
	}
	op.op.Id = uint64(s.seq)
	if c.parts[0] == "zones" {
		op.op.Zone = s.link("zones/" + c.parts[1])
	}
	if s.holds > 0 {
		s.holds--
		op.held = true
	}
	s.ops[op.op.Name] = op
	if c.requestID != "" {
		op.op.ClientOperationId = c.requestID
		s.requests[c.requestID] = op
	}
	c.note = op.op.Name + " PENDING"
	return op
}

func operationType(c *call) string {
	switch c.parts[len(c.parts)-1] {
	case "createInstances", "deleteInstances", "recreateInstances", "resize", "setInstanceTemplate":
		return c.parts[len(c.parts)-1]
	}
	switch c.method {
	case http.MethodPost:
		return "insert"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return c.method
}

// targetPath is the resource a change is about.
func targetPath(c *call) string {
	p := c.parts
	if p[0] == "zones" && len(p) >= 4 {
		return strings.Join(p[:4], "/")
	}
	return c.path
}

// advance moves an operation one poll on: RUNNING, then DONE after
// OperationPolls polls. A held operation stays RUNNING.
func (s *Server) advance(op *operation) {
	if op.op.Status == "DONE" {
		return
	}
	if op.held {
		op.op.Status = "RUNNING"
		return
	}
	op.polls++
	if op.polls < s.cfg.OperationPolls {
		op.op.Status = "RUNNING"
		return
	}
	op.op.Status = "DONE"
	op.op.Progress = 100
	if op.errCode != "" {
		op.op.Error = &compute.OperationError{Errors: []*compute.OperationErrorErrors{{Code: op.errCode, Message: op.errMsg}}}
		op.op.HttpErrorStatusCode = int64(op.errStatus)
		op.op.HttpErrorMessage = http.StatusText(op.errStatus)
	}
}

func (s *Server) opJSON(op *operation) compute.Operation { return op.op }

// pollOperation serves operations.wait (POST …/wait) and operations.get.
func (s *Server) pollOperation(c *call) (any, *apiError) {
	p := c.parts
	var name string
	switch {
	case p[0] == "global" && len(p) >= 3:
		name = p[2]
	case p[0] == "zones" && len(p) >= 4:
		name = p[3]
	}
	op, ok := s.ops[name]
	if !ok {
		return nil, notFound(c.path)
	}
	s.advance(op)
	c.note = op.op.Status
	if op.op.Error != nil {
		c.note += " " + op.errCode
	}
	return s.opJSON(op), nil
}

func (s *Server) takeOpFault(c *call) (opFault, bool) {
	for i, f := range s.opFaults {
		if strings.Contains(c.method+" "+c.path, f.match) {
			s.opFaults = append(s.opFaults[:i], s.opFaults[i+1:]...)
			return f, true
		}
	}
	return opFault{}, false
}

// --- regions ----------------------------------------------------------------

func (s *Server) getRegion(c *call) (any, *apiError) {
	region := c.parts[1]
	r := &compute.Region{Kind: "compute#region", Name: region, SelfLink: s.link("regions/" + region), Status: "UP"}
	usage, limit := s.usage(region), s.limit(region)
	r.Quotas = append(r.Quotas, &compute.Quota{Metric: "INSTANCES", Limit: float64(limit), Usage: float64(usage)})
	c.note = fmt.Sprintf("INSTANCES %d/%d", usage, limit)
	r.Quotas = append(r.Quotas, &compute.Quota{Metric: "CPUS", Limit: 1000, Usage: float64(2 * usage)})
	return r, nil
}

// limit is the INSTANCES quota of a region.
func (s *Server) limit(region string) int {
	if l, ok := s.quota[region]; ok {
		return l
	}
	return DefaultInstanceQuota
}

// usage counts the instances of a region that hold quota.
func (s *Server) usage(region string) int {
	n := 0
	for _, g := range s.groups {
		if regionOf(g.zone) != region {
			continue
		}
		for _, in := range g.instances {
			if in.holds {
				n++
			}
		}
	}
	return n
}

// --- templates ----------------------------------------------------------------

func (s *Server) getTemplate(c *call) (any, *apiError) {
	t, ok := s.templates[c.parts[2]]
	if !ok {
		return nil, notFound("projects/" + s.cfg.Project + "/" + c.path)
	}
	return t, nil
}

func (s *Server) insertTemplate(c *call) (any, *apiError) {
	var t compute.InstanceTemplate
	if err := decode(c, &t); err != nil {
		return nil, err
	}
	c.arg("name=%s", t.Name)
	if t.Properties != nil {
		if t.Properties.MachineType != "" {
			c.arg("machineType=%s", t.Properties.MachineType)
		}
		if md := t.Properties.Metadata; md != nil {
			for _, it := range md.Items {
				if strings.HasPrefix(it.Key, "molt-") && it.Value != nil {
					c.arg("%s=%s", it.Key, *it.Value)
				}
			}
		}
	}
	if !nameRE.MatchString(t.Name) {
		return nil, invalid("Invalid value for field 'resource.name': '%s'", t.Name)
	}
	if _, ok := s.templates[t.Name]; ok {
		return nil, &apiError{http.StatusConflict, "alreadyExists", fmt.Sprintf("The resource 'projects/%s/global/instanceTemplates/%s' already exists", s.cfg.Project, t.Name)}
	}
	return func() {
		t.Kind = "compute#instanceTemplate"
		t.SelfLink = s.link("global/instanceTemplates/" + t.Name)
		t.Id = s.nextID()
		s.templates[t.Name] = &t
	}, nil
}

// --- groups -------------------------------------------------------------------

func (s *Server) group(c *call) (*group, *apiError) {
	g, ok := s.groups[c.parts[1]+"/"+c.parts[3]]
	if !ok {
		return nil, notFound("projects/" + s.cfg.Project + "/" + strings.Join(c.parts[:4], "/"))
	}
	return g, nil
}

// templateName resolves a template URL to a known template's name.
func (s *Server) templateName(url string) (string, *apiError) {
	name := url[strings.LastIndex(url, "/")+1:]
	if _, ok := s.templates[name]; !ok {
		return "", notFound("projects/" + s.cfg.Project + "/global/instanceTemplates/" + name)
	}
	return name, nil
}

func (s *Server) groupJSON(g *group) *compute.InstanceGroupManager {
	path := "zones/" + g.zone + "/instanceGroupManagers/" + g.name
	igm := &compute.InstanceGroupManager{
		Kind:             "compute#instanceGroupManager",
		Name:             g.name,
		Zone:             s.link("zones/" + g.zone),
		SelfLink:         s.link(path),
		InstanceGroup:    s.link("zones/" + g.zone + "/instanceGroups/" + g.name),
		BaseInstanceName: g.base,
		InstanceTemplate: s.link("global/instanceTemplates/" + g.template),
		Versions:         []*compute.InstanceGroupManagerVersion{{InstanceTemplate: s.link("global/instanceTemplates/" + g.template)}},
		TargetSize:       int64(g.targetSize()),
		UpdatePolicy:     &compute.InstanceGroupManagerUpdatePolicy{Type: g.updatePolicy},
		InstanceLifecyclePolicy: &compute.InstanceGroupManagerInstanceLifecyclePolicy{
			DefaultActionOnFailure: g.onFailure,
		},
		CurrentActions:  &compute.InstanceGroupManagerActionsSummary{},
		Status:          &compute.InstanceGroupManagerStatus{IsStable: true},
		ForceSendFields: []string{"TargetSize"},
	}
	for _, in := range g.instances {
		switch in.action {
		case "CREATING":
			igm.CurrentActions.Creating++
		case "RECREATING":
			igm.CurrentActions.Recreating++
		case "DELETING":
			igm.CurrentActions.Deleting++
		default:
			igm.CurrentActions.None++
		}
		if in.action != "NONE" {
			igm.Status.IsStable = false
		}
	}
	if a := s.autoscalerOf(g); a != nil {
		igm.Status.Autoscaler = s.link("zones/" + a.zone + "/autoscalers/" + a.name)
	}
	return igm
}

func (s *Server) autoscalerOf(g *group) *autoscaler {
	for _, a := range s.autoscalers {
		if a.zone == g.zone && a.target == g.name {
			return a
		}
	}
	return nil
}

func (s *Server) getGroup(c *call) (any, *apiError) {
	g, err := s.group(c)
	if err != nil {
		return nil, err
	}
	c.note = fmt.Sprintf("size=%d template=%s", g.targetSize(), g.template)
	return s.groupJSON(g), nil
}

func (s *Server) insertGroup(c *call) (any, *apiError) {
	var igm compute.InstanceGroupManager
	if err := decode(c, &igm); err != nil {
		return nil, err
	}
	zone := c.parts[1]
	c.arg("name=%s", igm.Name)
	c.arg("template=%s", igm.InstanceTemplate[strings.LastIndex(igm.InstanceTemplate, "/")+1:])
	c.arg("size=%d", igm.TargetSize)
	g := &group{zone: zone, name: igm.Name, base: igm.BaseInstanceName, updatePolicy: "PROACTIVE", onFailure: "REPAIR", instances: map[string]*instance{}}
	if igm.UpdatePolicy != nil && igm.UpdatePolicy.Type != "" {
		g.updatePolicy = igm.UpdatePolicy.Type
	}
	if igm.InstanceLifecyclePolicy != nil && igm.InstanceLifecyclePolicy.DefaultActionOnFailure != "" {
		g.onFailure = igm.InstanceLifecyclePolicy.DefaultActionOnFailure
	}
	c.arg("updatePolicy=%s", g.updatePolicy)
	c.arg("onFailure=%s", g.onFailure)
	if !nameRE.MatchString(igm.Name) {
		return nil, invalid("Invalid value for field 'resource.name': '%s'", igm.Name)
	}
	if g.base == "" || len(g.base) > 58 || !nameRE.MatchString(g.base) {
		return nil, invalid("Invalid value for field 'resource.baseInstanceName': '%s'", g.base)
	}
	if igm.TargetSize < 0 {
		return nil, invalid("Invalid value for field 'resource.targetSize': '%d'", igm.TargetSize)
	}
	if _, ok := s.groups[zone+"/"+igm.Name]; ok {
		return nil, &apiError{http.StatusConflict, "alreadyExists", fmt.Sprintf("The resource 'projects/%s/zones/%s/instanceGroupManagers/%s' already exists", s.cfg.Project, zone, igm.Name)}
	}
	tmpl, err := s.templateName(igm.InstanceTemplate)
	if err != nil {
		return nil, err
	}
	g.template = tmpl
	return func() {
		s.groups[zone+"/"+g.name] = g
		s.grow(g, int(igm.TargetSize))
	}, nil
}

func (s *Server) deleteGroup(c *call) (any, *apiError) {
	g, err := s.group(c)
	if err != nil {
		return nil, err
	}
	if a := s.autoscalerOf(g); a != nil {
		return nil, &apiError{http.StatusBadRequest, "resourceInUseByAnotherResource",
			fmt.Sprintf("The instance_group_manager resource '%s' is already being used by '%s'", g.name, a.name)}
	}
	return func() { delete(s.groups, g.zone+"/"+g.name) }, nil
}

func (s *Server) patchGroup(c *call) (any, *apiError) {
	g, err := s.group(c)
	if err != nil {
		return nil, err
	}
	var igm compute.InstanceGroupManager
	if err := decode(c, &igm); err != nil {
		return nil, err
	}
	policy, action := g.updatePolicy, g.onFailure
	if igm.UpdatePolicy != nil && igm.UpdatePolicy.Type != "" {
		policy = igm.UpdatePolicy.Type
		c.arg("updatePolicy=%s", policy)
	}
	if igm.InstanceLifecyclePolicy != nil && igm.InstanceLifecyclePolicy.DefaultActionOnFailure != "" {
		action = igm.InstanceLifecyclePolicy.DefaultActionOnFailure
		c.arg("onFailure=%s", action)
	}
	return func() { g.updatePolicy, g.onFailure = policy, action }, nil
}

func (s *Server) resize(c *call) (any, *apiError) {
	size, perr := strconv.Atoi(c.query["size"][0])
	c.arg("size=%s", c.query["size"][0])
	if perr != nil || size < 0 {
		return nil, invalid("Invalid value for field 'size': '%s'. Must be greater than or equal to 0", c.query["size"][0])
	}
	g, err := s.group(c)
	if err != nil {
		return nil, err
	}
	return func() {
		if n := g.targetSize(); size > n {
			s.grow(g, size-n)
			return
		}
		// Shrink: instances that do not run go first, then the
		// greatest names.
		var victims []*instance
		for _, in := range g.sorted() {
			if in.action != "DELETING" {
				victims = append(victims, in)
			}
		}
		sort.SliceStable(victims, func(i, j int) bool {
			ri, rj := victims[i].status == "RUNNING", victims[j].status == "RUNNING"
			if ri != rj {
				return !ri
			}
			return victims[i].name > victims[j].name
		})
		for _, in := range victims[:len(victims)-size] {
			in.action = "DELETING"
		}
	}, nil
}

func (s *Server) setInstanceTemplate(c *call) (any, *apiError) {
	var r compute.InstanceGroupManagersSetInstanceTemplateRequest
	if err := decode(c, &r); err != nil {
		return nil, err
	}
	c.arg("template=%s", r.InstanceTemplate[strings.LastIndex(r.InstanceTemplate, "/")+1:])
	g, err := s.group(c)
	if err != nil {
		return nil, err
	}
	tmpl, err := s.templateName(r.InstanceTemplate)
	if err != nil {
		return nil, err
	}
	return func() { g.template = tmpl }, nil
}

// --- instances -------------------------------------------------------------------

// grow adds n instances that GCE names: the base name and a suffix.
func (s *Server) grow(g *group, n int) {
	for range n {
		var name string
		for {
			g.seq++
			name = fmt.Sprintf("%s-%04d", g.base, g.seq)
			if _, ok := g.instances[name]; !ok {
				break
			}
		}
		s.add(g, name)
	}
}

func (s *Server) add(g *group, name string) {
	in := &instance{name: name, id: s.nextID(), template: g.template, action: "CREATING"}
	g.instances[name] = in
	s.place(g.zone, in)
}

// place gives an instance that has no VM quota and capacity, or records
// why it cannot have them (its lastAttempt error).
func (s *Server) place(zone string, in *instance) bool {
	if in.holds {
		return true
	}
	region := regionOf(zone)
	switch {
	case s.stockout[zone]:
		in.errCode = "ZONE_RESOURCE_POOL_EXHAUSTED"
		in.errMsg = fmt.Sprintf("The zone 'projects/%s/zones/%s' does not have enough resources available to fulfill the request. Try a different zone, or try again later.", s.cfg.Project, zone)
	case s.usage(region) >= s.limit(region):
		in.errCode = "QUOTA_EXCEEDED"
		in.errMsg = fmt.Sprintf("Quota 'INSTANCES' exceeded. Limit: %d.0 in region %s.", s.limit(region), region)
	default:
		in.holds = true
		in.errCode, in.errMsg = "", ""
	}
	return in.holds
}

// step moves a group's instances one listing on.
func (s *Server) step(g *group) {
	for _, in := range g.sorted() {
		switch in.action {
		case "DELETING":
			delete(g.instances, in.name)
		case "CREATING", "RECREATING":
			if !s.place(g.zone, in) {
				continue
			}
			in.polls++
			if in.polls >= s.cfg.InstancePolls {
				in.action, in.status = "NONE", "RUNNING"
			} else {
				in.status = "PROVISIONING"
			}
		}
	}
}

func (s *Server) managedInstance(g *group, in *instance) *compute.ManagedInstance {
	mi := &compute.ManagedInstance{
		Id:             in.id,
		Name:           in.name,
		Instance:       s.link("zones/" + g.zone + "/instances/" + in.name),
		CurrentAction:  in.action,
		InstanceStatus: in.status,
		Version:        &compute.ManagedInstanceVersion{InstanceTemplate: s.link("global/instanceTemplates/" + in.template)},
	}
	if in.errCode != "" {
		mi.LastAttempt = &compute.ManagedInstanceLastAttempt{Errors: &compute.ManagedInstanceLastAttemptErrors{
			Errors: []*compute.ManagedInstanceLastAttemptErrorsErrors{{Code: in.errCode, Message: in.errMsg}},
		}}
	}
	return mi
}

func (s *Server) listManagedInstances(c *call) (any, *apiError) {
	g, err := s.group(c)
	if err != nil {
		return nil, err
	}
	resp := &compute.InstanceGroupManagersListManagedInstancesResponse{}
	var notes []string
	for _, in := range g.sorted() {
		resp.ManagedInstances = append(resp.ManagedInstances, s.managedInstance(g, in))
		note := in.name + ":" + in.action
		if in.status != "" {
			note += "/" + in.status
		}
		if in.errCode != "" {
			note += "/" + in.errCode
		}
		notes = append(notes, note)
	}
	c.note = "[" + strings.Join(notes, " ") + "]"
	s.step(g)
	return resp, nil
}

// instanceNames reads the names of instance URLs of the group's zone.
func instanceNames(g *group, urls []string) ([]string, *apiError) {
	var out []string
	for _, u := range urls {
		i := strings.Index(u, "zones/")
		if i < 0 {
			return nil, invalid("Invalid value for field 'instances': '%s'", u)
		}
		rest := strings.Split(u[i+len("zones/"):], "/")
		if len(rest) != 3 || rest[1] != "instances" {
			return nil, invalid("Invalid value for field 'instances': '%s'", u)
		}
		if rest[0] != g.zone {
			return nil, invalid("Instance '%s' is not in zone %s", u, g.zone)
		}
		out = append(out, rest[2])
	}
	return out, nil
}

func (s *Server) createInstances(c *call) (any, *apiError) {
	var r compute.InstanceGroupManagersCreateInstancesRequest
	if err := decode(c, &r); err != nil {
		return nil, err
	}
	var names []string
	for _, pc := range r.Instances {
		names = append(names, pc.Name)
	}
	c.arg("instances=[%s]", strings.Join(names, " "))
	g, err := s.group(c)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, n := range names {
		if !nameRE.MatchString(n) {
			return nil, invalid("Invalid value for field 'resource.instances[].name': '%s'. Must be a match of regex '[a-z]([-a-z0-9]{0,61}[a-z0-9])?'", n)
		}
		if _, ok := g.instances[n]; ok || seen[n] {
			return nil, &apiError{http.StatusConflict, "alreadyExists", fmt.Sprintf("Instance '%s' already exists in the group", n)}
		}
		seen[n] = true
	}
	return func() {
		for _, n := range names {
			s.add(g, n)
		}
	}, nil
}

func (s *Server) deleteInstances(c *call) (any, *apiError) {
	var r compute.InstanceGroupManagersDeleteInstancesRequest
	if err := decode(c, &r); err != nil {
		return nil, err
	}
	g, err := s.group(c)
	if err != nil {
		return nil, err
	}
	names, err := instanceNames(g, r.Instances)
	if err != nil {
		return nil, err
	}
	c.arg("instances=[%s]", strings.Join(names, " "))
	c.arg("skip=%t", r.SkipInstancesOnValidationError)
	var del []*instance
	for _, n := range names {
		in, ok := g.instances[n]
		switch {
		case ok && in.action != "DELETING":
			del = append(del, in)
		case !ok && !r.SkipInstancesOnValidationError:
			return nil, invalid("The instance '%s' is not a member of the group", n)
		}
	}
	return func() {
		for _, in := range del {
			in.action = "DELETING"
		}
	}, nil
}

func (s *Server) recreateInstances(c *call) (any, *apiError) {
	var r compute.InstanceGroupManagersRecreateInstancesRequest
	if err := decode(c, &r); err != nil {
		return nil, err
	}
	g, err := s.group(c)
	if err != nil {
		return nil, err
	}
	names, err := instanceNames(g, r.Instances)
	if err != nil {
		return nil, err
	}
	c.arg("instances=[%s]", strings.Join(names, " "))
	var rec []*instance
	for _, n := range names {
		in, ok := g.instances[n]
		if !ok || in.action == "DELETING" {
			return nil, invalid("The instance '%s' is not a member of the group", n)
		}
		rec = append(rec, in)
	}
	return func() {
		for _, in := range rec {
			in.action, in.status, in.polls, in.holds = "RECREATING", "", 0, false
			in.template = g.template
			s.place(g.zone, in)
		}
	}, nil
}

// --- autoscalers ------------------------------------------------------------------

func (s *Server) autoscalerJSON(a *autoscaler) *compute.Autoscaler {
	return &compute.Autoscaler{
		Kind:        "compute#autoscaler",
		Name:        a.name,
		Description: a.description,
		Zone:        s.link("zones/" + a.zone),
		SelfLink:    s.link("zones/" + a.zone + "/autoscalers/" + a.name),
		Target:      s.link("zones/" + a.zone + "/instanceGroupManagers/" + a.target),
		Status:      "ACTIVE",
		AutoscalingPolicy: &compute.AutoscalingPolicy{
			Mode: a.mode, MinNumReplicas: a.min, MaxNumReplicas: a.max,
			ForceSendFields: []string{"MinNumReplicas"},
		},
	}
}

func (s *Server) getAutoscaler(c *call) (any, *apiError) {
	a, ok := s.autoscalers[c.parts[1]+"/"+c.parts[3]]
	if !ok {
		return nil, notFound("projects/" + s.cfg.Project + "/" + c.path)
	}
	c.note = fmt.Sprintf("mode=%s min=%d max=%d", a.mode, a.min, a.max)
	return s.autoscalerJSON(a), nil
}

func checkPolicy(p *compute.AutoscalingPolicy) *apiError {
	if p == nil {
		return invalid("Required field 'resource.autoscalingPolicy' not specified")
	}
	if p.MaxNumReplicas < 1 || p.MinNumReplicas < 0 || p.MinNumReplicas > p.MaxNumReplicas {
		return invalid("Invalid value for field 'resource.autoscalingPolicy': min %d, max %d", p.MinNumReplicas, p.MaxNumReplicas)
	}
	return nil
}

func (s *Server) insertAutoscaler(c *call) (any, *apiError) {
	var as compute.Autoscaler
	if err := decode(c, &as); err != nil {
		return nil, err
	}
	zone := c.parts[1]
	target := as.Target[strings.LastIndex(as.Target, "/")+1:]
	c.arg("name=%s", as.Name)
	c.arg("target=%s", target)
	a := &autoscaler{zone: zone, name: as.Name, target: target, mode: "ON", description: as.Description}
	if p := as.AutoscalingPolicy; p != nil {
		if p.Mode != "" {
			a.mode = p.Mode
		}
		a.min, a.max = p.MinNumReplicas, p.MaxNumReplicas
	}
	c.arg("mode=%s min=%d max=%d", a.mode, a.min, a.max)
	if !nameRE.MatchString(as.Name) {
		return nil, invalid("Invalid value for field 'resource.name': '%s'", as.Name)
	}
	if err := checkPolicy(as.AutoscalingPolicy); err != nil {
		return nil, err
	}
	g, ok := s.groups[zone+"/"+target]
	if !ok {
		return nil, notFound(as.Target)
	}
	if _, ok := s.autoscalers[zone+"/"+as.Name]; ok {
		return nil, &apiError{http.StatusConflict, "alreadyExists", fmt.Sprintf("The resource 'projects/%s/zones/%s/autoscalers/%s' already exists", s.cfg.Project, zone, as.Name)}
	}
	if other := s.autoscalerOf(g); other != nil {
		return nil, &apiError{http.StatusConflict, "resourceInUseByAnotherResource", fmt.Sprintf("The group '%s' is already targeted by autoscaler '%s'", target, other.name)}
	}
	return func() { s.autoscalers[zone+"/"+a.name] = a }, nil
}

func (s *Server) patchAutoscaler(c *call) (any, *apiError) {
	name := ""
	if v := c.query["autoscaler"]; len(v) > 0 {
		name = v[0]
	}
	c.arg("autoscaler=%s", name)
	a, ok := s.autoscalers[c.parts[1]+"/"+name]
	if !ok {
		return nil, notFound("projects/" + s.cfg.Project + "/zones/" + c.parts[1] + "/autoscalers/" + name)
	}
	var as compute.Autoscaler
	if err := decode(c, &as); err != nil {
		return nil, err
	}
	mode, lo, hi := a.mode, a.min, a.max
	if p := as.AutoscalingPolicy; p != nil {
		if p.Mode != "" {
			mode = p.Mode
		}
		lo, hi = p.MinNumReplicas, p.MaxNumReplicas
		c.arg("min=%d max=%d", lo, hi)
		if err := checkPolicy(p); err != nil {
			return nil, err
		}
	}
	return func() { a.mode, a.min, a.max = mode, lo, hi }, nil
}

func (s *Server) deleteAutoscaler(c *call) (any, *apiError) {
	key := c.parts[1] + "/" + c.parts[3]
	if _, ok := s.autoscalers[key]; !ok {
		return nil, notFound("projects/" + s.cfg.Project + "/" + c.path)
	}
	return func() { delete(s.autoscalers, key) }, nil
}
