// Command etcdput measures etcd's commit latency as molt's perf table
// compares it with raftstore's (scripts/perf.sh, row P4): one small put
// at a time, each waiting for the cluster to commit it (a quorum fsynced
// it), through etcd's own Go client. It prints "p50-ms P99-ms".
//
// It is a module of its own so that molt's module does not depend on
// etcd's client.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func main() {
	endpoints := flag.String("endpoints", "http://127.0.0.1:2379", "comma-separated client URLs")
	n := flag.Int("n", 2000, "puts to time")
	warm := flag.Int("warmup", 200, "puts before timing")
	flag.Parse()
	cl, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(*endpoints, ","), DialTimeout: 10 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdput:", err)
		os.Exit(1)
	}
	defer cl.Close()
	var lat []time.Duration
	for i := 0; i < *warm+*n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		_, err := cl.Put(ctx, fmt.Sprintf("k%d", i%64), "v")
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, "etcdput:", err)
			os.Exit(1)
		}
		if i >= *warm {
			lat = append(lat, time.Since(start))
		}
	}
	slices.Sort(lat)
	at := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	fmt.Printf("%.3f %.3f\n", at(0.50), at(0.99))
}
