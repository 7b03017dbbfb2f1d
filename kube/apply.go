package kube

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// FieldManager is the field manager molt applies objects as. The API
// server records it in every applied object's managedFields.
const FieldManager = "molt"

// ObjectRef names one object of a manifest.
type ObjectRef struct {
	APIVersion string
	Kind       string
	// Namespace is empty for cluster-scoped kinds.
	Namespace string
	Name      string
}

// String is "Kind namespace/name" (or "Kind name"), as errors name objects.
func (r ObjectRef) String() string { return describe(r.Kind, r.Namespace, r.Name) }

// Apply applies every object of manifests, in order, with server-side
// apply as field manager "molt", forcing conflicts: the manifest is the
// desired state, and fields another manager took over (a kubectl edit) are
// taken back. Fields the manifest does not set stay as they are. Applying
// the same manifests again changes nothing, so it is safe to repeat after a
// leader change. A namespaced object without a namespace goes to
// "default". It returns the objects applied, in order; on an error the
// objects before the failing one are applied.
func (c *Client) Apply(ctx context.Context, manifests []byte) ([]ObjectRef, error) {
	docs, err := splitDocuments(manifests)
	if err != nil {
		return nil, err
	}
	refs := make([]ObjectRef, 0, len(docs))
	for i, doc := range docs {
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(doc); err != nil {
			return refs, fmt.Errorf("%w: document %d: %w", ErrManifest, i+1, err)
		}
		if obj.GetName() == "" {
			return refs, fmt.Errorf("%w: document %d (%s): no metadata.name", ErrManifest, i+1, obj.GetKind())
		}
		ri, ns, err := c.resourceIn(obj.GetAPIVersion(), obj.GetKind(), obj.GetNamespace())
		if err != nil {
			return refs, err
		}
		ref := ObjectRef{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: ns, Name: obj.GetName()}
		if ns != "" {
			obj.SetNamespace(ns)
		}
		if _, err := ri.Apply(ctx, ref.Name, obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
			return refs, apiErr("apply "+ref.String(), err)
		}
		c.cfg.Logger.Debug("object applied", "object", ref.String())
		refs = append(refs, ref)
	}
	return refs, nil
}
