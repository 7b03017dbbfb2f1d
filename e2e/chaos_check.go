package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/moltproject/molt/api"
)

// The invariants a chaos run is checked against, as pure functions of what
// was read from the cluster, the hosts and the coordinator (chaos.go reads
// it). Each returns the violations it found, one sentence each.

// Ending is how a run's upgrade ended.
type Ending string

// Endings.
const (
	// EndCompleted: done, and status.version is the target.
	EndCompleted Ending = "completed"
	// EndHalted: failed with a reason, or still running past the deadline
	// while saying why it waits (a node waiting for an operator).
	EndHalted Ending = "halted"
	// EndWedged: still running past the deadline with no reason given,
	// or failed without a reason. Always a violation.
	EndWedged Ending = "wedged"
)

// checkEnding classifies the upgrade as the run left it. deadlinePassed
// says the run stopped waiting for it; statusVersion is the cluster's
// status.version then.
func checkEnding(u *api.Upgrade, statusVersion string, deadlinePassed bool) (Ending, string, []string) {
	switch {
	case u == nil:
		return EndWedged, "no upgrade", []string{"ending: the upgrade was never seen"}
	case u.State == api.UpgradeDone:
		if statusVersion != u.To {
			return EndWedged, "done", []string{fmt.Sprintf("ending: upgrade done but status.version is %q, not %s", statusVersion, u.To)}
		}
		return EndCompleted, "done", nil
	case u.State == api.UpgradeFailed || u.State == api.UpgradeCancelled:
		var v []string
		if statusVersion != u.From {
			v = append(v, fmt.Sprintf("ending: upgrade %s but status.version is %q, not the old %s", u.State, statusVersion, u.From))
		}
		if strings.TrimSpace(u.Reason) == "" && u.State == api.UpgradeFailed {
			return EndWedged, string(u.State), append(v, "ending: upgrade failed without a reason")
		}
		return EndHalted, fmt.Sprintf("%s: %s", u.State, u.Reason), v
	case u.InProgress && deadlinePassed:
		if why := waitReasons(u); why != "" {
			return EndHalted, "waiting: " + why, nil
		}
		return EndWedged, "running", []string{"ending: still running at the deadline with no reason given (" + where(u) + ")"}
	}
	return EndWedged, string(u.State), []string{fmt.Sprintf("ending: upgrade %s when the run stopped following it", u.State)}
}

// waitReasons is what the upgrade says it waits for: a pause, nodes
// waiting, failed nodes an operator must retry.
func waitReasons(u *api.Upgrade) string {
	var why []string
	if u.PauseReason != "" {
		why = append(why, "paused: "+u.PauseReason)
	}
	for _, n := range u.Nodes {
		switch {
		case n.State == api.StepFailed:
			why = append(why, fmt.Sprintf("%s failed: %s", n.Node, n.Error))
		case n.Waiting != "":
			why = append(why, fmt.Sprintf("%s waits: %s", n.Node, n.Waiting))
		}
	}
	return strings.Join(why, "; ")
}

// where says which steps and nodes run.
func where(u *api.Upgrade) string {
	var at []string
	for _, s := range u.Steps {
		if s.State == api.StepRunning {
			at = append(at, "step "+s.ID)
		}
	}
	for i := range u.Nodes {
		n := &u.Nodes[i]
		if n.State == api.StepRunning {
			at = append(at, fmt.Sprintf("%s at %d:%s", n.Node, n.Cursor, n.Step))
		}
	}
	return strings.Join(at, ", ")
}

