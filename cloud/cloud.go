package cloud

import (
	"context"
	"fmt"
	"time"
)

// Provider is one cloud's managed instance groups. Every method is safe to
// repeat with the same arguments: see the package documentation.
//
// req, on every mutating method, is the ID of the action that decided the
// call (phases.Action.ID). The adapter derives the provider's request IDs
// from it, the method, the group and the other arguments (RequestID(req,
// call)), so repeating a call (same method, arguments and req) is one
// request: the repeat changes nothing and returns nil when the first
// succeeded, even if the state has moved on since (a replayed
// CreateInstances does not bring back an instance deleted after it).
// Calls that differ in method, group or arguments are different requests
// under one req. After an error wrapping ErrTransient the caller repeats
// the call with the same req; after any other error it tries again, if at
// all, with a new req (the action's next attempt), since a provider may
// answer a request it remembers with the same error (GCE answers a
// repeated request ID with the first request's operation, failed or not).
//
// Mutating calls return once the provider has accepted and carried out the
// change to the group's definition (GCE: the zone operation is DONE). An
// instance may still be starting: CreateInstances returns while the new
// instances are CREATING; ListInstances shows when they run, or the error
// that keeps them from running (ErrQuota, ErrStockout in
// Instance.LastError).
type Provider interface {
	// Name is the adapter's name as a cluster's cloud spec gives it
	// ("gce", "lab", "memory").
	Name() string

	// EnsureTemplate makes sure an instance template for spec exists and
	// returns its name. The name is derived from the spec's content
	// (TemplateName), so asking twice returns the same template. A Base
	// that already is a template of spec.Release is returned as it is:
	// asking with the template of an instance that was already moved to
	// the release (a step repeated after a failover) changes nothing.
	EnsureTemplate(ctx context.Context, spec TemplateSpec, req string) (string, error)

	// GetGroup describes a group. ErrNotFound if it does not exist.
	GetGroup(ctx context.Context, g GroupRef) (Group, error)
	// CreateGroup creates a group of size instances from template (the
	// provider names them). A group that exists already is left as it is.
	CreateGroup(ctx context.Context, g GroupRef, template string, size int, req string) error
	// DeleteGroup deletes a group and its instances. A missing group is
	// not an error.
	DeleteGroup(ctx context.Context, g GroupRef, req string) error
	// SetTemplate makes template the group's template for instances
	// created from now on; running instances keep theirs.
	SetTemplate(ctx context.Context, g GroupRef, template string, req string) error
	// Resize sets the group's target size; the provider adds or removes
	// instances of its choosing to reach it.
	Resize(ctx context.Context, g GroupRef, size int, req string) error
	// SetAutoscaling sets the limits an autoscaler may move the group
	// within. Blue/green pins the blue groups (Min = Max = their size)
	// while it runs and restores what was there afterwards. The zero
	// Autoscaling removes the limits; negative values or Min > Max are
	// ErrInvalid.
	SetAutoscaling(ctx context.Context, g GroupRef, a Autoscaling, req string) error

	// ListInstances lists the group's instances, sorted by name.
	ListInstances(ctx context.Context, g GroupRef) ([]Instance, error)
	// CreateInstances adds instances with these names to the group from
	// its current template, raising its target size by the number created.
	// Names that exist already are skipped.
	//
	// Without capacity in the zone (a stockout) the call succeeds and the
	// new instances stay CREATING with a LastError wrapping ErrStockout
	// while the provider retries. Without quota the provider either does
	// the same with ErrQuota, or refuses the call with an error wrapping
	// ErrQuota and creates nothing. A caller that stops waiting deletes
	// the names it asked for (DeleteInstances); after that none of them
	// remains and the target size is what it was.
	CreateInstances(ctx context.Context, g GroupRef, names []string, req string) error
	// DeleteInstances removes these instances from the group and deletes
	// them, lowering its target size. Names that do not exist are skipped,
	// and so is a group that does not exist. An instance may be listed
	// DELETING for a while after the call returns.
	DeleteInstances(ctx context.Context, g GroupRef, names []string, req string) error
	// RecreateInstances deletes these instances and creates them again
	// under the same names from the group's current template; the target
	// size does not change. Names that are not in the group are skipped.
	RecreateInstances(ctx context.Context, g GroupRef, names []string, req string) error

	// Quota reports the instance quota that applies to a zone.
	Quota(ctx context.Context, zone string) (Quota, error)
}

