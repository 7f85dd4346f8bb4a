package apiserver

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// pki holds the files written for one cluster: a CA, the service-account signing key, and a
// serving certificate for loopback signed by the CA for each kube-apiserver, written when it
// first starts. Each apiserver has its own, as kubeadm gives each control-plane node its own: a
// client behind a balancer that passes TLS through can tell the apiservers apart by it. As
// kubeadm's by default, each is the leaf alone on an RSA-2048 key (ECDSA P-256 when Options say
// so, as kubeadm's encryptionAlgorithm ECDSA-P256 gives): a TLS handshake costs the
// apiserver and the wire what it costs in a kubeadm cluster (the CA's ECDSA key is the
// harness's own, and signs nothing a client sees in a handshake).
type pki struct {
	dir         string
	caPEM       []byte
	caCert      *x509.Certificate
	caKey       *ecdsa.PrivateKey
	saKey       string
	saPublicKey string

	servingKey string // Options.ServingKey

	mu      sync.Mutex
	serving map[int][2]string // server index: its certificate and key files
}

// writePKI generates the cluster's keys in dir. Everything is generated in-process with crypto/*
// so no external tool (openssl) is needed.
func writePKI(dir, servingKey string) (*pki, error) {
	switch servingKey {
	case "", ServingKeyRSA2048, ServingKeyECDSAP256:
	default:
		return nil, fmt.Errorf("serving key %q: want %q or %q", servingKey, ServingKeyRSA2048, ServingKeyECDSAP256)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kretry-e2e-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}

	// Service-account tokens are signed with RSA (RS256), as kube-apiserver expects by default.
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}

	p := &pki{
		dir:         dir,
		caPEM:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		caCert:      caCert,
		caKey:       caKey,
		saKey:       filepath.Join(dir, "sa.key"),
		saPublicKey: filepath.Join(dir, "sa.pub"),
		serving:     map[int][2]string{},
		servingKey:  servingKey,
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		filepath.Join(dir, "ca.crt"): p.caPEM,
		p.saKey:                      pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}),
		p.saPublicKey:                pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}),
	}
	if err := writeFiles(files); err != nil {
		return nil, err
	}
	return p, nil
}

// servingPair returns the serving certificate and key files of the index-th apiserver, issuing
// them the first time (a restarted apiserver serves the certificate it had).
func (p *pki) servingPair(index int) (cert, key string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pair, ok := p.serving[index]; ok {
		return pair[0], pair[1], nil
	}
	servingKey, keyPEM, err := newServingKey(p.servingKey)
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	servingTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(int64(2 + index)),
		Subject:      pkix.Name{CommonName: fmt.Sprintf("kube-apiserver-%d", index)},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
	}
	servingDER, err := x509.CreateCertificate(rand.Reader, servingTmpl, p.caCert, servingKey.Public(), p.caKey)
	if err != nil {
		return "", "", err
	}
	cert = filepath.Join(p.dir, fmt.Sprintf("serving-%d.crt", index))
	key = filepath.Join(p.dir, fmt.Sprintf("serving-%d.key", index))
	err = writeFiles(map[string][]byte{
		cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: servingDER}),
		key:  keyPEM,
	})
	if err != nil {
		return "", "", err
	}
	p.serving[index] = [2]string{cert, key}
	return cert, key, nil
}

// newServingKey generates a serving key of the type kind (see Options.ServingKey) and its PEM.
func newServingKey(kind string) (crypto.Signer, []byte, error) {
	if kind == ServingKeyECDSAP256 {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		der, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		return key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, err
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), nil
}

func writeFiles(files map[string][]byte) error {
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return fmt.Errorf("apiserver: write %s: %w", filepath.Base(path), err)
		}
	}
	return nil
}