// checkOrder checks SPEC §4 on the recorded steps of u, whatever its
// ending: the control-plane LB pool before the control-plane pool; that
// before the add-ons, the lifecycle components and the loadBalancer
// pools; those pools before the worker pools; the health step after every
// other; control-plane nodes one at a time. A step that never started is
// not checked; one that started must have found its predecessors done.
func checkOrder(u *api.Upgrade) []string {
	var v []string
	rank := func(s *api.Step) int {
		switch {
		case s.Kind == api.StepKindPool && s.Role == api.RoleControlPlaneLB:
			return 0
		case s.ID == api.StepIDBackup:
			// The etcd snapshot: the control-plane pool waits for it.
			return 0
		case s.Kind == api.StepKindPool && s.Role == api.RoleControlPlane:
			return 1
		case s.Kind == api.StepKindPool && s.Role == api.RoleLoadBalancer:
			return 2
		case s.Kind == api.StepKindPool && s.Role == api.RoleWorker:
			return 3
		case s.ID == api.StepIDHealth:
			return 4
		default: // add-ons, lifecycle: after the control plane
			return 2
		}
	}
	before := func(later, earlier *api.Step) bool {
		rl, re := rank(later), rank(earlier)
		switch {
		case rl == 4:
			return re < 4
		case rl == 3:
			// Workers wait for the loadBalancer pools (and the control
			// plane), not for the add-ons (SPEC §4: 5 runs in parallel,
			// 6 follows the loadBalancer pool).
			return re < 2 || (re == 2 && earlier.Kind == api.StepKindPool)
		case rl == 2:
			return re < 2
		case rl == 1:
			return re == 0
		}
		return false
	}
	for i := range u.Steps {
		later := &u.Steps[i]
		if later.StartedAt.IsZero() {
			continue
		}
		for j := range u.Steps {
			earlier := &u.Steps[j]
			if i == j || !before(later, earlier) {
				continue
			}
			if earlier.State != api.StepDone || earlier.FinishedAt.After(later.StartedAt) {
				v = append(v, fmt.Sprintf("order: %s started %s before %s finished (%s)", later.ID,
					later.StartedAt.Format("15:04:05.000"), earlier.ID, earlier.State))
			}
		}
	}
	for i := range u.Pools {
		p := &u.Pools[i]
		if p.Role != api.RoleControlPlane {
			continue
		}
		var started []api.NodeTask
		for _, n := range u.PoolNodes(p) {
			if !n.StartedAt.IsZero() {
				started = append(started, n)
			}
		}
		sort.Slice(started, func(a, b int) bool { return started[a].StartedAt.Before(started[b].StartedAt) })
		for k := 1; k < len(started); k++ {
			prev := started[k-1]
			if prev.FinishedAt.IsZero() || prev.FinishedAt.After(started[k].StartedAt) {
				v = append(v, fmt.Sprintf("order: control-plane node %s started while %s was upgrading", started[k].Node, prev.Node))
			}
		}
	}
	return v
}

// JournalSummary is what one host's agent journal says.
type JournalSummary struct {
	Host string
	// Operations counts the upgrade operations (not preflight's).
	Operations int
	// Ops are their journaled start and finish, by operation ID.
	Ops map[string]OpTimes
}

// OpTimes is when an agent started an operation and journaled its result
// (zero when it has none).
type OpTimes struct {
	Started, Finished time.Time
}

// journalRecord is the part of an agent journal line the checks read
// (agent/journal.go writes it).
type journalRecord struct {
	Time time.Time `json:"time"`
	ID   string    `json:"id"`
	Step string    `json:"step"`
}

// opKey splits an operation ID: upgrade/node/cursor/aN, or
// upgrade/node/rollback/cursor/aN (api.Upgrade.OperationID).
type opKey struct {
	upgrade, node string
	rollback      bool
	cursor        int
	attempt       string
}

func parseOpID(id string) (opKey, bool) {
	parts := strings.Split(id, "/")
	var k opKey
	switch len(parts) {
	case 4:
	case 5:
		if parts[2] != "rollback" {
			return k, false
		}
		k.rollback = true
		parts = append(parts[:2], parts[3:]...)
	default:
		return k, false
	}
	c, err := strconv.Atoi(parts[2])
	if err != nil || !strings.HasPrefix(parts[3], "a") {
		return k, false
	}
	k.upgrade, k.node, k.cursor, k.attempt = parts[0], parts[1], c, parts[3]
	return k, true
}

