//go:build linearizability

package linearizability

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/moltproject/molt/api"
	"github.com/moltproject/molt/internal/testenv"
)

const (
	members = 3
	// keys is how many registers (release versions) the clients share:
	// enough that each register's history stays small to check.
	keys = 16
	// clients is how many clients run at once.
	clients = 6
	// callTimeout bounds one call; a write that ends so, or with any
	// answer but a 2xx or a refusal (4xx), may still take effect: its
	// outcome is unknown.
	callTimeout = 3 * time.Second
)

// The model: each release version is a register holding the last value
// written (0: no release yet).
type input struct {
	Write bool
	Key   int
	Value int // written, for a write
}

type output struct {
	Value   int  // read: the value seen (0: not found)
	Unknown bool // write: the outcome is not known
}

var model = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[int][]porcupine.Operation{}
		for _, op := range h {
			k := op.Input.(input).Key
			by[k] = append(by[k], op)
		}
		var out [][]porcupine.Operation
		for _, ops := range by {
			out = append(out, ops)
		}
		return out
	},
	Init: func() any { return 0 },
	Step: func(state, in, out any) (bool, any) {
		i, o := in.(input), out.(output)
		if i.Write {
			return true, i.Value
		}
		return o.Value == state.(int), state
	},
	DescribeOperation: func(in, out any) string {
		i, o := in.(input), out.(output)
		switch {
		case i.Write && o.Unknown:
			return fmt.Sprintf("put(%s, %d) → ?", version(i.Key), i.Value)
		case i.Write:
			return fmt.Sprintf("put(%s, %d)", version(i.Key), i.Value)
		}
		return fmt.Sprintf("get(%s) → %d", version(i.Key), o.Value)
	},
	DescribeState: func(s any) string { return strconv.Itoa(s.(int)) },
}

func version(key int) string { return fmt.Sprintf("1.40.%d", key) }

// release is a valid release whose kubelet URL carries value.
func release(key, value int) api.Release {
	sum := strings.Repeat("ab", 32)
	return api.Release{Version: version(key), EndOfSupport: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC),
		Components: api.ReleaseComponents{
			Kubelet:    api.BinaryArtifact{URL: fmt.Sprintf("http://lin.test/kubelet/%d", value), SHA256: sum},
			Containerd: api.BinaryArtifact{URL: "http://lin.test/containerd", SHA256: sum, Version: "1.7.0"},
		}}
}

func valueOf(r api.Release) (int, error) {
	return strconv.Atoi(strings.TrimPrefix(r.Components.Kubelet.URL, "http://lin.test/kubelet/"))
}

// session is what the clients share: the highest index a completed call
// returned (api.IndexHeader).
type session struct{ index atomic.Uint64 }

func (s *session) observe(h http.Header) {
	v, err := strconv.ParseUint(h.Get(api.IndexHeader), 10, 64)
	if err != nil {
		return
	}
	for {
		old := s.index.Load()
		if v <= old || s.index.CompareAndSwap(old, v) {
			return
		}
	}
}

// recorder collects the history.
type recorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
	// counts by outcome, for the summary, and one answer's body per
	// outcome that was not a success.
	counts  map[string]int
	samples map[string]string
}

func (r *recorder) now() int64 { return int64(time.Since(r.start)) }

func (r *recorder) add(op porcupine.Operation, outcome string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if op.Input != nil {
		r.ops = append(r.ops, op)
	}
	r.counts[outcome]++
}

// sample keeps the first detail of an unsuccessful outcome.
func (r *recorder) sample(outcome string, detail any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.samples[outcome]; !ok {
		r.samples[outcome] = strings.TrimSpace(fmt.Sprint(detail))
	}
}

