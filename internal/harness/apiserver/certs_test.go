package apiserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestServingCertificates: each apiserver has its own serving certificate (its own key), with
// the same names as the others, the balancer's 127.0.0.1 among them, as kubeadm issues them to
// the control-plane nodes of one cluster: the leaf alone, on an RSA-2048 key; a restarted server
// gets the one it had.
func TestServingCertificates(t *testing.T) {
	p, err := writePKI(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(p.caCert)
	var certs []*x509.Certificate
	for i := range 3 {
		file, _, err := p.servingPair(i)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := leafOf(file)
		if err != nil {
			t.Fatal(err)
		}
		if pub, ok := cert.PublicKey.(*rsa.PublicKey); !ok || pub.N.BitLen() != 2048 {
			t.Errorf("apiserver %d's key is a %T, want RSA-2048 as kubeadm's", i, cert.PublicKey)
		}
		if data, _ := os.ReadFile(file); strings.Count(string(data), "BEGIN CERTIFICATE") != 1 {
			t.Errorf("apiserver %d's certificate file holds more than its leaf", i)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1"}); err != nil {
			t.Errorf("apiserver %d's certificate for the balancer's 127.0.0.1: %v", i, err)
		}
		for _, prev := range certs {
			if prev.Equal(cert) || slices.Equal(prev.SubjectKeyId, cert.SubjectKeyId) && len(cert.SubjectKeyId) > 0 {
				t.Errorf("apiserver %d serves the certificate of another", i)
			}
			if !slices.Equal(prev.DNSNames, cert.DNSNames) || fmt.Sprint(prev.IPAddresses) != fmt.Sprint(cert.IPAddresses) {
				t.Errorf("apiserver %d's names %v %v differ from another's %v %v", i, cert.DNSNames, cert.IPAddresses, prev.DNSNames, prev.IPAddresses)
			}
		}
		certs = append(certs, cert)
	}
	again, _, _ := p.servingPair(1)
	if cert, err := leafOf(again); err != nil || !cert.Equal(certs[1]) {
		t.Errorf("a restarted apiserver 1 serves another certificate (%v)", err)
	}
}

// TestServingKeyECDSA: with Options.ServingKey "ecdsa-p256" the serving certificates are on
// P-256 keys that crypto/tls loads; an unknown key type is refused with a clear error.
func TestServingKeyECDSA(t *testing.T) {
	p, err := writePKI(t.TempDir(), ServingKeyECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := p.servingPair(0)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := leafOf(certFile)
	if err != nil {
		t.Fatal(err)
	}
	if pub, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Errorf("the key is a %T, want ECDSA P-256", cert.PublicKey)
	}
	if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
		t.Errorf("the pair does not load: %v", err)
	}
	if _, err := writePKI(t.TempDir(), "ed25519"); err == nil || !strings.Contains(err.Error(), `"ed25519"`) {
		t.Errorf("an unknown serving key: err %v, want one naming it", err)
	}
}