// checkJournal reads one agent journal: every operation ID finished at
// most once and none of its effects (binary renamed, manifests written,
// unit restarted, backup restored) happened twice; one node's operations
// of one attempt ran one after another in step order.
func checkJournal(host string, data []byte) (JournalSummary, []string) {
	sum := JournalSummary{Host: host}
	type opState struct {
		key      opKey
		counts   map[string]int
		started  time.Time
		finished time.Time
	}
	ops := map[string]*opState{}
	var order []string
	var v []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		var r journalRecord
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			// A torn last line is what a crash mid-append leaves; the
			// agent drops it when it starts.
			continue
		}
		if strings.HasPrefix(r.ID, "preflight-") {
			continue
		}
		if api.IsBackupOperationID(r.ID) {
			// The etcd snapshot of the backup step: a cluster step's
			// operation, not a node's (its once-only upload is the
			// coordinator's to check, by operation ID).
			continue
		}
		st := ops[r.ID]
		if st == nil {
			k, ok := parseOpID(r.ID)
			if !ok {
				v = append(v, fmt.Sprintf("journal %s line %d: operation ID %q is not upgrade/node/cursor/attempt", host, line, r.ID))
				continue
			}
			st = &opState{key: k, counts: map[string]int{}}
			ops[r.ID] = st
			order = append(order, r.ID)
		}
		st.counts[r.Step]++
		if r.Step == "started" && st.started.IsZero() {
			st.started = r.Time
		}
		if r.Step == "finished" {
			st.finished = r.Time
		}
	}
	sum.Operations = len(ops)
	sum.Ops = map[string]OpTimes{}
	for _, id := range order {
		st := ops[id]
		sum.Ops[id] = OpTimes{Started: st.started, Finished: st.finished}
		if n := st.counts["finished"]; n > 1 {
			v = append(v, fmt.Sprintf("ops-once: %s: %s finished %d times", host, id, n))
		}
		for _, effect := range []string{"renamed", "written", "restarted", "restored"} {
			if n := st.counts[effect]; n > 1 {
				v = append(v, fmt.Sprintf("ops-once: %s: %s %s %d times", host, id, effect, n))
			}
		}
		if st.key.node != host {
			v = append(v, fmt.Sprintf("ops-once: %s ran %s, an operation of node %s", host, id, st.key.node))
		}
	}
	// Step order inside one node's attempt.
	groups := map[string][]*opState{}
	for _, id := range order {
		st := ops[id]
		g := fmt.Sprintf("%s/%s/%v/%s", st.key.upgrade, st.key.node, st.key.rollback, st.key.attempt)
		groups[g] = append(groups[g], st)
	}
	for _, g := range groups {
		sort.Slice(g, func(a, b int) bool { return g[a].key.cursor < g[b].key.cursor })
		for k := 1; k < len(g); k++ {
			prev, next := g[k-1], g[k]
			if prev.finished.IsZero() || next.started.Before(prev.finished) {
				v = append(v, fmt.Sprintf("order: %s: operation at step %d started %s before the one at step %d finished",
					host, next.key.cursor, next.started.Format("15:04:05.000"), prev.key.cursor))
			}
		}
	}
	return sum, v
}

// HostFiles is what the agent's upgrades write on one host, read after
// the run: the binaries' sha256 and the static-pod manifests.
type HostFiles struct {
	Host                         string
	KubeletSHA256, ContainerdSHA string
	// Manifests maps each file of the manifest directory to its content.
	Manifests map[string][]byte
	// Leftovers are temporary files of an interrupted write still there
	// (not torn: nothing reads them; reported).
	Leftovers []string
}

