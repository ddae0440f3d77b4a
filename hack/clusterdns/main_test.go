package main

import (
	"fmt"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

func TestAnswer(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, s := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "devnet", Namespace: "faucet-devnet"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.20"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: "db"}, Spec: corev1.ServiceSpec{ClusterIP: "None"}},
	} {
		if err := idx.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	z := zone{services: listersv1.NewServiceLister(idx), suffix: ".svc.cluster.local."}
	for _, c := range []struct {
		name  string
		typ   dnsmessage.Type
		rcode dnsmessage.RCode
		a     string // "" = no answer
	}{
		{"devnet.faucet-devnet.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, "10.96.0.20"},
		{"DEVNET.faucet-devnet.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, "10.96.0.20"},
		{"devnet.faucet-devnet.svc.cluster.local.", dnsmessage.TypeAAAA, dnsmessage.RCodeSuccess, ""},
		{"devnet.other.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeNameError, ""},
		{"pg.db.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeNameError, ""},
		{"devnet.faucet-devnet.svc.faucet-devnet.svc.cluster.local.", dnsmessage.TypeA, dnsmessage.RCodeNameError, ""},
		{"example.com.", dnsmessage.TypeA, dnsmessage.RCodeNameError, ""},
	} {
		q := dnsmessage.Message{
			Header:    dnsmessage.Header{ID: 7, RecursionDesired: true},
			Questions: []dnsmessage.Question{{Name: dnsmessage.MustNewName(c.name), Type: c.typ, Class: dnsmessage.ClassINET}},
		}
		raw, err := q.Pack()
		if err != nil {
			t.Fatal(err)
		}
		out, err := z.answer(raw)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var m dnsmessage.Message
		if err := m.Unpack(out); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if m.Header.ID != 7 || !m.Header.Response || m.Header.RCode != c.rcode {
			t.Errorf("%s %v: header %+v, want rcode %v", c.name, c.typ, m.Header, c.rcode)
		}
		switch {
		case c.a == "" && len(m.Answers) != 0:
			t.Errorf("%s %v: answers %v, want none", c.name, c.typ, m.Answers)
		case c.a != "":
			if len(m.Answers) != 1 {
				t.Fatalf("%s: %d answers", c.name, len(m.Answers))
			}
			a := m.Answers[0].Body.(*dnsmessage.AResource).A
			if got := net4(a); got != c.a {
				t.Errorf("%s: %s, want %s", c.name, got, c.a)
			}
		}
	}
}

func net4(a [4]byte) string {
	return fmt.Sprintf("%d.%d.%d.%d", a[0], a[1], a[2], a[3])
}
