package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/lab"
)

// The lab's Prometheus (SPEC §16): Debian's `prometheus` server in the
// lab's network namespace, scraping every coordinator member (HTTPS, with
// a viewer token and the cluster CA), every host's agent (:7443) and this
// process's exporter (the workload probes' counters, and switches tests
// set), and evaluating the shipped alert rules. Health gates ask it
// through its HTTP API, and tests read alerts from it the same way.

// PrometheusURL is the lab Prometheus' base URL as seen inside the lab's
// namespace (where the members and the agents run).
func (e *Env) PrometheusURL() string { return "http://" + e.promAddr() }

func (e *Env) promAddr() string { return lab.GatewayIP + ":" + strconv.Itoa(e.cfg.BasePort+10) }

func (e *Env) exporterAddr() string { return lab.GatewayIP + ":" + strconv.Itoa(e.cfg.BasePort+11) }

// labExporter serves, inside the lab's namespace, what this process
// measures: the workload probes' requests and failures, and switches.
type labExporter struct {
	srv      *http.Server
	requests *prometheus.CounterVec
	failures *prometheus.CounterVec
	switches *prometheus.GaugeVec
}

func newLabExporter() *labExporter {
	reg := prometheus.NewRegistry()
	x := &labExporter{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "molt_probe_requests_total",
			Help: "Requests the lab's workload probes sent to the sample workload, by path."}, []string{"probe"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "molt_probe_failures_total",
			Help: "Requests of the lab's workload probes that failed, by path."}, []string{"probe"}),
		switches: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "molt_lab_switch",
			Help: "Values tests set (e.g. a health gate they turn red and green)."}, []string{"name"}),
	}
	reg.MustRegister(x.requests, x.failures, x.switches)
	x.srv = &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	return x
}

// probeResult counts one request of a workload probe.
func (x *labExporter) probeResult(probe string, passed bool) {
	x.requests.WithLabelValues(probe).Inc()
	f := x.failures.WithLabelValues(probe)
	if !passed {
		f.Inc()
	}
}

// SetSwitch sets molt_lab_switch{name} in the lab's Prometheus.
func (e *Env) SetSwitch(name string, v float64) { e.exporter.switches.WithLabelValues(name).Set(v) }

// startPrometheus starts the exporter and Prometheus. ruleFor, when set,
// replaces every alert's for: (the shipped durations are minutes; the
// promtool tests in deploy/prometheus cover them).
func (e *Env) startPrometheus(ctx context.Context) error {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		return fmt.Errorf("%w: prometheus (apt-get install prometheus): %v", lab.ErrMissing, err)
	}
	ns := e.Lab.Network().LabNS()
	if e.exporter == nil {
		e.exporter = newLabExporter()
		l, err := listenInNamespace(ns, e.exporterAddr())
		if err != nil {
			return err
		}
		go func() { _ = e.exporter.srv.Serve(l) }()
	}
	dir := filepath.Join(e.cfg.WorkDir, "prometheus")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var tok api.Token
	req := api.TokenRequest{Kind: api.TokenAPI, Role: "viewer", TTL: "24h", Description: "lab prometheus"}
	if _, err := e.API().Do(ctx, http.MethodPost, "/v1/tokens", req, &tok); err != nil {
		return fmt.Errorf("prometheus token: %w", err)
	}
	rules, err := os.ReadFile(filepath.Join(e.cfg.Lab.ModuleDir, "deploy", "prometheus", "molt-alerts.yml"))
	if err != nil {
		return err
	}
	if e.cfg.AlertFor > 0 {
		rules = regexp.MustCompile(`(?m)^(\s+for:) \S+$`).ReplaceAll(rules, []byte("${1} "+e.cfg.AlertFor.String()))
	}
	var members, agents []string
	for _, m := range e.Members {
		members = append(members, strconv.Quote(m.HTTPAddr))
	}
	for _, h := range e.Lab.Config().Topology.Hosts {
		agents = append(agents, strconv.Quote(h.IP+":7443"))
	}
	conf := fmt.Sprintf(`global:
  scrape_interval: 2s
  evaluation_interval: 2s
rule_files: [rules.yml]
scrape_configs:
  - job_name: molt-coordinator
    scheme: https
    tls_config: {ca_file: %q}
    authorization: {type: Bearer, credentials_file: token}
    static_configs: [{targets: [%s]}]
  - job_name: molt-agent
    static_configs: [{targets: [%s]}]
  - job_name: molt-lab
    static_configs: [{targets: [%q]}]
`, e.Members[0].CAFile(), strings.Join(members, ", "), strings.Join(agents, ", "), e.exporterAddr())
	for name, b := range map[string][]byte{"prometheus.yml": []byte(conf), "rules.yml": rules, "token": []byte(tok.Secret)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return err
		}
	}
	logf, err := os.OpenFile(filepath.Join(e.cfg.WorkDir, "prometheus.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command("ip", "netns", "exec", ns, bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+e.promAddr(), "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start prometheus: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	e.prom, e.promDone = cmd, done
	return poll(ctx, time.Minute, func() (bool, error) {
		select {
		case <-done:
			return false, fmt.Errorf("prometheus exited (log %s)", logf.Name())
		default:
		}
		r, err := e.hc.Get(e.PrometheusURL() + "/-/ready")
		if err != nil {
			return false, nil
		}
		r.Body.Close()
		return r.StatusCode == http.StatusOK, nil
	})
}

// stopPrometheus ends Prometheus and the exporter.
func (e *Env) stopPrometheus() {
	if e.prom != nil {
		_ = e.prom.Process.Signal(os.Interrupt)
		select {
		case <-e.promDone:
		case <-time.After(15 * time.Second):
			_ = e.prom.Process.Kill()
			<-e.promDone
		}
		e.prom = nil
	}
	if e.exporter != nil {
		_ = e.exporter.srv.Close()
		e.exporter = nil
	}
}

// Query asks the lab's Prometheus for expr at now, through its HTTP API,
// and returns the series' values by their labels ("{alertname=...}").
func (e *Env) Query(ctx context.Context, expr string) (map[string]string, error) {
	u := e.PrometheusURL() + "/api/v1/query?query=" + url.QueryEscape(expr)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, errors.New("prometheus: " + body.Error)
	}
	out := map[string]string{}
	for _, r := range body.Data.Result {
		var labels []string
		for k, v := range r.Metric {
			labels = append(labels, k+"="+v)
		}
		slices.Sort(labels)
		out["{"+strings.Join(labels, ",")+"}"] = fmt.Sprint(r.Value[1])
	}
	return out, nil
}

// listenInNamespace listens on addr from inside network namespace ns: the
// socket stays there, and serves connections made inside it.
func listenInNamespace(ns, addr string) (net.Listener, error) {
	return lab.ListenInNamespace(filepath.Join("/run/netns", ns), "tcp", addr)
}
