package main

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// prefix starts the name of every network namespace, shared-memory directory,
// scratch directory and lock file the harness makes, so a later run can find
// and sweep what a dead one left behind (stale.go). Interface names live inside those
// namespaces and go with them.
const prefix = "kvnf"

// topology is one run's network: a switch namespace holding a Linux bridge,
// and one namespace per node and one for the control process (engines and
// observer), each joined to the bridge by a veth pair. Nothing is created in
// the caller's namespace: every link, nftables rule and qdisc lives in a
// namespace the run made, so deleting the namespaces removes them all.
type topology struct {
	run    string // unique run id: "<prefix><hex>"
	nodes  int
	subnet netip.Prefix
}

func newTopology(run string, nodes int, octet byte) topology {
	return topology{run: run, nodes: nodes, subnet: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 213, octet, 0}), 24)}
}

func (t topology) switchNS() string    { return t.run + "-sw" }
func (t topology) ctlNS() string       { return t.run + "-ctl" }
func (t topology) nodeNS(i int) string { return t.run + "-n" + strconv.Itoa(i) }
func (t topology) nodeIP(i int) string { return t.ip(10 + i) }
func (t topology) ctlIP() string       { return t.ip(2) }
func (t topology) swPort(i int) string { return "n" + strconv.Itoa(i) } // switch-side veth of node i
func (t topology) namespaces() []string {
	return append([]string{t.switchNS(), t.ctlNS()}, t.nodeNSs()...)
}

func (t topology) nodeNSs() []string {
	out := make([]string, t.nodes)
	for i := range out {
		out[i] = t.nodeNS(i)
	}
	return out
}

func (t topology) ip(host int) string {
	a := t.subnet.Addr().As4()
	a[3] = byte(host)
	return netip.AddrFrom4(a).String()
}

// run runs a command and returns its combined output, naming the command in the error.
func run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// nft runs an nftables script in the switch namespace.
func (t topology) nft(ctx context.Context, script string) error {
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", t.switchNS(), "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("nft in %s: %w: %s\nscript:\n%s", t.switchNS(), err, strings.TrimSpace(string(out)), script)
	}
	return nil
}

// up creates the namespaces, the bridge, the veth pairs and the empty
// nftables table whose chain the nemesis fills. On error the caller still
// calls down.
func (t topology) up(ctx context.Context) error {
	for _, ns := range t.namespaces() {
		if _, err := run(ctx, "ip", "netns", "add", ns); err != nil {
			return err
		}
		if _, err := run(ctx, "ip", "-n", ns, "link", "set", "lo", "up"); err != nil {
			return err
		}
	}
	sw := t.switchNS()
	if _, err := run(ctx, "ip", "-n", sw, "link", "add", "br0", "type", "bridge"); err != nil {
		return err
	}
	if _, err := run(ctx, "ip", "-n", sw, "link", "set", "br0", "up"); err != nil {
		return err
	}
	attach := func(ns, port, ip string) error {
		steps := [][]string{
			{"-n", sw, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns},
			{"-n", sw, "link", "set", port, "master", "br0", "up"},
			{"-n", ns, "addr", "add", ip + "/24", "dev", "eth0"},
			{"-n", ns, "link", "set", "eth0", "up"},
		}
		for _, s := range steps {
			if _, err := run(ctx, "ip", s...); err != nil {
				return err
			}
		}
		return nil
	}
	if err := attach(t.ctlNS(), "ctl", t.ctlIP()); err != nil {
		return err
	}
	for i := range t.nodes {
		if err := attach(t.nodeNS(i), t.swPort(i), t.nodeIP(i)); err != nil {
			return err
		}
	}
	return t.setRules(ctx, nil)
}

// setRules replaces the forward chain of the switch's bridge table with
// rules, atomically (one nft transaction).
func (t topology) setRules(ctx context.Context, rules []string) error {
	var b strings.Builder
	b.WriteString("table bridge kvnf {}\ndelete table bridge kvnf\ntable bridge kvnf {\n  chain forward {\n    type filter hook forward priority 0; policy accept;\n")
	for _, r := range rules {
		b.WriteString("    " + r + "\n")
	}
	b.WriteString("  }\n}\n")
	return t.nft(ctx, b.String())
}

// setRate caps node i's link at rate bits per second both ways (tbf on the
// switch port, egress towards the node, and on the node's eth0); 0 removes
// the caps.
func (t topology) setRate(ctx context.Context, i int, rate int64) error {
	type dev struct{ ns, link string }
	var errs []string
	for _, d := range []dev{{t.switchNS(), t.swPort(i)}, {t.nodeNS(i), "eth0"}} {
		run(ctx, "ip", "netns", "exec", d.ns, "tc", "qdisc", "del", "dev", d.link, "root") // absent is fine
		if rate <= 0 {
			continue
		}
		burst := max(rate/8/50, 16<<10) // 20 ms worth, at least 16 KiB
		if _, err := run(ctx, "ip", "netns", "exec", d.ns, "tc", "qdisc", "add", "dev", d.link, "root", "tbf",
			"rate", strconv.FormatInt(rate, 10)+"bit", "burst", strconv.FormatInt(burst, 10), "latency", "200ms"); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("cannot cap node %d's link: %s", i, strings.Join(errs, "; "))
	}
	return nil
}

// down kills every process still inside the run's namespaces and deletes
// them, which removes their links, rules and qdiscs.
func (t topology) down(ctx context.Context) error {
	return sweepNamespaces(ctx, func(ns string) bool { return strings.HasPrefix(ns, t.run+"-") })
}

// sweepNamespaces kills the processes in, then deletes, each namespace match selects.
func sweepNamespaces(ctx context.Context, match func(string) bool) error {
	out, err := run(ctx, "ip", "netns", "list")
	if err != nil {
		return err
	}
	var mine []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && match(f[0]) {
			mine = append(mine, f[0])
		}
	}
	slices.Sort(mine)
	var errs []string
	for _, ns := range mine {
		killNamespacePids(ctx, ns)
		if _, err := run(ctx, "ip", "netns", "del", ns); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("cannot delete namespaces: %s", strings.Join(errs, "; "))
	}
	return nil
}

// killNamespacePids SIGKILLs every process whose network namespace is ns (a
// namespace this harness made, so every such process is one it started) and
// waits up to 5 s for them to go.
func killNamespacePids(ctx context.Context, ns string) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, _ := run(ctx, "ip", "netns", "pids", ns)
		pids := strings.Fields(out)
		if len(pids) == 0 || time.Now().After(deadline) {
			return
		}
		for _, p := range pids {
			if pid, err := strconv.Atoi(p); err == nil && pid != os.Getpid() {
				syscall.Kill(pid, syscall.SIGCONT)
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(50 * time.Millisecond) // polling the kernel for the processes to exit
	}
}

// dropped sums the packet counters of the switch's drop rules.
func (t topology) dropped(ctx context.Context) (int64, error) {
	out, err := run(ctx, "ip", "netns", "exec", t.switchNS(), "nft", "list", "table", "bridge", "kvnf")
	if err != nil {
		return 0, err
	}
	var total int64
	f := strings.Fields(out)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "packets" {
			n, _ := strconv.ParseInt(f[i+1], 10, 64)
			total += n
		}
	}
	return total, nil
}