// TestLinearizableUnderFaults: see the package documentation.
// MOLT_LIN_SEED fixes the fault schedule and the clients' choices (the
// seed of a run is printed); MOLT_LIN_DURATION sets how long clients run
// (default 30s).
func TestLinearizableUnderFaults(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireBinary(t, "ip")
	testenv.RequireBinary(t, "nft")
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("MOLT_LIN_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("MOLT_LIN_SEED: %v", err)
		}
		seed = v
	}
	duration := 30 * time.Second
	if s := os.Getenv("MOLT_LIN_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("MOLT_LIN_DURATION: %v", err)
		}
		duration = d
	}
	t.Logf("seed %d (rerun with MOLT_LIN_SEED=%d), clients run for %v", seed, seed, duration)

	began := time.Now()
	bin := buildCoordinator(t)
	t.Logf("molt-coordinator built in %v", time.Since(began).Round(time.Millisecond))
	network(t, members)
	work, err := os.MkdirTemp("", "molt-linearizability-")
	if err != nil {
		t.Fatal(err)
	}
	c := startCoordinator(t, bin, members, work)
	t.Logf("3 members up in their namespaces at %v", time.Since(began).Round(time.Millisecond))

	sess := &session{}
	rec := &recorder{start: time.Now(), counts: map[string]int{}, samples: map[string]string{}}
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	var wg sync.WaitGroup
	for id := range clients {
		hc := c.httpClient()
		wg.Add(1)
		go func() {
			defer wg.Done()
			runClient(ctx, c, hc, id, rand.New(rand.NewPCG(seed, uint64(id)+1)), sess, rec)
		}()
	}
	faults := nemesis(ctx, t, c, rand.New(rand.NewPCG(seed, 0)))
	wg.Wait()
	history := settleUnknown(rec.ops)
	t.Logf("faults: %s", strings.Join(faults, ", "))
	t.Logf("calls: %v; %d operations checked", rec.counts, len(history))
	for k, v := range rec.samples {
		t.Logf("first %q: %.300s", k, v)
	}
	if rec.counts["write ok"] == 0 || rec.counts["read ok"] == 0 {
		t.Fatalf("the history holds no completed write or read: %v (member logs in %s)", rec.counts, work)
	}
	if len(faults) == 0 {
		t.Fatal("no fault was injected")
	}

	checkStart := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, history, 60*time.Second)
	t.Logf("porcupine: %s in %v", res, time.Since(checkStart).Round(time.Millisecond))
	if res != porcupine.Ok {
		path := filepath.Join(work, "history.html")
		if err := porcupine.VisualizePath(model, info, path); err != nil {
			t.Logf("visualisation: %v", err)
		}
		t.Fatalf("history is %s under faults (seed %d): visualisation %s, member logs in %s", res, seed, path, work)
	}
	_ = os.RemoveAll(work)
}

// settleUnknown returns the history with each write whose outcome is
// unknown settled, as etcd's robustness tests do, so that the checker
// need not try every place such a write could take effect (any time after
// its call, the end of the history included). Every write has a value of
// its own. A write that no read returned may have taken effect or not,
// unseen: dropping it removes no linearization a read depends on. A write
// that a read returned took effect before that read ended: it returns at
// the earliest such end.
func settleUnknown(ops []porcupine.Operation) []porcupine.Operation {
	readEnd := map[int]int64{} // value → earliest end of a read returning it
	for _, op := range ops {
		if in := op.Input.(input); !in.Write {
			v := op.Output.(output).Value
			if e, ok := readEnd[v]; !ok || op.Return < e {
				readEnd[v] = op.Return
			}
		}
	}
	var out []porcupine.Operation
	for _, op := range ops {
		in := op.Input.(input)
		if in.Write && op.Output.(output).Unknown {
			e, ok := readEnd[in.Value]
			if !ok {
				continue
			}
			op.Return = max(e, op.Call)
		}
		out = append(out, op)
	}
	return out
}

