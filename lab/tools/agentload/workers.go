package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// The agents run in worker processes of this same binary (-worker), at
// most -agents-per-worker each: a process may hold no more descriptors
// than its hard limit, which an unprivileged container cannot raise (20,000
// here, without CAP_SYS_RESOURCE), and 15,000 agents each with a kept
// connection, plus the connections being set up, ran out of them in one
// process. A packaged agent holds one connection, so splitting the fleet
// changes nothing the members see.
//
// The parent and a worker speak in lines: the parent writes the
// workerSpec as one JSON line on the worker's stdin, then "measure" and
// "stop"; the worker writes "ready" on its stdout once every agent of its
// share is registered and beating, and its workerReport as one JSON line
// after "stop". Progress goes to stderr, which the parent passes on.

// workerSpec is one worker's share of the fleet.
type workerSpec struct {
	Endpoints []string      `json:"endpoints"`
	CA        string        `json:"ca"` // PEM
	Token     string        `json:"token"`
	Cluster   string        `json:"cluster"`
	Nodes     []string      `json:"nodes"`
	First     int           `json:"first"` // the first node's place in the fleet
	Total     int           `json:"total"`
	Interval  time.Duration `json:"interval"`
	PollWait  time.Duration `json:"pollWait"`
}

// workerReport is what one worker measured.
type workerReport struct {
	Latencies map[int][]time.Duration `json:"latencies"` // endpoint index → beats measured
	Beats     int64                   `json:"beats"`
	Failed    int64                   `json:"failed"`
	Retries   int64                   `json:"retries"`
}

// runWorker is the -worker mode: it reads its spec, runs its agents and
// answers the parent's lines.
func runWorker(name string) error {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	if !in.Scan() {
		return fmt.Errorf("no spec on stdin: %v", in.Err())
	}
	var spec workerSpec
	if err := json.Unmarshal(in.Bytes(), &spec); err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	f, err := newFleet(spec)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.progress(ctx, name)
	if err := f.start(ctx); err != nil {
		return err
	}
	fmt.Println("ready")
	for in.Scan() {
		switch in.Text() {
		case "measure":
			f.measure(true)
		case "stop":
			f.measure(false)
			f.stop()
			return json.NewEncoder(os.Stdout).Encode(workerReport{Latencies: f.latencies, Beats: f.beats.Load(), Failed: f.failed.Load(), Retries: f.retries.Load()})
		}
	}
	return fmt.Errorf("stdin closed before stop: %v", in.Err())
}

// progress writes a line every 10 s: registered agents, the beats
// answered and failed since the last line, the latest failure.
func (f *fleet) progress(ctx context.Context, name string) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	var ok0, bad0 int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ok, bad := f.okBeats.Load(), f.badBeats.Load()
		last := ""
		if p := f.lastErr.Swap(nil); p != nil {
			last = "; latest failure: " + *p
		}
		logf("%s: %d/%d registered, beats answered %d, failed %d in 10 s, tried again %d%s",
			name, f.registered.Load(), len(f.agents), ok-ok0, bad-bad0, f.retries.Load(), last)
		ok0, bad0 = ok, bad
	}
}

// worker is the parent's handle on one worker process.
type worker struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

// startWorkers splits nodes into shares of at most per and starts a
// worker for each, returning once every worker has said ready.
func startWorkers(ctx context.Context, base workerSpec, nodes []string, per int) ([]*worker, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var ws []*worker
	for first := 0; first < len(nodes); first += per {
		spec := base
		spec.Nodes, spec.First, spec.Total = nodes[first:min(first+per, len(nodes))], first, len(nodes)
		name := fmt.Sprintf("worker %d", len(ws)+1)
		cmd := exec.CommandContext(ctx, self, "-worker", name)
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return ws, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return ws, err
		}
		if err := cmd.Start(); err != nil {
			return ws, err
		}
		w := &worker{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
		w.out.Buffer(make([]byte, 1<<20), 256<<20)
		ws = append(ws, w)
		b, _ := json.Marshal(spec)
		if _, err := fmt.Fprintf(stdin, "%s\n", b); err != nil {
			return ws, err
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(ws))
	for i, w := range ws {
		wg.Go(func() {
			if !w.out.Scan() || w.out.Text() != "ready" {
				errs[i] = fmt.Errorf("worker %d did not get ready: %q %v", i+1, w.out.Text(), w.out.Err())
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return ws, err
		}
	}
	return ws, nil
}

// tell writes line to every worker.
func tell(ws []*worker, line string) error {
	for _, w := range ws {
		if _, err := fmt.Fprintln(w.stdin, line); err != nil {
			return err
		}
	}
	return nil
}

// collect stops every worker and merges their reports.
func collect(ws []*worker) (workerReport, error) {
	all := workerReport{Latencies: map[int][]time.Duration{}}
	if err := tell(ws, "stop"); err != nil {
		return all, err
	}
	for i, w := range ws {
		if !w.out.Scan() {
			return all, fmt.Errorf("worker %d sent no report: %v", i+1, w.out.Err())
		}
		var r workerReport
		if err := json.NewDecoder(strings.NewReader(w.out.Text())).Decode(&r); err != nil {
			return all, fmt.Errorf("worker %d report: %w", i+1, err)
		}
		for k, v := range r.Latencies {
			all.Latencies[k] = append(all.Latencies[k], v...)
		}
		all.Beats += r.Beats
		all.Failed += r.Failed
		all.Retries += r.Retries
		w.stdin.Close()
		_ = w.cmd.Wait()
	}
	return all, nil
}

// stopWorkers ends workers that are still running (on an error).
func stopWorkers(ws []*worker) {
	for _, w := range ws {
		if w.cmd.Process != nil && w.cmd.ProcessState == nil {
			_ = w.cmd.Process.Kill()
			_ = w.cmd.Wait()
		}
	}
}
