// Package depcheck pins the module's dependencies until code uses them.
package depcheck

import (
	_ "github.com/containerd/containerd/v2/client"
	_ "github.com/coreos/go-systemd/v22/daemon"
	_ "github.com/coreos/go-systemd/v22/dbus"
	_ "github.com/go-chi/chi/v5"
	_ "github.com/google/go-containerregistry/pkg/v1/tarball"
	_ "github.com/hashicorp/go-hclog"
	_ "github.com/hashicorp/raft"
	_ "github.com/hashicorp/raft-boltdb/v2"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/spf13/cobra"
	_ "github.com/stretchr/testify/require"
	_ "github.com/teambition/rrule-go"
	_ "gopkg.in/yaml.v3"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/kubectl/pkg/drain"
	_ "pgregory.net/rapid"
)
