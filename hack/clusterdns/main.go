// Command clusterdns is the real test cluster's DNS (hack/cluster): it
// answers A queries for Services, <service>.<namespace>.svc.<domain>, with
// their ClusterIP, read from the API server, as a cluster's DNS add-on
// does, so pods reach each other by the names users write (a sample's
// http://devnet.faucet-devnet.svc:20443). Every other name is NXDOMAIN at
// once: the cluster has no way out, and a lookup must not hang. Headless
// Services and pod records are not served; the tests use neither.
//
// Usage: clusterdns --kubeconfig FILE --listen IP:53 [--domain cluster.local]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"golang.org/x/net/dns/dnsmessage"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/clientcmd"
)

// ttl is short: a test deletes and recreates Services.
const ttl = 5

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster")
	listen := flag.String("listen", "", "UDP address to answer on, e.g. 10.250.0.1:53")
	domain := flag.String("domain", "cluster.local", "the cluster's domain")
	flag.Parse()
	if *kubeconfig == "" || *listen == "" {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, *kubeconfig, *listen, *domain)
	stop()
	if err != nil {
		log.Fatalf("clusterdns: %v", err)
	}
}

func run(ctx context.Context, kubeconfig, listen, domain string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	services := factory.Core().V1().Services().Lister()
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("sync %v: %w", typ, ctx.Err())
		}
	}
	var lc net.ListenConfig
	pc, err := lc.ListenPacket(ctx, "udp", listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	go func() { <-ctx.Done(); pc.Close() }()
	log.Printf("clusterdns: answering for *.svc.%s on %s", domain, listen)
	z := zone{services: services, suffix: ".svc." + strings.TrimSuffix(domain, ".") + "."}
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil //nolint:nilerr // the read failed because we closed it to stop
			}
			return fmt.Errorf("read: %w", err)
		}
		if out, err := z.answer(buf[:n]); err == nil {
			_, _ = pc.WriteTo(out, from) // a lost answer is the client's retry
		}
	}
}

type zone struct {
	services listersv1.ServiceLister
	suffix   string // ".svc.cluster.local."
}

// answer builds the reply to one query message.
func (z zone) answer(msg []byte) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired}
	ip, known := z.lookup(q.Name.String())
	if !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), rh)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if known && q.Type == dnsmessage.TypeA && q.Class == dnsmessage.ClassINET {
		if err := b.StartAnswers(); err != nil {
			return nil, err
		}
		rr := dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: ttl}
		if err := b.AResource(rr, dnsmessage.AResource{A: ip.As4()}); err != nil {
			return nil, err
		}
	}
	// Any other type of a known name: no records, no error (NODATA), so
	// a resolver asking A and AAAA together keeps the A answer.
	return b.Finish()
}

// lookup finds the ClusterIP of <service>.<namespace>.svc.<domain>.
func (z zone) lookup(name string) (netip.Addr, bool) {
	rest, ok := strings.CutSuffix(strings.ToLower(name), z.suffix)
	if !ok {
		return netip.Addr{}, false
	}
	svc, ns, ok := strings.Cut(rest, ".")
	if !ok || strings.Contains(ns, ".") {
		return netip.Addr{}, false
	}
	s, err := z.services.Services(ns).Get(svc)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			log.Printf("clusterdns: %s: %v", name, err)
		}
		return netip.Addr{}, false
	}
	return clusterIP(s)
}

func clusterIP(s *corev1.Service) (netip.Addr, bool) {
	ip, err := netip.ParseAddr(s.Spec.ClusterIP)
	if err != nil || !ip.Is4() {
		return netip.Addr{}, false // headless ("None") or IPv6
	}
	return ip, true
}
