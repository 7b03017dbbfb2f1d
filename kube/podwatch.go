package kube

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// PodChange is one change of a pod's life that can matter to its clients:
// it appeared, became Ready or not, began terminating, or was deleted.
type PodChange struct {
	// At is when the watch saw the change (the watcher's clock).
	At              time.Time
	Namespace, Name string
	Node            string
	// What is "added", "ready", "not ready", "terminating" or "deleted".
	What string
}

func (c PodChange) String() string {
	node := c.Node
	if node == "" {
		node = "no node"
	}
	return fmt.Sprintf("%s %s/%s on %s %s", c.At.UTC().Format("15:04:05.000"), c.Namespace, c.Name, node, c.What)
}

// WatchPods tells on of every PodChange of the pods in namespace ("" for
// all) from now until ctx ends, through an informer, so a watch broken by
// an API server restart is resumed (or listed again) rather than lost.
// on is called from one goroutine at a time. It returns once the informer
// has listed the pods that exist (each reported "added"), or ctx ends.
func (c *Client) WatchPods(ctx context.Context, namespace string, on func(PodChange)) error {
	f := informers.NewSharedInformerFactoryWithOptions(c.cs, 0, informers.WithNamespace(namespace))
	inf := f.Core().V1().Pods().Informer()
	tell := func(p *corev1.Pod, what string) {
		on(PodChange{At: time.Now(), Namespace: p.Namespace, Name: p.Name, Node: p.Spec.NodeName, What: what})
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				tell(p, "added")
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			was, ok1 := oldObj.(*corev1.Pod)
			p, ok2 := newObj.(*corev1.Pod)
			if !ok1 || !ok2 {
				return
			}
			if was.DeletionTimestamp == nil && p.DeletionTimestamp != nil {
				tell(p, "terminating")
			}
			if r := podInfo(p).Ready; r != podInfo(was).Ready {
				tell(p, map[bool]string{true: "ready", false: "not ready"}[r])
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				tell(p, "deleted")
			}
		},
	})
	if err != nil {
		return fmt.Errorf("%w: watch pods: %v", ErrAPI, err)
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("%w: watch pods: %v", ErrAPI, context.Cause(ctx))
	}
	return nil
}
