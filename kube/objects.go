package kube

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
)

// Callers outside this package describe objects as manifests: YAML or JSON
// text, several documents separated by "---". They need no Kubernetes Go
// types; this file turns the text into API calls.

// CreateObjects creates every object in manifests, in order. An object that
// already exists is left as it is, so calling it again is a no-op; it never
// updates. The API server validates fields strictly: a misspelt field is an
// error, not silently dropped. A namespaced object without a namespace goes
// to "default".
func (c *Client) CreateObjects(ctx context.Context, manifests []byte) error {
	docs, err := splitDocuments(manifests)
	if err != nil {
		return err
	}
	for _, doc := range docs {
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(doc); err != nil {
			return fmt.Errorf("%w: %w", ErrManifest, err)
		}
		ri, err := c.resource(obj.GetAPIVersion(), obj.GetKind(), obj.GetNamespace())
		if err != nil {
			return err
		}
		what := describe(obj.GetKind(), obj.GetNamespace(), obj.GetName())
		// Looked up first: creating an object that exists is not always
		// AlreadyExists — a Service with a fixed nodePort is refused as
		// Invalid (the port is allocated, to itself).
		if _, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{}); err == nil {
			c.cfg.Logger.Debug("object exists", "object", what)
			continue
		} else if !apierrors.IsNotFound(err) {
			return apiErr("get "+what, err)
		}
		_, err = ri.Create(ctx, obj, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
		switch {
		case apierrors.IsAlreadyExists(err):
			c.cfg.Logger.Debug("object exists", "object", what)
		case err != nil:
			return apiErr("create "+what, err)
		default:
			c.cfg.Logger.Debug("object created", "object", what)
		}
	}
	return nil
}

// Exists reports whether the object of apiVersion ("v1", "apps/v1") and
// kind named namespace/name exists; namespace is ignored for cluster-scoped
// kinds.
func (c *Client) Exists(ctx context.Context, apiVersion, kind, namespace, name string) (bool, error) {
	ri, err := c.resource(apiVersion, kind, namespace)
	if err != nil {
		return false, err
	}
	_, err = ri.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, apiErr("get "+describe(kind, namespace, name), err)
	}
	return true, nil
}

// resource is the dynamic client for one kind, scoped to namespace when
// the kind is namespaced.
func (c *Client) resource(apiVersion, kind, namespace string) (dynamic.ResourceInterface, error) {
	ri, _, err := c.resourceIn(apiVersion, kind, namespace)
	return ri, err
}

// resourceIn is resource, and also the namespace it is scoped to: namespace,
// "default" for a namespaced kind without one, "" for a cluster-scoped kind.
func (c *Client) resourceIn(apiVersion, kind, namespace string) (dynamic.ResourceInterface, string, error) {
	if c.dyn == nil {
		return nil, "", fmt.Errorf("%w: client has no dynamic client (use NewFromKubeconfig)", ErrConfig)
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || gv.Version == "" || kind == "" {
		return nil, "", fmt.Errorf("%w: apiVersion %q kind %q", ErrManifest, apiVersion, kind)
	}
	m, err := c.mapper.RESTMapping(gv.WithKind(kind).GroupKind(), gv.Version)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return nil, "", fmt.Errorf("%w: %s %s: %w", ErrManifest, apiVersion, kind, err)
		}
		return nil, "", apiErr("discover "+apiVersion+" "+kind, err)
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		return c.dyn.Resource(m.Resource), "", nil
	}
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	return c.dyn.Resource(m.Resource).Namespace(namespace), namespace, nil
}

// CheckManifests decodes every document of manifests strictly into its Go
// type from client-go's scheme, without an API server: an unknown kind, an
// unknown or duplicated field or a value of the wrong type is an
// ErrManifest. It is the offline check for manifests the API server never
// validates, such as static pods read by a kubelet from disk.
func CheckManifests(manifests []byte) error {
	docs, err := splitDocuments(manifests)
	if err != nil {
		return err
	}
	dec := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	for i, doc := range docs {
		if _, gvk, err := dec.Decode(doc, nil, nil); err != nil {
			what := fmt.Sprintf("document %d", i+1)
			if gvk != nil {
				what += " (" + gvk.Kind + ")"
			}
			return fmt.Errorf("%w: %s: %w", ErrManifest, what, err)
		}
	}
	return nil
}

// splitDocuments returns each non-empty document of a YAML or JSON stream
// as JSON.
func splitDocuments(manifests []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifests)))
	var out [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrManifest, err)
		}
		js, err := utilyaml.ToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrManifest, err)
		}
		if t := bytes.TrimSpace(js); len(t) == 0 || bytes.Equal(t, []byte("null")) {
			continue // empty document, or comments only
		}
		out = append(out, js)
	}
}

func describe(kind, namespace, name string) string {
	if namespace == "" {
		return kind + " " + name
	}
	return kind + " " + namespace + "/" + name
}
