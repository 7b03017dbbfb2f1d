// Command raftflood measures three molt-coordinator members while another
// process floods their Raft ports with TCP connections that never start
// TLS and with handshakes that stop half way, as an outside attacker can
// (docs/security.md, Connection limits).
//
//	go build -o bin/ ./cmd/molt-coordinator ./scripts/raftflood
//	bin/raftflood run -coordinator bin/molt-coordinator
//
// run starts the members on loopback (the first bootstraps, the others
// join it with its CA pin and admin token, as docs/security.md says),
// writes through every member without pause, and after a quiet baseline
// starts itself again as "raftflood flood" (its own process, so its own
// file descriptor limit, raised to what the flood needs) against the
// members' Raft ports. It samples each member's open descriptors and RSS
// from /proc and reports write latency per member and phase, and each
// member's molt_tls_handshakes_refused_total. The flood comes from
// 127.0.1.x: other hosts than the members' 127.0.0.1. Needs Linux, and
// root or CAP_SYS_RESOURCE for more descriptors than the hard limit.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	pollpkg "github.com/moltproject/molt/internal/poll"
	"github.com/moltproject/molt/trust"
)

// caPin is the pin a joining member is given (trust.Pin of the CA).
func caPin(caPEM []byte) (string, error) {
	cert, err := trust.ParseCert(caPEM)
	if err != nil {
		return "", err
	}
	return trust.Pin(cert), nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: raftflood run|flood [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = run(os.Args[2:])
	case "flood":
		err = flood(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "raftflood:", err)
		os.Exit(1)
	}
}

// ---- the flood (its own process) ----

func flood(args []string) error {
	fs := flag.NewFlagSet("flood", flag.ExitOnError)
	targets := fs.String("targets", "", "comma-separated host:port to flood")
	idle := fs.Int("idle", 20000, "connections that never send a byte, spread over the targets")
	stalled := fs.Int("stalled", 2000, "connections that send the start of a ClientHello and stop")
	hosts := fs.Int("hosts", 64, "source addresses: this many, from 127.0.1.<first-host>")
	firstHost := fs.Int("first-host", 1, "the first source address's last byte")
	redial := fs.Duration("redial", time.Second, "a slot the server closed connects again after this")
	duration := fs.Duration("duration", time.Minute, "how long to flood")
	_ = fs.Parse(args)
	tgts := strings.Split(*targets, ",")
	total := *idle + *stalled
	if err := raiseNOFILE(uint64(total + 1024)); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	var open, dials, closedByServer, dialErrs atomic.Int64
	// A partial TLS record: a handshake record header announcing 512
	// bytes, and the first bytes of a ClientHello.
	partial := []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03}
	sem := make(chan struct{}, 256) // connects in flight, so SYNs are not dropped in bulk
	var wg sync.WaitGroup
	for i := range total {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(*firstHost+i%*hosts))}
			d := net.Dialer{LocalAddr: src, Timeout: 5 * time.Second}
			tgt := tgts[i%len(tgts)]
			for ctx.Err() == nil {
				sem <- struct{}{}
				c, err := d.DialContext(ctx, "tcp", tgt)
				<-sem
				dials.Add(1)
				if err != nil {
					dialErrs.Add(1)
				} else {
					open.Add(1)
					if i < *stalled {
						_, _ = c.Write(partial)
					}
					stop := context.AfterFunc(ctx, func() { c.Close() })
					_, _ = c.Read(make([]byte, 1)) // blocks until the server closes it
					stop()
					c.Close()
					open.Add(-1)
					if ctx.Err() == nil {
						closedByServer.Add(1)
					}
				}
				select {
				case <-ctx.Done():
				case <-time.After(*redial):
				}
			}
		}()
	}
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	report := func() {
		b, _ := json.Marshal(map[string]int64{"open": open.Load(), "dials": dials.Load(), "closed_by_server": closedByServer.Load(), "dial_errors": dialErrs.Load()})
		fmt.Println(string(b))
	}
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			report()
			return nil
		case <-tick.C:
			report()
		}
	}
}

