// Command inject loads or withdraws N host routes in a gobgpd over its gRPC API, for
// bench/routing_daemons.py. It prints one JSON line: the operation, the routes and the seconds
// the API took (from the first request to the daemon's last answer).
//
// Operations:
//
//	add           AddPathStream, -batch paths per stream message (the fastest documented path)
//	add-unary     one AddPath call per route, -workers calls in flight
//	withdraw      AddPathStream with IsWithdraw paths, -batch per message (per prefix, streamed)
//	delete-each   one DeletePath call per route, -workers calls in flight
//	delete-all    one DeletePath call without a path: every local path of the family
//
// Route i is base+i with the family's host prefix length (/32 or /128).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"sync"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

type options struct {
	addr, op, family, base, nexthop string
	n, batch, workers               int
}

type result struct {
	Op       string  `json:"op"`
	Family   string  `json:"family"`
	Routes   int     `json:"routes"`
	Batch    int     `json:"batch"`
	Workers  int     `json:"workers"`
	ElapsedS float64 `json:"elapsed_s"`
}

func main() {
	var o options
	flag.StringVar(&o.addr, "addr", "127.0.0.1:50051", "gobgpd gRPC address")
	flag.StringVar(&o.op, "op", "add", "add | add-unary | withdraw | delete-each | delete-all")
	flag.StringVar(&o.family, "family", "ipv4", "ipv4 | ipv6")
	flag.StringVar(&o.base, "base", "198.18.1.0", "first route's address")
	flag.StringVar(&o.nexthop, "nexthop", "198.18.0.1", "next hop of every route")
	flag.IntVar(&o.n, "n", 1000, "number of routes")
	flag.IntVar(&o.batch, "batch", 1000, "paths per AddPathStream message")
	flag.IntVar(&o.workers, "workers", 8, "unary calls in flight")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "inject: %v\n", err)
		os.Exit(1)
	}
}

func run(o options) error {
	fam, plen, err := familyOf(o.family)
	if err != nil {
		return err
	}
	base := net.ParseIP(o.base)
	if base == nil {
		return fmt.Errorf("-base %q: not an IP address", o.base)
	}
	if o.n < 0 || o.batch < 1 || o.workers < 1 {
		return fmt.Errorf("-n must be >= 0, -batch and -workers >= 1")
	}
	conn, err := grpc.Dial(o.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(1<<30)))
	if err != nil {
		return fmt.Errorf("dial %s: %w", o.addr, err)
	}
	defer conn.Close()
	client := api.NewGobgpApiClient(conn)
	ctx := context.Background()
	// Attributes are the same for every route: build them once.
	origin, _ := anypb.New(&api.OriginAttribute{Origin: 0})
	attrs := []*anypb.Any{origin}
	if o.family == "ipv4" {
		nh, _ := anypb.New(&api.NextHopAttribute{NextHop: o.nexthop})
		attrs = append(attrs, nh)
	}
	mkPath := func(i int, withdraw bool) *api.Path {
		nlri, _ := anypb.New(&api.IPAddressPrefix{PrefixLen: plen, Prefix: addrAt(base, i).String()})
		pattrs := attrs
		if o.family == "ipv6" {
			mp, _ := anypb.New(&api.MpReachNLRIAttribute{Family: fam, NextHops: []string{o.nexthop},
				Nlris: []*anypb.Any{nlri}})
			pattrs = append(append([]*anypb.Any{}, attrs...), mp)
		}
		return &api.Path{Family: fam, Nlri: nlri, Pattrs: pattrs, IsWithdraw: withdraw}
	}
	start := time.Now()
	switch o.op {
	case "add", "withdraw":
		err = stream(ctx, client, o, func(i int) *api.Path { return mkPath(i, o.op == "withdraw") })
	case "add-unary":
		err = parallel(o, func(i int) error {
			_, e := client.AddPath(ctx, &api.AddPathRequest{TableType: api.TableType_GLOBAL, Path: mkPath(i, false)})
			return e
		})
	case "delete-each":
		err = parallel(o, func(i int) error {
			_, e := client.DeletePath(ctx, &api.DeletePathRequest{TableType: api.TableType_GLOBAL, Family: fam,
				Path: mkPath(i, false)})
			return e
		})
	case "delete-all":
		_, err = client.DeletePath(ctx, &api.DeletePathRequest{TableType: api.TableType_GLOBAL, Family: fam})
	default:
		err = fmt.Errorf("-op %q: unknown", o.op)
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(result{Op: o.op, Family: o.family, Routes: o.n, Batch: o.batch,
		Workers: o.workers, ElapsedS: time.Since(start).Seconds()})
}

func familyOf(name string) (*api.Family, uint32, error) {
	switch name {
	case "ipv4":
		return &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}, 32, nil
	case "ipv6":
		return &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}, 128, nil
	}
	return nil, 0, fmt.Errorf("-family %q: want ipv4 or ipv6", name)
}

// addrAt is base + i, in base's family.
func addrAt(base net.IP, i int) net.IP {
	b := base.To4()
	if b == nil {
		b = base.To16()
	}
	v := new(big.Int).SetBytes(b)
	v.Add(v, big.NewInt(int64(i)))
	out := v.Bytes()
	ip := make(net.IP, len(b))
	copy(ip[len(b)-len(out):], out)
	return ip
}

// stream sends the N paths over one AddPathStream, batch paths per message, and waits for the
// daemon's answer (it answers after the last message is applied to its RIB).
func stream(ctx context.Context, c api.GobgpApiClient, o options, path func(int) *api.Path) error {
	s, err := c.AddPathStream(ctx)
	if err != nil {
		return fmt.Errorf("AddPathStream: %w", err)
	}
	for i := 0; i < o.n; i += o.batch {
		end := min(i+o.batch, o.n)
		req := &api.AddPathStreamRequest{TableType: api.TableType_GLOBAL, Paths: make([]*api.Path, 0, end-i)}
		for j := i; j < end; j++ {
			req.Paths = append(req.Paths, path(j))
		}
		if err := s.Send(req); err != nil {
			return fmt.Errorf("AddPathStream send at route %d (%d bytes): %w", i, proto.Size(req), err)
		}
	}
	if _, err := s.CloseAndRecv(); err != nil {
		return fmt.Errorf("AddPathStream close: %w", err)
	}
	return nil
}

// parallel runs call(i) for i in [0, n) on o.workers goroutines; the first error wins.
func parallel(o options, call func(int) error) error {
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	next := make(chan int, o.workers*4)
	for w := 0; w < o.workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := call(i); err != nil {
					once.Do(func() { first = fmt.Errorf("route %d: %w", i, err) })
				}
			}
		}()
	}
	for i := 0; i < o.n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}
