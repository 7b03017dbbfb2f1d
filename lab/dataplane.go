package lab

import (
	"fmt"
	"strings"
)

// The data-plane load balancer: lb-1 (the loadBalancer pool) runs HAProxy
// as a static pod on the host network, serving the sample Deployment's
// LoadBalancer Service at LBPort. Its backends are the Service's node port
// on every worker, where kube-proxy forwards to the pods wherever they
// run; HAProxy checks them every second and retries a failed connection on
// another worker, so a worker going down costs no request. This is how
// GKE on Bare Metal's bundled load balancing is built (HAProxy in front of
// node ports), minus keepalived: the lab has one LB host, so there is no
// virtual IP to move.
const (
	HAProxyImage  = "molt.local/lab/haproxy:v1"
	haproxyBinary = "/usr/sbin/haproxy"
	haproxyDir    = "/etc/molt-lab/haproxy"
	// LBPort is where the data-plane LB serves the sample Service.
	LBPort = 80
	// EchoNodePort is the sample Service's node port, fixed so the LB's
	// configuration is known before the Service exists.
	EchoNodePort = 30080
	// lbHealthPort answers HAProxy's own health (monitor-uri).
	lbHealthPort = 8404
	// haproxyStopSignal stops HAProxy softly, as the upstream haproxy
	// image does (STOPSIGNAL SIGUSR1): it closes its listeners and
	// finishes the requests in flight. On SIGTERM it stops hard, and a
	// request it had accepted when the kubelet replaced its pod during
	// lb-1's upgrade was answered with a connection reset.
	haproxyStopSignal = "SIGUSR1"
)

// HAProxyConfig is the data-plane LB's configuration for the given workers.
func HAProxyConfig(workers []HostSpec) string {
	var b strings.Builder
	fmt.Fprintf(&b, `global
  log stdout format raw local0 info
  maxconn 4096

defaults
  mode http
  log global
  option httplog
  timeout connect 2s
  timeout client 30s
  timeout server 30s
  # A connection a worker refuses or drops is tried again on another one.
  retries 3
  option redispatch 1
  retry-on conn-failure empty-response response-timeout

frontend health
  bind :%d
  monitor-uri /healthz

frontend sample
  bind :%d
  default_backend sample-nodeports

backend sample-nodeports
  balance roundrobin
  default-server check inter 1s fall 2 rise 2
`, lbHealthPort, LBPort)
	for _, w := range workers {
		fmt.Fprintf(&b, "  server %s %s:%d\n", w.Name, w.IP, EchoNodePort)
	}
	return b.String()
}

// DataPlaneLBPod is HAProxy on a loadBalancer host.
func DataPlaneLBPod() StaticPod {
	return StaticPod{
		Name: "haproxy", Image: HAProxyImage,
		Command:   []string{haproxyBinary, "-W", "-db", "-f", haproxyDir + "/haproxy.cfg"},
		Readiness: &HTTPProbe{Host: "127.0.0.1", Path: "/healthz", Port: lbHealthPort, Scheme: "HTTP"},
		Mounts:    []HostPathMount{{Name: "haproxy-config", Path: haproxyDir, ReadOnly: true, Type: "DirectoryOrCreate"}},
	}
}