// GroupRef names one instance group: a zone and a name in it.
type GroupRef struct {
	Zone string
	Name string
}

func (g GroupRef) String() string { return g.Zone + "/" + g.Name }

// Group is an instance group as the provider describes it.
type Group struct {
	GroupRef
	// TargetSize is the number of instances the group keeps.
	TargetSize int
	// Template is the template new instances are created from.
	Template string
	// Stable is true when no instance of the group is being created,
	// deleted or recreated.
	Stable bool
	// Autoscaling is the limits an autoscaler may move the group within
	// (zero when none is set).
	Autoscaling Autoscaling
}

// Autoscaling is the range an autoscaler may size a group in. Zero Max
// means no autoscaling limits are set.
type Autoscaling struct {
	Min int
	Max int
}

// Validate refuses limits no autoscaler can hold: negative, or a minimum
// above the maximum (ErrInvalid). Every provider checks them alike.
func (a Autoscaling) Validate() error {
	if a.Min < 0 || a.Max < 0 || a.Min > a.Max {
		return fmt.Errorf("autoscaling limits %d..%d: %w", a.Min, a.Max, ErrInvalid)
	}
	return nil
}

// InstanceStatus is where an instance's life is.
type InstanceStatus string

// Instance statuses.
const (
	// StatusCreating: being created, or waiting for capacity or quota
	// (see LastError).
	StatusCreating InstanceStatus = "CREATING"
	// StatusRunning: the machine runs; its node may not be Ready yet.
	StatusRunning  InstanceStatus = "RUNNING"
	StatusDeleting InstanceStatus = "DELETING"
	// StatusRecreating: being deleted and created again under its name.
	StatusRecreating InstanceStatus = "RECREATING"
	// StatusStopped: the machine exists but does not run (it failed or
	// was stopped). Groups do not repair instances, so it stays so until
	// the caller recreates or deletes it.
	StatusStopped InstanceStatus = "STOPPED"
)

// Instance is one member of a group.
type Instance struct {
	Name string
	// ProviderID is what the instance's Kubernetes Node carries in
	// spec.providerID; molt maps Nodes to instances by it.
	ProviderID string
	// Template is the template the instance was created from.
	Template string
	Status   InstanceStatus
	// LastError is why the last attempt to create the instance failed
	// (nil when it did not); errors.Is finds the sentinel.
	LastError error
}

// TemplateSpec is what an instance template says: the release its
// instances install, on the machine shape of a base template.
type TemplateSpec struct {
	// Release is the molt release version ("1.34.4") the instances'
	// kubelet and containerd come from.
	Release string
	// Base is the template whose machine shape, image and metadata the
	// new template copies (a group's current template); empty for a
	// provider whose templates have no shape (the lab).
	Base string
}

// Quota is a zone's instance quota.
type Quota struct {
	// Limit and Usage count instances (GCE: the region's INSTANCES
	// quota; the lab: its configured limit). Limit 0 means unlimited.
	Limit int
	Usage int
}

// Free is how many more instances the quota allows (a large number when
// unlimited).
func (q Quota) Free() int {
	if q.Limit <= 0 {
		return 1 << 30
	}
	return max(q.Limit-q.Usage, 0)
}

// DefaultOperationTimeout bounds how long an adapter waits for one
// provider operation before it returns an error wrapping ErrTransient;
// the caller's retry repeats the call with the same request ID, which
// the provider recognises.
const DefaultOperationTimeout = 5 * time.Minute