// checkHostFiles: each binary is exactly the old or the new release's;
// each manifest parses, names its pod and containers, and every image in
// it is one the host ran before or the new release ships.
func checkHostFiles(f HostFiles, kubelets, containerds []string, images map[string]bool) []string {
	var v []string
	if !slices.Contains(kubelets, f.KubeletSHA256) {
		v = append(v, fmt.Sprintf("torn: %s: kubelet sha256 %s is neither release's", f.Host, short(f.KubeletSHA256)))
	}
	if !slices.Contains(containerds, f.ContainerdSHA) {
		v = append(v, fmt.Sprintf("torn: %s: containerd sha256 %s is neither release's", f.Host, short(f.ContainerdSHA)))
	}
	for name, b := range f.Manifests {
		var pod struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				Containers []struct {
					Name  string `json:"name"`
					Image string `json:"image"`
				} `json:"containers"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(b, &pod); err != nil {
			v = append(v, fmt.Sprintf("torn: %s: manifest %s does not parse: %v", f.Host, name, err))
			continue
		}
		if pod.Metadata.Name == "" || len(pod.Spec.Containers) == 0 {
			v = append(v, fmt.Sprintf("torn: %s: manifest %s has no name or no containers", f.Host, name))
			continue
		}
		for _, c := range pod.Spec.Containers {
			if !images[c.Image] {
				v = append(v, fmt.Sprintf("torn: %s: manifest %s runs %s, neither the old nor the new release's image", f.Host, name, c.Image))
			}
		}
	}
	return v
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	if s == "" {
		return "(missing)"
	}
	return s
}

// VersionSample is one look at the versions the cluster runs, through its
// API: every Node's kubelet and every control-plane mirror pod's image.
type VersionSample struct {
	At time.Time
	// Kubelets maps a node to its kubelet's version ("1.34.3").
	Kubelets map[string]string
	// ControlPlane maps "component/node" to the version of the image its
	// mirror pod runs.
	ControlPlane map[string]string
	// Err is why this look failed (the API server unreachable).
	Err string
}

// checkVersionSamples applies SPEC §3 rule 5 to every sample: no version
// but the old and the new; the kubelet of a node outside the control plane
// never newer than the oldest kube-apiserver; a control-plane node's
// kubelet never newer than the kube-apiserver on that node. roles maps a
// node to its pool's role. The control-plane LB pool is exempt from the
// second rule: SPEC §4 upgrades it, kubelet included, before the control
// plane (its only workloads are the LB's static pods).
func checkVersionSamples(samples []VersionSample, from, to string, roles map[string]api.Role) (checked int, v []string) {
	seen := map[string]bool{}
	add := func(key, msg string) {
		if !seen[key] {
			seen[key] = true
			v = append(v, msg)
		}
	}
	for _, s := range samples {
		if s.Err != "" {
			continue
		}
		checked++
		at := s.At.Format("15:04:05.0")
		var oldestAPI kubeVersion
		apiServer := map[string]kubeVersion{}
		for key, ver := range s.ControlPlane {
			if ver != from && ver != to {
				add("cp-version/"+key+ver, fmt.Sprintf("version-rules: %s %s runs %s, neither %s nor %s", at, key, ver, from, to))
			}
			comp, node, _ := strings.Cut(key, "/")
			if comp != "kube-apiserver" {
				continue
			}
			pv, err := parseKubeVersion(ver)
			if err != nil {
				continue
			}
			apiServer[node] = pv
			if oldestAPI.IsZero() || pv.Less(oldestAPI) {
				oldestAPI = pv
			}
		}
		for node, ver := range s.Kubelets {
			if ver != from && ver != to {
				add("kubelet-version/"+node+ver, fmt.Sprintf("version-rules: %s kubelet of %s is %s, neither %s nor %s", at, node, ver, from, to))
				continue
			}
			kv, err := parseKubeVersion(ver)
			if err != nil {
				continue
			}
			switch roles[node] {
			case api.RoleControlPlaneLB:
			case api.RoleControlPlane:
				if own, ok := apiServer[node]; ok && own.Less(kv) {
					add("newer/"+node, fmt.Sprintf("version-rules: %s kubelet of %s at %s, newer than its kube-apiserver at %s", at, node, kv, own))
				}
			default:
				if !oldestAPI.IsZero() && oldestAPI.Less(kv) {
					add("newer/"+node, fmt.Sprintf("version-rules: %s kubelet of %s at %s, newer than the control plane (a kube-apiserver at %s)", at, node, kv, oldestAPI))
				}
			}
		}
	}
	return checked, v
}

// imageVersion is the version an image reference's tag names
// ("registry.k8s.io/kube-apiserver:v1.34.3" → "1.34.3"), or "".
func imageVersion(ref string) string {
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") {
		return ""
	}
	return strings.TrimPrefix(ref[i+1:], "v")
}
