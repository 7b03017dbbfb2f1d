package lab

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/moltproject/molt/kube"
)

// checkServiceByName is what a pod does to reach the sample Deployment,
// done from host's network namespace: resolve the Service's name through
// the cluster DNS (kube-dns at ClusterDNS, which only kube-proxy's rules
// lead to CoreDNS), check the answer is the Service's ClusterIP, and ask
// that address (again through kube-proxy) for a sample pod's answer. Right
// after a rollout a node's rules may lag a moment, so it polls for at most
// 30 s and fails (ErrNotReady) with the last reason.
func (l *Lab) checkServiceByName(ctx context.Context, kc *kube.Client, host string) error {
	ns := nsPath(l.net.HostNS(host))
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		return DialInNamespace(ctx, ns, network, addr)
	}
	res := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return dial(ctx, network, net.JoinHostPort(ClusterDNS, "53"))
	}}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, DialContext: dial}}
	// The trailing dot: the name is absolute, whatever this machine's
	// resolv.conf says about search domains.
	fqdn := DemoDeploy + "." + DemoNamespace + ".svc." + ClusterDomain + "."
	return poll(ctx, 30*time.Second, time.Second, func(ctx context.Context) (bool, string, error) {
		want, err := kc.ServiceClusterIP(ctx, DemoNamespace, DemoDeploy)
		if err != nil {
			return false, err.Error(), nil
		}
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ips, err := res.LookupHost(lctx, fqdn)
		cancel()
		switch {
		case err != nil:
			return false, fmt.Sprintf("resolve %s through %s from %s: %v", fqdn, ClusterDNS, host, err), nil
		case len(ips) != 1 || ips[0] != want:
			return false, fmt.Sprintf("%s resolved to %v from %s, want the Service's ClusterIP %s", fqdn, ips, host, want), nil
		}
		url := fmt.Sprintf("http://%s/", net.JoinHostPort(want, fmt.Sprint(LBPort)))
		body, err := get(ctx, client, url)
		if err != nil {
			return false, fmt.Sprintf("GET %s (%s) from %s: %v", url, fqdn, host, err), nil
		}
		if !strings.HasPrefix(body, "pod="+DemoDeploy+"-") {
			return false, fmt.Sprintf("GET %s from %s answered %q, not a pod of %s", url, host, body, DemoDeploy), nil
		}
		return true, "", nil
	})
}

// get GETs url and returns the body of a 200 answer.
func get(ctx context.Context, client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %s", resp.Status)
	}
	return string(b), nil
}