// runClient writes and reads registers at random members until ctx ends.
// Each call is one HTTP request to one member, recorded as it ended.
func runClient(ctx context.Context, c *coordinator, hc *http.Client, id int, rng *rand.Rand, sess *session, rec *recorder) {
	seq := 0
	for ctx.Err() == nil {
		m := c.members[rng.IntN(len(c.members))]
		key := rng.IntN(keys)
		base := "https://" + m.httpAddr() + "/v1/releases/" + version(key)
		if rng.IntN(2) == 0 {
			seq++
			value := (id+1)*1_000_000 + seq
			body, _ := json.Marshal(release(key, value))
			call := rec.now()
			// As api/client.Client does, writes too name the index seen.
			status, h, wbody, err := do(hc, http.MethodPut, base, c.token, sess.index.Load(), body)
			in := input{Write: true, Key: key, Value: value}
			switch {
			case err == nil && status < 300:
				sess.observe(h)
				rec.add(porcupine.Operation{ClientId: id, Input: in, Call: call, Output: output{}, Return: rec.now()}, "write ok")
			case err == nil && status < 500:
				rec.add(porcupine.Operation{}, fmt.Sprintf("write refused %d", status))
				rec.sample(fmt.Sprintf("write refused %d", status), m.id+": "+string(wbody))
			case isNotSent(err):
				rec.add(porcupine.Operation{}, "write not sent")
			default:
				rec.add(porcupine.Operation{ClientId: id, Input: in, Call: call, Output: output{Unknown: true}}, "write unknown")
				rec.sample("write unknown", fmt.Sprintf("%s: %d %v %s", m.id, status, err, wbody))
			}
			think(ctx, rng)
			continue
		}
		call := rec.now()
		seen := sess.index.Load()
		status, h, body, err := do(hc, http.MethodGet, base, c.token, seen, nil)
		in := input{Key: key}
		switch {
		case err == nil && status == http.StatusOK:
			var r api.Release
			v, verr := 0, json.Unmarshal(body, &r)
			if verr == nil {
				v, verr = valueOf(r)
			}
			if verr != nil {
				rec.add(porcupine.Operation{}, "read undecodable")
				continue
			}
			sess.observe(h)
			rec.add(porcupine.Operation{ClientId: id, Input: in, Call: call, Output: output{Value: v}, Return: rec.now()}, "read ok")
		case err == nil && status == http.StatusNotFound:
			sess.observe(h)
			rec.add(porcupine.Operation{ClientId: id, Input: in, Call: call, Output: output{}, Return: rec.now()}, "read ok")
		case err == nil:
			rec.add(porcupine.Operation{}, fmt.Sprintf("read failed %d", status))
			rec.sample(fmt.Sprintf("read failed %d", status), m.id+": "+string(body))
		default:
			rec.add(porcupine.Operation{}, "read failed")
			rec.sample("read failed", m.id+": "+err.Error())
		}
		think(ctx, rng)
	}
}

// think paces a client (5–25 ms between calls), which keeps the history
// small enough to check in seconds.
func think(ctx context.Context, rng *rand.Rand) {
	select {
	case <-ctx.Done():
	case <-time.After(5*time.Millisecond + time.Duration(rng.Int64N(int64(20*time.Millisecond)))):
	}
}

// do sends one request (minIndex 0: no X-Molt-Min-Index).
func do(hc *http.Client, method, url, token string, minIndex uint64, body []byte) (int, http.Header, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if minIndex > 0 {
		req.Header.Set(api.MinIndexHeader, strconv.FormatUint(minIndex, 10))
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, resp.Header, nil, err
	}
	return resp.StatusCode, resp.Header, b, nil
}

// isNotSent reports a request that surely never reached a member: the
// connection was refused (the member is down).
func isNotSent(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection refused")
}

// nemesis injects one fault at a time until ctx ends, chosen and timed by
// rng, and heals everything before it returns the faults it injected.
func nemesis(ctx context.Context, t *testing.T, c *coordinator, rng *rand.Rand) []string {
	var log []string
	pause := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	span := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo))) }
	kinds := []string{"kill", "freeze", "partition"}
	for pause(span(time.Second, 2*time.Second)) {
		kind := kinds[rng.IntN(len(kinds))]
		var m *member
		if rng.IntN(2) == 0 {
			m = c.leader()
		}
		target := "leader"
		if m == nil {
			m, target = c.members[rng.IntN(len(c.members))], "member"
		}
		hold := span(2*time.Second, 5*time.Second)
		switch kind {
		case "kill":
			m.kill()
		case "freeze":
			if err := m.signal(syscall.SIGSTOP); err != nil {
				t.Errorf("freeze %s: %v", m.id, err)
			}
		case "partition":
			if err := partition(m.i, members); err != nil {
				t.Errorf("partition %s: %v", m.id, err)
			}
		}
		entry := fmt.Sprintf("%s %s(%s) for %.1fs", kind, target, m.id, hold.Seconds())
		log = append(log, entry)
		t.Log("fault: " + entry)
		pause(hold) // cut short when ctx ends: the fault is healed at once
		switch kind {
		case "kill":
			if err := m.start(c.bin); err != nil {
				t.Errorf("restart %s: %v", m.id, err)
			}
		case "freeze":
			if err := m.signal(syscall.SIGCONT); err != nil {
				t.Errorf("thaw %s: %v", m.id, err)
			}
		case "partition":
			if err := heal(m.i); err != nil {
				t.Errorf("heal %s: %v", m.id, err)
			}
		}
	}
	return log
}