// raiseNOFILE makes the soft descriptor limit at least need: above the
// hard limit too where the process may (root with CAP_SYS_RESOURCE).
func raiseNOFILE(need uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	if need > lim.Max {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: need, Max: need}); err == nil {
			return nil
		}
		return fmt.Errorf("the flood needs %d descriptors, the hard limit is %d and may not be raised here: use more -procs", need, lim.Max)
	}
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: need, Max: lim.Max})
}

// hardNOFILE is this process's hard descriptor limit.
func hardNOFILE() uint64 {
	var lim syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	return lim.Max
}

// ---- the measurement ----

type member struct {
	id, dataDir, http, raft string
	cmd                     *exec.Cmd
}

type sample struct {
	phase   string
	fds     int
	rssKiB  int
	elapsed time.Duration
}

type writeStat struct {
	phase string
	lat   time.Duration
	err   string
}

func run(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	bin := fs.String("coordinator", "bin/molt-coordinator", "molt-coordinator binary")
	idle := fs.Int("idle", 20000, "flood: idle connections")
	stalled := fs.Int("stalled", 2000, "flood: stalled handshakes")
	target := fs.String("target", "all", "whose Raft ports: all (spread), follower (one follower takes the whole flood), or api (every member's API port)")
	redial := fs.Duration("redial", time.Second, "flood: a slot the server closed connects again after this")
	baseline := fs.Duration("baseline", 15*time.Second, "writes before the flood")
	duration := fs.Duration("duration", 60*time.Second, "flood duration")
	keep := fs.Bool("keep", false, "keep the work directory")
	fresh := fs.Bool("fresh", false, "every write on a new connection (a new client each time, as moltctl is) instead of kept-alive ones")
	nprocs := fs.Int("procs", 0, "flood processes (0: as many as the hard descriptor limit needs)")
	_ = fs.Parse(args)

	work, err := os.MkdirTemp("", "raftflood")
	if err != nil {
		return err
	}
	if !*keep {
		defer os.RemoveAll(work)
	}
	ports, err := freePorts(6)
	if err != nil {
		return err
	}
	var ms []*member
	for i := range 3 {
		id := fmt.Sprintf("m%d", i+1)
		ms = append(ms, &member{id: id, dataDir: filepath.Join(work, id),
			http: fmt.Sprintf("127.0.0.1:%d", ports[2*i]), raft: fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])})
	}
	defer func() {
		for _, m := range ms {
			if m.cmd != nil {
				_ = m.cmd.Process.Kill()
				_ = m.cmd.Wait()
			}
		}
	}()
	start := func(m *member, extra ...string) error {
		logf, err := os.Create(filepath.Join(work, m.id+".log"))
		if err != nil {
			return err
		}
		m.cmd = exec.Command(*bin, append([]string{"--node-id", m.id, "--data-dir", m.dataDir, "--http-addr", m.http,
			"--raft-addr", m.raft, "--log-level", "warn", "--web=false"}, extra...)...)
		m.cmd.Stdout, m.cmd.Stderr = logf, logf
		return m.cmd.Start()
	}
	if err := start(ms[0]); err != nil {
		return err
	}
	caFile, tokFile := filepath.Join(ms[0].dataDir, "tls", "ca.crt"), filepath.Join(ms[0].dataDir, "admin.token")
	var caPEM, tok []byte
	if err := poll(60*time.Second, func() bool {
		caPEM, _ = os.ReadFile(caFile)
		tok, _ = os.ReadFile(tokFile)
		return len(caPEM) > 0 && len(tok) > 0
	}); err != nil {
		return fmt.Errorf("first member's CA and token: %w", err)
	}
	token := strings.TrimSpace(string(tok))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	pin, err := caPin(caPEM)
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, MaxIdleConnsPerHost: 4, DisableKeepAlives: *fresh}}
	call := func(method, url string, body []byte) (int, []byte, error) {
		req, _ := http.NewRequest(method, url, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b, nil
	}
	ready := func(m *member) error {
		return poll(60*time.Second, func() bool {
			st, _, err := call(http.MethodGet, "https://"+m.http+"/readyz", nil)
			return err == nil && st == http.StatusOK
		})
	}
	if err := ready(ms[0]); err != nil {
		return err
	}
	for _, m := range ms[1:] {
		if err := start(m, "--join", ms[0].http, "--ca-pin", pin, "--join-token-file", tokFile); err != nil {
			return err
		}
		if err := ready(m); err != nil {
			return fmt.Errorf("%s ready: %w", m.id, err)
		}
	}
	if err := poll(60*time.Second, func() bool {
		st, b, err := call(http.MethodGet, "https://"+ms[0].http+"/v1/members", nil)
		var out []json.RawMessage
		return err == nil && st == 200 && json.Unmarshal(b, &out) == nil && len(out) == 3
	}); err != nil {
		return fmt.Errorf("three voters: %w", err)
	}
	leader := ""
	{
		_, b, _ := call(http.MethodGet, "https://"+ms[0].http+"/v1/members", nil)
		var out []struct {
			ID     string `json:"id"`
			Leader bool   `json:"leader"`
		}
		_ = json.Unmarshal(b, &out)
		for _, m := range out {
			if m.Leader {
				leader = m.ID
			}
		}
	}
	var lim syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	fmt.Printf("members up (leader %s), each with RLIMIT_NOFILE %d; work dir %s\n", leader, lim.Cur, work)

	var floodTargets []string
	switch *target {
	case "all":
		for _, m := range ms {
			floodTargets = append(floodTargets, m.raft)
		}
	case "follower":
		for _, m := range ms {
			if m.id != leader {
				floodTargets = []string{m.raft}
				fmt.Printf("flood at follower %s only\n", m.id)
				break
			}
		}
	case "api":
		for _, m := range ms {
			floodTargets = append(floodTargets, m.http)
		}
	default:
		return fmt.Errorf("-target %q: all, follower or api", *target)
	}

	var phase atomic.Value
	phase.Store("baseline")
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	writes := map[string][]writeStat{}
	samples := map[string][]sample{}
	var wg sync.WaitGroup
	t0 := time.Now()
	for i, m := range ms {
		wg.Add(2)
		go func() { // writes through this member, one at a time
			defer wg.Done()
			for seq := 0; ctx.Err() == nil; seq++ {
				body := releaseBody(i, seq)
				ph := phase.Load().(string)
				begin := time.Now()
				st, b, err := call(http.MethodPut, "https://"+m.http+"/v1/releases/1.40."+strconv.Itoa(i), body)
				ws := writeStat{phase: ph, lat: time.Since(begin)}
				switch {
				case err != nil:
					ws.err = err.Error()
				case st >= 300:
					ws.err = fmt.Sprintf("%d %s", st, bytes.TrimSpace(b))
				}
				mu.Lock()
				writes[m.id] = append(writes[m.id], ws)
				mu.Unlock()
			}
		}()
		go func() { // descriptors and RSS every second
			defer wg.Done()
			for ctx.Err() == nil {
				fds, rss := procStats(m.cmd.Process.Pid)
				mu.Lock()
				samples[m.id] = append(samples[m.id], sample{phase: phase.Load().(string), fds: fds, rssKiB: rss, elapsed: time.Since(t0)})
				mu.Unlock()
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
		}()
	}
	time.Sleep(*baseline)

	// Each flood process holds its share, within its own descriptor
	// limit: as many processes as the hard limit needs.
	procs := *nprocs
	if procs == 0 {
		procs = int((uint64(*idle+*stalled) + hardNOFILE() - 2048) / (hardNOFILE() - 2048))
	}
	self, _ := os.Executable()
	phase.Store("flood")
	var fls []*exec.Cmd
	var outs []io.Reader
	for p := range procs {
		share := func(n int) string { return strconv.Itoa(n/procs + btoi(p < n%procs)) }
		fl := exec.Command(self, "flood", "-targets", strings.Join(floodTargets, ","), "-idle", share(*idle),
			"-stalled", share(*stalled), "-redial", redial.String(), "-duration", duration.String(),
			"-first-host", strconv.Itoa(1+p*64))
		out, _ := fl.StdoutPipe()
		fl.Stderr = os.Stderr
		if err := fl.Start(); err != nil {
			cancel()
			return err
		}
		fls = append(fls, fl)
		outs = append(outs, out)
	}
	var floodFDs []int
	go func() {
		for ctx.Err() == nil {
			sum := 0
			for _, fl := range fls {
				fds, _ := procStats(fl.Process.Pid)
				sum += fds
			}
			mu.Lock()
			floodFDs = append(floodFDs, sum)
			mu.Unlock()
			time.Sleep(time.Second)
		}
	}()
	var rg sync.WaitGroup
	for p, out := range outs {
		rg.Add(1)
		go func() {
			defer rg.Done()
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				fmt.Printf("  flood[%d] %5.0fs %s\n", p, time.Since(t0).Seconds(), sc.Text())
			}
		}()
	}
	rg.Wait()
	var floodErr error
	for _, fl := range fls {
		floodErr = errors.Join(floodErr, fl.Wait())
	}
	phase.Store("after")
	time.Sleep(5 * time.Second)
	cancel()
	wg.Wait()
	if floodErr != nil {
		return fmt.Errorf("flood process: %w", floodErr)
	}

	conns := "kept-alive connections"
	if *fresh {
		conns = "a new connection per write"
	}
	fmt.Printf("\nwrites: PUT /v1/releases through each member, one at a time, %s\n", conns)
	fmt.Printf("flood: %d idle + %d stalled connections, redial %s, at %s, for %s; %d flood processes held up to %d descriptors together\n\n",
		*idle, *stalled, *redial, strings.Join(floodTargets, " "), *duration, procs, slices.Max(append(floodFDs, 0)))
	fmt.Println("| member | phase | writes ok | failed | p50 ms | p99 ms | max ms | fds max | RSS max MiB |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, m := range ms {
		role := ""
		if m.id == leader {
			role = " (leader)"
		}
		for _, ph := range []string{"baseline", "flood", "after"} {
			var lats []time.Duration
			failed := 0
			var firstErr string
			for _, w := range writes[m.id] {
				if w.phase != ph {
					continue
				}
				if w.err != "" {
					failed++
					if firstErr == "" {
						firstErr = w.err
					}
					continue
				}
				lats = append(lats, w.lat)
			}
			maxFD, maxRSS := 0, 0
			for _, s := range samples[m.id] {
				if s.phase == ph {
					maxFD, maxRSS = max(maxFD, s.fds), max(maxRSS, s.rssKiB)
				}
			}
			fmt.Printf("| %s%s | %s | %d | %d | %s | %s | %s | %d | %.1f |\n", m.id, role, ph, len(lats), failed,
				pct(lats, 50), pct(lats, 99), pct(lats, 100), maxFD, float64(maxRSS)/1024)
			if firstErr != "" {
				fmt.Printf("|  | first failure: %.200s |\n", firstErr)
			}
		}
	}
	fmt.Println()
	for _, m := range ms {
		_, b, err := call(http.MethodGet, "https://"+m.http+"/metrics", nil)
		if err != nil {
			fmt.Printf("%s metrics: %v\n", m.id, err)
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "molt_tls_handshakes_refused_total{") && !strings.HasSuffix(line, " 0") {
				fmt.Printf("%s %s\n", m.id, line)
			}
		}
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func releaseBody(key, seq int) []byte {
	sum := strings.Repeat("ab", 32)
	b, _ := json.Marshal(map[string]any{
		"version": "1.40." + strconv.Itoa(key), "endOfSupport": "2030-01-01T00:00:00Z",
		"components": map[string]any{
			"kubelet":    map[string]string{"url": fmt.Sprintf("http://flood.test/kubelet/%d", seq), "sha256": sum},
			"containerd": map[string]string{"url": "http://flood.test/containerd", "sha256": sum, "version": "1.7.0"},
		},
	})
	return b
}

// procStats reads a process's open descriptors and resident set (KiB).
func procStats(pid int) (fds, rssKiB int) {
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		fds = len(ents)
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				rssKiB, _ = strconv.Atoi(strings.Fields(v)[0])
			}
		}
	}
	return fds, rssKiB
}

func pct(d []time.Duration, p int) string {
	if len(d) == 0 {
		return "-"
	}
	slices.Sort(d)
	i := min(len(d)-1, (len(d)*p+99)/100-1)
	return fmt.Sprintf("%.1f", float64(d[max(i, 0)].Microseconds())/1000)
}

func freePorts(n int) ([]int, error) {
	var out []int
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

func poll(d time.Duration, cond func() bool) error {
	return pollpkg.Until(context.Background(), d, 100*time.Millisecond, func(context.Context) (bool, string, error) {
		return cond(), "", nil
	})
}
